"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions and Anthropic messages wire
formats from a queue of canned replies, recording every request it gets.

A reply is a whole JSON body, or a stream: server-sent events written one by one with a pause between
them (``openai_stream``, ``anthropic_stream``), or raw byte chunks for hostile streams."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    delay: float = 0.0
    # A streamed reply: chunks written in order, ``chunk_delay`` seconds apart, then the connection closes.
    chunks: list[bytes] | None = None
    chunk_delay: float = 0.0


def openai_reply(
    content: str | None = None,
    tool_calls: list[tuple[str, str, dict[str, Any] | str]] | None = None,
    *,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
) -> Reply:
    calls = [
        {
            "id": cid,
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for cid, name, args in (tool_calls or [])
    ]
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = calls
    return Reply(body={
        "id": "chatcmpl-1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    })  # fmt: skip


def anthropic_reply(
    text: str | None = None,
    tool_uses: list[tuple[str, str, dict[str, Any]]] | None = None,
    *,
    input_tokens: int = 13,
    output_tokens: int = 5,
) -> Reply:
    content: list[dict[str, Any]] = []
    if text:
        content.append({"type": "text", "text": text})
    for tid, name, args in tool_uses or []:
        content.append({"type": "tool_use", "id": tid, "name": name, "input": args})
    return Reply(body={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude", "content": content,
        "stop_reason": "tool_use" if tool_uses else "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    })  # fmt: skip


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event."""
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def openai_stream(
    pieces: list[str],
    tool_calls: list[tuple[str, str, str]] | None = None,
    *,
    prompt_tokens: int = 11,
    completion_tokens: int = 7,
    chunk_delay: float = 0.0,
    done: bool = True,
) -> Reply:
    """Text deltas, then each tool call as a name delta and its arguments in two argument deltas, the
    finish reason, the usage chunk (stream_options.include_usage) and ``[DONE]``."""
    chunks = [sse({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})]
    chunks += [sse({"choices": [{"index": 0, "delta": {"content": p}}]}) for p in pieces]
    for i, (cid, name, args) in enumerate(tool_calls or []):
        half = len(args) // 2
        chunks.append(
            sse(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [
                                    {
                                        "index": i,
                                        "id": cid,
                                        "type": "function",
                                        "function": {"name": name, "arguments": ""},
                                    }
                                ]
                            },
                        }
                    ]
                }
            )
        )
        for part in (args[:half], args[half:]):
            chunks.append(
                sse(
                    {
                        "choices": [
                            {"index": 0, "delta": {"tool_calls": [{"index": i, "function": {"arguments": part}}]}}
                        ]
                    }
                )
            )
    finish = "tool_calls" if tool_calls else "stop"
    chunks.append(sse({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    chunks.append(
        sse({"choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}})
    )
    if done:
        chunks.append(sse("[DONE]"))
    return Reply(chunks=chunks, chunk_delay=chunk_delay)  # fmt: skip


def anthropic_stream(
    pieces: list[str],
    tool_uses: list[tuple[str, str, str]] | None = None,
    *,
    input_tokens: int = 13,
    output_tokens: int = 5,
    chunk_delay: float = 0.0,
    stop: bool = True,
) -> Reply:
    """message_start, a text block of deltas, a tool_use block per call (its input in two partial_json
    deltas), message_delta with the stop reason and usage, message_stop; pings between."""
    chunks = [
        sse(
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "role": "assistant",
                    "content": [],
                    "usage": {"input_tokens": input_tokens, "output_tokens": 1},
                },
            },
            "message_start",
        ),
        sse({"type": "ping"}, "ping"),
        sse(
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            "content_block_start",
        ),
    ]
    chunks += [
        sse(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            "content_block_delta",
        )
        for p in pieces
    ]
    chunks.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    for i, (tid, name, args) in enumerate(tool_uses or [], start=1):
        half = len(args) // 2
        chunks.append(
            sse(
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "tool_use", "id": tid, "name": name, "input": {}},
                },
                "content_block_start",
            )
        )
        for part in (args[:half], args[half:]):
            chunks.append(
                sse(
                    {
                        "type": "content_block_delta",
                        "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": part},
                    },
                    "content_block_delta",
                )
            )
        chunks.append(sse({"type": "content_block_stop", "index": i}, "content_block_stop"))
    chunks.append(
        sse(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if tool_uses else "end_turn"},
                "usage": {"output_tokens": output_tokens},
            },
            "message_delta",
        )
    )
    if stop:
        chunks.append(sse({"type": "message_stop"}, "message_stop"))
    return Reply(chunks=chunks, chunk_delay=chunk_delay)  # fmt: skip


class FakeLLMServer:
    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        self.base_url = ""

    def queue(self, *replies: Reply) -> None:
        with self.lock:
            self.replies.extend(replies)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server.lock:
                    server.requests.append(
                        {"path": self.path, "headers": dict(self.headers), "body": body, "at": time.monotonic()}
                    )
                    reply = (
                        server.replies.popleft()
                        if server.replies
                        else Reply(status=500, body={"error": {"message": "no reply queued"}})
                    )
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.chunks is not None:
                    self._stream(reply)
                    return
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: Reply) -> None:
                # HTTP/1.0 without a content-length: the body ends when the connection closes, so a stream
                # that stops early is a clean close in the middle of a reply, as a cut proxy gives.
                self.send_response(reply.status)
                self.send_header("content-type", "text/event-stream")
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                assert reply.chunks is not None
                try:
                    for i, chunk in enumerate(reply.chunks):
                        if i and reply.chunk_delay:
                            time.sleep(reply.chunk_delay)
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a killed worker): nothing to finish

        return Handler


@contextmanager
def fake_llm_server() -> Iterator[FakeLLMServer]:
    fake = FakeLLMServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    # shutdown() waits for the serve loop's next poll: poll often, or every test pays up to 0.5 s.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
