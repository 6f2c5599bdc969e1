"""Providers against a real HTTP server on 127.0.0.1 speaking each wire format."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agent_tools._errors import ProviderRequestError, ProviderRetryableError
from agent_tools._messages import Message, ToolCall
from agent_tools._retry_after import parse_retry_after
from agent_tools._session import SessionStatus
from agent_tools._settings import Price, ProviderEndpoint, Settings
from agent_tools.activities._providers.anthropic import AnthropicProvider
from agent_tools.activities._providers.base import ModelRequest, ToolSchema
from agent_tools.activities._providers.openai_compat import OpenAIProvider
from tests.support.fake_llm import FakeLLMServer, Reply, anthropic_reply, fake_llm_server, openai_reply
from tests.support.fixture_types import WorkerFor

TOOLS = [
    ToolSchema(
        name="lookup", description="Look up", parameters={"type": "object", "properties": {"q": {"type": "string"}}}
    )
]
CONVERSATION = [
    Message(role="system", content="be brief"),
    Message(role="user", content="hi"),
    Message(role="assistant", content="", tool_calls=[ToolCall(id="c1", name="lookup", arguments={"q": "a"}),
                                                     ToolCall(id="c2", name="lookup", arguments={"q": "b"})]),
    Message(role="tool", tool_call_id="c1", content="A"),
    Message(role="tool", tool_call_id="c2", content="B"),
]  # fmt: skip


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with fake_llm_server() as server:
        yield server


async def test_openai_wire_format_and_parallel_tool_calls(llm: FakeLLMServer) -> None:
    llm.queue(openai_reply(None, [("t1", "lookup", {"q": "x"}), ("t2", "lookup", {"q": "y"})]))
    async with httpx.AsyncClient() as http:
        provider = OpenAIProvider(http, base_url=f"{llm.base_url}/v1", api_key="sk-test")
        resp = await provider.complete(
            ModelRequest(model="gpt-test", messages=CONVERSATION, tools=TOOLS, max_tokens=50)
        )
    sent = llm.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["authorization"] == "Bearer sk-test"
    body = sent["body"]
    assert body["model"] == "gpt-test" and body["max_tokens"] == 50 and body["parallel_tool_calls"] is True
    assert body["tools"][0]["function"]["name"] == "lookup"
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant", "tool", "tool"]
    assert body["messages"][2]["tool_calls"][1]["function"]["arguments"] == '{"q": "b"}'
    assert body["messages"][4]["tool_call_id"] == "c2"
    assert [(c.id, c.name, c.arguments) for c in resp.message.tool_calls] == [
        ("t1", "lookup", {"q": "x"}),
        ("t2", "lookup", {"q": "y"}),
    ]
    assert (resp.input_tokens, resp.output_tokens) == (11, 7)


async def test_anthropic_wire_format_merges_tool_results(llm: FakeLLMServer) -> None:
    llm.queue(anthropic_reply("thinking", [("tu1", "lookup", {"q": "z"})]))
    async with httpx.AsyncClient() as http:
        provider = AnthropicProvider(http, base_url=llm.base_url, api_key="ak-test")
        resp = await provider.complete(ModelRequest(model="claude-test", messages=CONVERSATION, tools=TOOLS))
    sent = llm.requests[0]
    assert sent["path"] == "/v1/messages"
    assert sent["headers"]["x-api-key"] == "ak-test" and sent["headers"]["anthropic-version"] == "2023-06-01"
    body = sent["body"]
    assert body["system"] == "be brief"
    assert body["tools"][0]["input_schema"]["properties"]["q"]["type"] == "string"
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert [b["tool_use_id"] for b in body["messages"][2]["content"]] == ["c1", "c2"]
    assert resp.message.content == "thinking"
    assert resp.message.tool_calls[0].arguments == {"q": "z"}
    assert (resp.input_tokens, resp.output_tokens) == (13, 5)


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
@pytest.mark.parametrize(
    ("reply", "error", "needle"),
    [
        (Reply(status=429, body={"error": {"message": "slow down"}}, headers={"retry-after": "7"}), ProviderRetryableError, "slow down"),
        (Reply(status=503, body={"error": {"message": "overloaded"}}), ProviderRetryableError, "overloaded"),
        (Reply(status=400, body={"error": {"message": "bad tool schema"}}), ProviderRequestError, "bad tool schema"),
        (Reply(status=401, body={"error": {"type": "auth", "message": "invalid x-api-key"}}), ProviderRequestError, "invalid x-api-key"),
        (Reply(status=200, raw=b"<html>proxy error</html>"), ProviderRequestError, "not JSON"),
        (Reply(status=200, body={"unexpected": True}), ProviderRequestError, "malformed"),
    ],
)  # fmt: skip
async def test_error_mapping(llm: FakeLLMServer, kind: str, reply: Reply, error: type[Exception], needle: str) -> None:
    llm.queue(reply)
    async with httpx.AsyncClient() as http:
        provider: Any = (
            OpenAIProvider(http, base_url=llm.base_url, api_key="k")
            if kind == "openai"
            else AnthropicProvider(http, base_url=llm.base_url, api_key="k")
        )
        with pytest.raises(error) as info:
            await provider.complete(ModelRequest(model="m", messages=CONVERSATION[:2]))
    assert needle in str(info.value)
    if reply.status == 429:
        assert info.value.retry_after == 7.0  # type: ignore[attr-defined]


async def test_timeout_is_retryable(llm: FakeLLMServer) -> None:
    llm.queue(Reply(body={}, delay=1.0))
    async with httpx.AsyncClient(timeout=0.2) as http:
        with pytest.raises(ProviderRetryableError, match="timed out"):
            await OpenAIProvider(http, base_url=llm.base_url, api_key=None).complete(
                ModelRequest(model="m", messages=CONVERSATION[:2])
            )


def test_retry_after_forms() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


async def test_session_on_openai_endpoint_retries_429_then_runs_tools(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    """A real session through the OpenAI wire format: a 429 with Retry-After is retried by Temporal after the
    advertised delay, parallel tool calls run, usage and cost are recorded."""
    llm.queue(
        Reply(status=429, body={"error": {"message": "rate limited"}}, headers={"retry-after": "1"}),
        openai_reply("", [("c1", "todoWrite", {"todos": [{"content": "x", "status": "pending"}]}),
                          ("c2", "todoWrite", {"todos": [{"content": "y", "status": "completed"}]})]),
        openai_reply("all done", prompt_tokens=1_000_000, completion_tokens=1_000_000),
    )  # fmt: skip
    settings.providers = {"local": ProviderEndpoint(kind="openai", base_url=llm.base_url, api_key="k")}
    settings.prices = {"local:gpt-x": Price(input_per_mtok=1.0, output_per_mtok=2.0)}
    settings.model = "local:gpt-x"
    async with worker_for() as client:
        result = await (await client.start_session("go")).result()
    assert result.status == SessionStatus.completed and result.final_message == "all done"
    assert len(llm.requests) == 3
    assert llm.requests[1]["at"] - llm.requests[0]["at"] >= 0.9  # Retry-After honoured
    last = llm.requests[2]["body"]["messages"]
    # The agent's system message, then the note announcing its memory tools (Memory is on by default).
    assert [m["role"] for m in last] == ["system", "system", "user", "assistant", "tool", "tool"]
    assert result.usage.calls == 2 and result.usage.cost_usd == pytest.approx(3.0 + 11 / 1e6 + 7 * 2 / 1e6)


async def test_session_surfaces_provider_4xx_without_retry(
    llm: FakeLLMServer, settings: Settings, worker_for: WorkerFor
) -> None:
    llm.queue(Reply(status=400, body={"error": {"message": "model gpt-nope does not exist"}}))
    settings.providers = {"local": ProviderEndpoint(kind="anthropic", base_url=llm.base_url)}
    settings.model = "local:gpt-nope"
    async with worker_for() as client:
        result = await (await client.start_session("go")).result()
    assert result.status == SessionStatus.failed
    assert result.error is not None and "model gpt-nope does not exist" in result.error
    assert len(llm.requests) == 1
