"""Provider-neutral request/response, the HTTP error mapping, and the transport the real providers' streams
(:mod:`.sse`) read."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import httpx
from pydantic import BaseModel, Field

from agent_tools._errors import ProviderRequestError, ProviderRetryableError
from agent_tools._messages import Message
from agent_tools._retry_after import parse_retry_after
from agent_tools.contracts._output import OutputContract

# Receives each piece of the reply's text as the provider streams it (the llm_step's publisher).
TextSink = Callable[[str], None]

# Bounds on what a provider may send: a longer error body, a longer reply or a longer line is broken or
# hostile, and reading it whole would cost the worker's memory before anything could refuse it.
MAX_ERROR_BODY_BYTES = 64_000
MAX_BODY_BYTES = 32_000_000
# The reply travels whole as the activity's result (Temporal's payload limit is about 2 MB).
MAX_REPLY_CHARS = 1_000_000


class ToolSchema(BaseModel):
    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    model: str
    messages: list[Message]
    tools: list[ToolSchema] = Field(default_factory=list)
    max_tokens: int | None = None
    # Who is asking (agent, session): the scripted model picks its script by it; real providers ignore it.
    meta: dict[str, Any] = Field(default_factory=dict)
    # Structured results: the final answer must match this schema (providers that can enforce it do).
    output: OutputContract | None = None


class ModelResponse(BaseModel):
    message: Message
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None


def estimated_response(request: ModelRequest, message: Message) -> ModelResponse:
    """The response of an in-process model, with tokens estimated at four characters each, so that usage
    and cost are exercised offline."""
    chars_in = sum(len(m.content) for m in request.messages)
    return ModelResponse(
        message=message,
        input_tokens=chars_in // 4 + 1,
        output_tokens=len(message.content) // 4 + 1,
        finish_reason="tool_calls" if message.tool_calls else "stop",
    )


class Provider(Protocol):
    name: str

    async def complete(self, request: ModelRequest, on_text: TextSink | None = None) -> ModelResponse:
        """The whole reply; with ``on_text``, each piece of its text is handed over as it arrives."""
        ...


class ModelProvider(Protocol):
    """Turns a session's model spec (``openai:gpt-4.1-mini``, ``scripted:path``, ...) into the provider that
    answers it. The worker's default is :class:`~agent_tools.activities._providers.registry.ProviderRegistry`;
    ``AgentToolsPlugin(model_provider=...)`` replaces it (``agent_tools.testing.FunctionModel`` is one)."""

    def resolve(self, spec: str) -> tuple[Provider, str]:
        """The provider for ``spec`` and the model name to ask it for.

        Raises:
            ConfigurationError: no provider answers ``spec``.
        """
        ...

    def check(self, spec: str) -> None:
        """Refuse a spec no call could use, before a session starts on it (no network).

        Raises:
            ConfigurationError: why ``spec`` cannot be used.
        """
        ...


_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Model text as the rest of the engine can carry it: a NUL (PostgreSQL text refuses it) and a lone
    surrogate (JSON escapes like ``\\ud800`` decode to one, and no UTF-8 encoder takes it, so a payload
    holding it could never be written) become U+FFFD, as everywhere else (``_boundaries.clean_text``)."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return _LONE_SURROGATE.sub("\ufffd", text)


class ReplyText:
    """A reply's text as it streams in: cleaned, bounded, and handed to the sink piece by piece."""

    def __init__(self, provider: str, sink: TextSink | None) -> None:
        self.provider = provider
        self.sink = sink
        self.parts: list[str] = []
        self.size = 0

    def add(self, piece: str) -> None:
        if not piece:
            return
        piece = clean_text(piece)
        self.size += len(piece)
        if self.size > MAX_REPLY_CHARS:
            raise ProviderRequestError(f"{self.provider}: reply longer than {MAX_REPLY_CHARS} characters")
        self.parts.append(piece)
        if self.sink is not None:
            self.sink(piece)

    def text(self) -> str:
        return "".join(self.parts)


