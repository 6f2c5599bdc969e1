"""The session routes on a real socket, their keys, and a reader of their server-sent events."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from agent_tools._agents import AgentDefinition
from agent_tools._client import AgentToolsClient
from agent_tools._service.app import create_app
from agent_tools._settings import Settings
from agent_tools.contracts._service import ServiceKey, ServiceSettings
from tests.support.asgi import served

FULL = "key-full-0123456789abcdef"
READER = "key-read-0123456789abcdef"
ANSWERER = "key-answer-0123456789abcdef"
OTHER_AGENT = "key-ops-only-0123456789abcdef"
KEYS = [
    ServiceKey.model_validate(k)
    for k in (
        {"key": FULL, "name": "tester"},
        {"key": READER, "name": "reader", "scopes": ["read"]},
        {"key": ANSWERER, "name": "answerer", "scopes": ["answer"]},
        {"key": OTHER_AGENT, "name": "ops", "agents": ["ops"]},
    )
]


# The askUser call the session-route tests make: one question, two options.
ASK = {
    "name": "askUser",
    "arguments": {
        "questions": [
            {
                "question": "Which one?",
                "header": "Choice",
                "options": [{"label": "First", "description": "a"}, {"label": "Second", "description": "b"}],
            }
        ]
    },
}


# A todoWrite call; the sub-agent tests' agent needs a person's approval for it.
TODO = {"name": "todoWrite", "arguments": {"todos": [{"content": "write it", "status": "in_progress"}]}}


def sub_agent_asks() -> tuple[list[dict[str, Any]], AgentDefinition]:
    """A script and an agent: the root hands a sync sub-agent ("Helper") the work; the sub-agent asks
    :data:`ASK`, then calls todoWrite, which waits for approval, then says "helper done"; the root then says
    "parent got: <the sub-agent's result>"."""
    from agent_tools.contracts._approvals import ApprovalPolicy

    script: list[dict[str, Any]] = [
        {"match": {"title": "Helper"}, "turns": [
            {"say": "", "tool_calls": [ASK]}, {"say": "", "tool_calls": [TODO]}, {"say": "helper done"},
        ]},
        {"turns": [
            {"say": "", "tool_calls": [
                {"name": "subAgent", "arguments": {"title": "Helper", "instruction": "Ask.", "mode": "sync"}}
            ]},
            {"say": "parent got: {{last_tool}}"},
        ]},
    ]  # fmt: skip
    agent = AgentDefinition(
        name="assistant", tools=["subAgent", "askUser", "todoWrite"], approval=ApprovalPolicy(require=["todoWrite"])
    )
    return script, agent


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@asynccontextmanager
async def session_api(
    settings: Settings, client: AgentToolsClient | None, **service: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """The service app served by uvicorn on 127.0.0.1, over ``client``, with :data:`KEYS`; an HTTP client
    pointed at it. A real socket: httpx's in-process transport does not stream a response."""
    cfg = ServiceSettings(api_keys=KEYS, keepalive_seconds=service.pop("keepalive_seconds", 0.5), **service)
    state: dict[str, Any] = {} if client is None else {"agent_client": client}
    app = create_app(settings.model_copy(update={"service": cfg}), **state)
    async with served(app, timeout=30) as http:
        yield http


@dataclass
class SseEvent:
    id: str | None
    event: str
    data: Any


@dataclass
class SseRead:
    events: list[SseEvent]
    comments: int
    ended: bool

    @property
    def items(self) -> list[SseEvent]:
        return [e for e in self.events if e.event == "message"]


async def read_sse(
    http: httpx.AsyncClient,
    path: str,
    headers: dict[str, str],
    *,
    stop: Any = None,
    timeout: float = 60.0,
) -> SseRead:
    """Read an event stream until ``end`` (or ``stop(event)`` holds, which then closes the connection)."""
    read = SseRead(events=[], comments=0, ended=False)

    async def go() -> None:
        async with http.stream("GET", path, headers=headers, timeout=timeout) as resp:
            assert resp.status_code == 200, (resp.status_code, await resp.aread())
            assert resp.headers["content-type"].startswith("text/event-stream")
            fields: dict[str, str] = {}
            async for line in resp.aiter_lines():
                if line.startswith(":"):
                    read.comments += 1
                elif line == "":
                    if "data" in fields:
                        event = SseEvent(fields.get("id"), fields.get("event", "message"), json.loads(fields["data"]))
                        read.events.append(event)
                        if event.event in ("end", "error"):
                            read.ended = event.event == "end"
                            return
                        if stop is not None and stop(event):
                            return
                    fields = {}
                else:
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value

    await asyncio.wait_for(go(), timeout)
    return read


@dataclass
class AguiEvent:
    at: float  # time.monotonic() of its arrival
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.data["type"])


async def run_agui(
    http: httpx.AsyncClient, body: dict[str, Any], headers: dict[str, str], *, timeout: float = 60.0
) -> list[AguiEvent]:
    """POST /agui and read its AG-UI events until RUN_FINISHED or RUN_ERROR (keep-alive comments skipped)."""
    events: list[AguiEvent] = []

    async def go() -> None:
        async with http.stream("POST", "/agui", json=body, headers=headers, timeout=timeout) as resp:
            assert resp.status_code == 200, (resp.status_code, await resp.aread())
            assert resp.headers["content-type"].startswith("text/event-stream")
            async for line in resp.aiter_lines():
                if line.startswith("data:"):
                    events.append(AguiEvent(time.monotonic(), json.loads(line[5:])))
                    if events[-1].type in ("RUN_FINISHED", "RUN_ERROR"):
                        return

    await asyncio.wait_for(go(), timeout)
    return events
