"""Server-sent events, as the OpenAI-compatible and Anthropic streaming APIs send them.

The parser is strict about size and lenient about form, as the SSE specification asks: comment lines
(``: keep-alive``) and unknown fields are skipped, ``\\r\\n``, ``\\n`` and ``\\r`` all end a line, and bytes
that are not UTF-8 become U+FFFD. What no well-behaved server sends is refused with a provider error: a line
longer than :data:`MAX_LINE_BYTES` (a 10 MB line would otherwise sit in memory whole) or a stream longer
than :data:`MAX_STREAM_BYTES`. :class:`HttpProvider`, the HTTP providers' base, reads its replies here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from agent_tools._errors import ProviderRequestError, ProviderRetryableError
from agent_tools._messages import Message, ToolCall
from agent_tools.activities._providers.base import (
    MAX_BODY_BYTES,
    ModelRequest,
    ModelResponse,
    ReplyText,
    TextSink,
    decode_object,
    is_event_stream,
    open_stream,
    read_bounded,
)

MAX_LINE_BYTES = 1_000_000
MAX_STREAM_BYTES = 32_000_000


@dataclass(frozen=True)
class SseEvent:
    event: str
    data: str


async def _lines(chunks: AsyncIterator[bytes], provider: str) -> AsyncIterator[bytes]:
    buffer = b""
    total = 0
    async for chunk in chunks:
        total += len(chunk)
        if total > MAX_STREAM_BYTES:
            raise ProviderRequestError(f"{provider}: stream longer than {MAX_STREAM_BYTES} bytes")
        buffer += chunk
        start = 0
        while (cut := _line_end(buffer, start)) is not None:
            end, skip = cut
            if end - start > MAX_LINE_BYTES:
                raise ProviderRequestError(f"{provider}: stream line longer than {MAX_LINE_BYTES} bytes")
            yield buffer[start:end]
            start = end + skip
        buffer = buffer[start:]
        if len(buffer) > MAX_LINE_BYTES:
            raise ProviderRequestError(f"{provider}: stream line longer than {MAX_LINE_BYTES} bytes")
    if buffer.rstrip(b"\r"):
        yield buffer.rstrip(b"\r")


def _line_end(buffer: bytes, start: int) -> tuple[int, int] | None:
    """Where the line from ``start`` ends and how long its terminator is (``\\r\\n`` counts as one)."""
    cr = buffer.find(b"\r", start)
    lf = buffer.find(b"\n", start)
    if cr == -1 and lf == -1:
        return None
    if cr == -1 or (lf != -1 and lf < cr):
        return lf, 1
    if cr + 1 < len(buffer):
        return cr, 2 if buffer[cr + 1 : cr + 2] == b"\n" else 1
    return None  # a lone \r at the end may be the first half of \r\n: wait for the next chunk


async def sse_events(response: httpx.Response, provider: str) -> AsyncIterator[SseEvent]:
    """The events of a ``text/event-stream`` response, in order."""
    event = ""
    data: list[str] = []
    async for raw in _lines(response.aiter_bytes(), provider):
        line = raw.replace(b"\x00", b"").decode("utf-8", "replace")
        if not line:
            if data:
                yield SseEvent(event=event or "message", data="\n".join(data))
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:
        yield SseEvent(event=event or "message", data="\n".join(data))


def event_object(provider: str, event: SseEvent) -> dict[str, Any]:
    """An event's data as a JSON object, or a provider error that quotes the start of what came."""
    try:
        value = json.loads(event.data)
    except (ValueError, RecursionError) as exc:
        raise ProviderRequestError(f"{provider}: malformed stream event (not JSON): {event.data[:200]!r}") from exc
    if not isinstance(value, dict):
        raise ProviderRequestError(f"{provider}: malformed stream event (not a JSON object): {event.data[:200]!r}")
    return value


@dataclass
class StreamedReply:
    """A provider's reply as its events build it: the text so far, and whether the reply has ended. Each
    provider's subclass reads its own events and keeps its tool calls and usage."""

    provider: str
    text: ReplyText
    done: bool = False

    def take(self, event: dict[str, Any]) -> None:
        """Read one event of the stream (``done`` once the reply has ended)."""
        raise NotImplementedError

    def response(self) -> ModelResponse:
        """The whole reply, once the stream is over."""
        raise NotImplementedError

    def ended(self) -> None:
        """Raise unless the reply ended: a stream that closed cleanly before (a proxy cut it, a worker
        died) is worth the same request again."""
        if not self.done:
            raise ProviderRetryableError(f"{self.provider}: stream ended before the reply was complete")

    def reply(
        self, calls: list[ToolCall], *, input_tokens: int, output_tokens: int, finish_reason: str | None
    ) -> ModelResponse:
        return ModelResponse(
            message=Message(role="assistant", content=self.text.text(), tool_calls=calls),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            finish_reason=finish_reason,
        )


async def complete_streamed(
    client: httpx.AsyncClient,
    provider: str,
    url: str,
    *,
    headers: dict[str, str],
    payload: dict[str, Any],
    reply_type: type[StreamedReply],
    whole: Callable[[dict[str, Any]], ModelResponse],
    on_text: TextSink | None,
) -> ModelResponse:
    """POST, then feed a ``reply_type`` the stream's events until it is done (``data: [DONE]`` ends
    OpenAI's), its text going to ``on_text``; a server that answered one JSON body instead is parsed by
    ``whole``."""
    reply = reply_type(provider, ReplyText(provider, on_text))
    async with open_stream(client, provider, url, headers=headers, payload=payload) as response:
        if not is_event_stream(response):
            return whole(decode_object(provider, await read_bounded(response, MAX_BODY_BYTES, provider)))
        async for event in sse_events(response, provider):
            if event.data.strip() == "[DONE]":
                reply.done = True
            else:
                reply.take(event_object(provider, event))
            if reply.done:
                break
    return reply.response()


class HttpProvider:
    """What the HTTP providers share: the worker's client (its own retries off), the endpoint and key,
    whether to ask for a stream, and reading the reply (server-sent events, or one JSON body)."""

    default_name = "http"
    # Below ``base_url``: where the request goes.
    path = ""
    # What reads the streamed reply's events.
    reply_type: type[StreamedReply]

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        base_url: str,
        api_key: str | None,
        name: str | None = None,
        stream: bool = True,
    ) -> None:
        self.client = client
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.name = name or self.default_name
        self.stream = stream

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def payload(self, request: ModelRequest) -> dict[str, Any]:
        raise NotImplementedError

    def whole(self, body: dict[str, Any]) -> ModelResponse:
        """The reply of a server that answered with one JSON body instead of a stream."""
        raise NotImplementedError

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelResponse:
        return await complete_streamed(
            self.client,
            self.name,
            f"{self.base_url}{self.path}",
            headers=self.headers(),
            payload=self.payload(request),
            reply_type=self.reply_type,
            whole=self.whole,
            on_text=on_text,
        )