def clean_value(value: Any) -> Any:
    """:func:`clean_text` over every string (keys included) of a decoded JSON value."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    return value


def parse_arguments(text: str) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments from the JSON text a model produced: (object, None), or ({}, the text) when it
    is not a JSON object (the call then fails with a tool error the model can act on)."""
    if not text.strip():
        return {}, None
    try:
        parsed = clean_value(json.loads(text))
    except (ValueError, RecursionError):
        # RecursionError: nesting deeper than the decoder (or the cleaner) can follow is no argument object.
        return {}, clean_text(text[:2000])
    if isinstance(parsed, dict):
        return parsed, None
    return {}, clean_text(text[:2000])


def token_count(value: Any) -> int:
    """A token count from a provider's usage: a non-negative integer, else 0 (never a crash on junk)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _provider_message(body: bytes, reason: str) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return clean_text(body[:500].decode("utf-8", "replace")) or reason
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return clean_text(str(err["message"]))[:2000]
        if isinstance(err, str):
            return clean_text(err)[:2000]
        if data.get("message"):
            return clean_text(str(data["message"]))[:2000]
    return clean_text(str(data))[:500]


def raise_for_status(provider: str, status: int, headers: httpx.Headers, body: bytes, reason: str) -> None:
    """429/5xx are retryable (with Retry-After), other 4xx are not; both keep the provider's message."""
    if status == 429 or status >= 500:
        raise ProviderRetryableError(
            f"{provider} HTTP {status}: {_provider_message(body, reason)}",
            status=status,
            retry_after=parse_retry_after(headers.get("retry-after")),
        )
    if status >= 400:
        raise ProviderRequestError(f"{provider} HTTP {status}: {_provider_message(body, reason)}", status=status)


async def read_bounded(response: httpx.Response, limit: int, provider: str) -> bytes:
    """The body, refusing one longer than ``limit`` bytes instead of holding it all in memory."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise ProviderRequestError(f"{provider}: response larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def decode_object(provider: str, body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise ProviderRequestError(f"{provider}: malformed response (not JSON): {body[:200]!r}") from exc
    if not isinstance(data, dict):
        raise ProviderRequestError(f"{provider}: malformed response (not a JSON object)")
    return data


@asynccontextmanager
async def open_stream(
    client: httpx.AsyncClient, provider: str, url: str, *, headers: dict[str, str], payload: dict[str, Any]
) -> AsyncIterator[httpx.Response]:
    """POST and yield the response once its status is good; transport failures (also those while the
    caller reads the stream) become retryable errors, HTTP errors are mapped as :func:`raise_for_status`."""
    try:
        async with client.stream("POST", url, headers=headers, json=payload) as response:
            if response.status_code >= 400:
                body = await read_bounded(response, MAX_ERROR_BODY_BYTES, provider)
                raise_for_status(provider, response.status_code, response.headers, body, response.reason_phrase)
            yield response
    except httpx.TimeoutException as exc:
        raise ProviderRetryableError(f"{provider}: request timed out ({exc.__class__.__name__})") from exc
    except httpx.TransportError as exc:
        # Before the status: no connection; after it: the stream broke off. Either may work next time.
        raise ProviderRetryableError(f"{provider}: connection failed or stream interrupted: {exc!r}") from exc


def is_event_stream(response: httpx.Response) -> bool:
    content_type: str = response.headers.get("content-type", "")
    return content_type.split(";")[0].strip().lower() == "text/event-stream"


async def post_json(
    client: httpx.AsyncClient, provider: str, url: str, *, headers: dict[str, str], payload: dict[str, Any]
) -> dict[str, Any]:
    """POST and map failures: 429/5xx/timeouts are retryable, other 4xx and nonsense are not."""
    async with open_stream(client, provider, url, headers=headers, payload=payload) as response:
        body = await read_bounded(response, MAX_BODY_BYTES, provider)
    return decode_object(provider, body)
