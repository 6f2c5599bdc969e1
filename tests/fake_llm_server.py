"""A real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions and Anthropic messages wire
formats from a queue of canned replies, recording every request it gets."""

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
                data = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        return Handler


@contextmanager
def fake_llm_server() -> Iterator[FakeLLMServer]:
    fake = FakeLLMServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), fake.handler())
    fake.base_url = f"http://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()
