"""Streamed replies from both providers against a real HTTP server on 127.0.0.1: text and tool-call deltas,
usage from the stream's end, and junk a broken or hostile server may send."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_tools._errors import ProviderRequestError, ProviderRetryableError
from agent_tools._messages import Message
from agent_tools.activities._providers.anthropic import AnthropicProvider
from agent_tools.activities._providers.base import ModelRequest
from agent_tools.activities._providers.openai_compat import OpenAIProvider
from tests.support.fake_llm import FakeLLMServer, Reply, anthropic_stream, fake_llm_server, openai_stream, sse

REQUEST = ModelRequest(model="m", messages=[Message(role="user", content="hi")])


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with fake_llm_server() as server:
        yield server


def provider(kind: str, http: httpx.AsyncClient, llm: FakeLLMServer) -> Any:
    if kind == "openai":
        return OpenAIProvider(http, base_url=llm.base_url, api_key="k")
    return AnthropicProvider(http, base_url=llm.base_url, api_key="k")


def stream(kind: str, pieces: list[str], calls: list[tuple[str, str, str]] | None = None, **kw: Any) -> Reply:
    return openai_stream(pieces, calls, **kw) if kind == "openai" else anthropic_stream(pieces, calls, **kw)


async def collect(kind: str, llm: FakeLLMServer, reply: Reply) -> tuple[Any, list[tuple[float, str]]]:
    llm.queue(reply)
    seen: list[tuple[float, str]] = []
    async with httpx.AsyncClient(timeout=10) as http:
        response = await provider(kind, http, llm).complete(REQUEST, lambda t: seen.append((time.monotonic(), t)))
    return response, seen


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_text_and_tool_call_deltas_arrive_as_they_stream(llm: FakeLLMServer, kind: str) -> None:
    pieces = ["Lis", "bon ", "is ", "lovely."]
    calls = [("c1", "lookup", '{"q": "pastel de nata"}'), ("c2", "lookup", '{"q": "tram 28"}')]
    started = time.monotonic()
    response, seen = await collect(kind, llm, stream(kind, pieces, calls, chunk_delay=0.05))
    body = llm.requests[0]["body"]
    assert body["stream"] is True
    if kind == "openai":
        assert body["stream_options"] == {"include_usage": True}
    assert [t for _, t in seen] == pieces
    # Each piece was handed over while the stream was still coming, not at its end.
    assert seen[0][0] - started < time.monotonic() - started - 0.2
    assert response.message.content == "Lisbon is lovely."
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
        ("c1", "lookup", {"q": "pastel de nata"}),
        ("c2", "lookup", {"q": "tram 28"}),
    ]
    expected = (11, 7) if kind == "openai" else (13, 5)
    assert (response.input_tokens, response.output_tokens) == expected  # from the stream's final usage


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_server_that_answers_one_json_body_still_works(llm: FakeLLMServer, kind: str) -> None:
    from tests.support.fake_llm import anthropic_reply, openai_reply

    reply = openai_reply("whole") if kind == "openai" else anthropic_reply("whole")
    response, seen = await collect(kind, llm, reply)
    assert response.message.content == "whole" and seen == []


async def test_endpoint_that_cannot_stream_is_asked_plainly(llm: FakeLLMServer) -> None:
    from tests.support.fake_llm import openai_reply

    llm.queue(openai_reply("plain"))
    async with httpx.AsyncClient() as http:
        response = await OpenAIProvider(http, base_url=llm.base_url, api_key=None, stream=False).complete(REQUEST)
    assert "stream" not in llm.requests[0]["body"] and response.message.content == "plain"


def _openai_text(text: str) -> bytes:
    return sse({"choices": [{"index": 0, "delta": {"content": text}}]})


def _anthropic_text(text: str) -> bytes:
    return sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})


def _text(kind: str, text: str) -> bytes:
    return _openai_text(text) if kind == "openai" else _anthropic_text(text)


def _wrap(kind: str, middle: list[bytes]) -> Reply:
    """A whole, valid stream with ``middle`` in place of its text deltas."""
    base = stream(kind, [])
    assert base.chunks is not None
    head = 1 if kind == "openai" else 3
    return Reply(chunks=[*base.chunks[:head], *middle, *base.chunks[head:]])


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_lenient_where_the_sse_format_allows(llm: FakeLLMServer, kind: str) -> None:
    """Comments, unknown fields, lines without a colon, CRLF and bare CR line ends, NUL bytes (in the framing
    and in the text), lone surrogates and bytes that are not UTF-8: the reply survives, cleaned."""
    middle = [
        b": keep-alive\n\n",
        b"retry: 3000\nid: 7\nnonsense-without-colon\n\n",
        _text(kind, "a").replace(b"\n", b"\r\n"),
        _text(kind, "b").replace(b"\n", b"\r"),
        # json.dumps writes these as the escapes \u0000 and \ud800 (a lone surrogate), as a server may
        _text(kind, "c\x00d").replace(b"data: ", b"data: \x00"),
        _text(kind, "e\ud800f"),
        _text(kind, "g").replace(b'"g"', b'"g\xff"'),
    ]
    response, seen = await collect(kind, llm, _wrap(kind, middle))
    # A NUL in the text (the escape \u0000) becomes U+FFFD; a NUL byte in the stream's framing is dropped.
    assert response.message.content == "abc\ufffdde\ufffdfg\ufffd"
    assert "".join(t for _, t in seen) == response.message.content
    response.model_dump_json()  # a payload that can be written (a lone surrogate could not)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("middle", "error", "needle"),
    [
        ([b"data: {not json\n\n"], ProviderRequestError, "not JSON"),
        ([b"data: [1, 2]\n\n"], ProviderRequestError, "not a JSON object"),
        ([b"data: " + b"[" * 100_000 + b"\n\n"], ProviderRequestError, "not JSON"),
        ([b"data: " + b"x" * 10_000_000 + b"\n\n"], ProviderRequestError, "line longer than"),
    ],
    ids=["not-json", "not-object", "deep-nesting", "10MB-line"],
)
async def test_junk_events_fail_with_a_provider_error(
    llm: FakeLLMServer, kind: str, middle: list[bytes], error: type[Exception], needle: str
) -> None:
    llm.queue(_wrap(kind, middle))
    async with httpx.AsyncClient(timeout=10) as http:
        started = time.monotonic()
        with pytest.raises(error, match=needle):
            await provider(kind, http, llm).complete(REQUEST)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_stream_that_ends_mid_tool_call_is_retryable(llm: FakeLLMServer, kind: str) -> None:
    whole = stream(kind, ["looking"], [("c1", "lookup", '{"q": "x"}')])
    assert whole.chunks is not None
    cut = next(i for i, c in enumerate(whole.chunks) if b'{\\"q' in c or b'"{\\"q' in c or b"partial_json" in c)
    llm.queue(Reply(chunks=whole.chunks[: cut + 1]))  # half the arguments, then the connection closes
    async with httpx.AsyncClient(timeout=10) as http:
        with pytest.raises(ProviderRetryableError, match="stream ended before the reply was complete"):
            await provider(kind, http, llm).complete(REQUEST)


@pytest.mark.parametrize(
    ("kind", "event", "error"),
    [
        ("openai", {"error": {"type": "server_error", "message": "boom"}}, ProviderRetryableError),
        ("openai", {"error": {"type": "invalid_request_error", "message": "bad"}}, ProviderRequestError),
        ("anthropic", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}, ProviderRetryableError),
        ("anthropic", {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}, ProviderRequestError),
    ],
)  # fmt: skip
async def test_error_event_mid_stream_is_mapped(
    llm: FakeLLMServer, kind: str, event: Any, error: type[Exception]
) -> None:
    llm.queue(_wrap(kind, [_text(kind, "par"), sse(event, "error" if kind == "anthropic" else None)]))
    async with httpx.AsyncClient(timeout=10) as http:
        with pytest.raises(error, match="error in stream"):
            await provider(kind, http, llm).complete(REQUEST)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_unparsable_streamed_arguments_become_a_tool_error_not_a_crash(llm: FakeLLMServer, kind: str) -> None:
    response, _ = await collect(kind, llm, stream(kind, [], [("c1", "lookup", '{"q": "unterminated')]))
    call = response.message.tool_calls[0]
    assert call.arguments == {} and call.raw_arguments == '{"q": "unterminated'


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_http_error_before_the_stream_keeps_the_provider_message(llm: FakeLLMServer, kind: str) -> None:
    llm.queue(Reply(status=529 if kind == "anthropic" else 503, body={"error": {"message": "overloaded now"}}))
    async with httpx.AsyncClient(timeout=10) as http:
        with pytest.raises(ProviderRetryableError, match="overloaded now"):
            await provider(kind, http, llm).complete(REQUEST)
