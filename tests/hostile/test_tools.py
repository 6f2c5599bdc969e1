"""Every tool in the catalog, called with hostile arguments by a model, on a real dev server and both stores.

One session per tool; its first turn makes every hostile call of that tool (in parallel, a few steps of at
most 40 calls). Each case must end as a tool result (a tool error where the arguments are refused), the
session must finish, and no workflow task may fail: what a model sends can never wedge a session.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import text

from agent_tools._catalog.registry import builtin_specs
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings, WebConfig
from tests.support.fixture_types import WorkerFor
from tests.support.hostile import run_session, task_failures, tree_ids
from tests.support.hostile_cases import Case, all_cases, unknown_tool_cases
from tests.support.web import WebServer, json_reply, searxng_results

STEP = 40
TOOLS = [s.name for s in builtin_specs()]
# Sessions of these tools may still be waiting a little after their turn (asks time out, a loop is cancelled).
SESSION_TIMEOUT = 120.0


def _script(cases: list[Case]) -> list[dict[str, Any]]:
    """The root's turns: the cases in steps, then cancel any loop a valid call created, then done forever."""
    steps = [cases[i : i + STEP] for i in range(0, len(cases), STEP)]
    turns: list[dict[str, Any]] = [
        {"say": "", "tool_calls": [c.call(i) for i, c in enumerate(chunk)]} for chunk in steps
    ]
    cleanup = [{"name": "cancelLoop", "arguments": {"loop_id": f"loop-{n}"}} for n in range(1, 4)]
    turns.append({"say": "", "tool_calls": cleanup})
    turns.append({"say": "done"})
    return turns


def _conversations(tool: str, cases: list[Case]) -> list[dict[str, Any]]:
    return [
        {"match": {"prompt_contains": f"HOSTILE {tool}"}, "turns": _script(cases), "repeat_last": True},
        # Sub-agents that a valid call started, goal judges and everything else: answer at once.
        {"turns": [{"say": "done"}], "repeat_last": True},
    ]


def _call_ids(cases: list[Case]) -> list[str]:
    ids = []
    for step, start in enumerate(range(0, len(cases), STEP)):
        ids += [f"call_{step}_{i}" for i in range(len(cases[start : start + STEP]))]
    return ids


@pytest.fixture
def search_engine() -> Iterator[WebServer]:
    """A SearXNG on 127.0.0.1 answering every search."""
    with WebServer() as engine:
        engine.route("/searx/search", json_reply(searxng_results(engine.base, 3)))
        yield engine


@pytest.mark.slow
async def test_no_tool_argument_wedges_a_session(
    store_url: str,
    settings: Settings,
    script: Callable[[list[Any]], str],
    worker_for: WorkerFor,
    search_engine: WebServer,
) -> None:
    by_tool = all_cases()
    by_tool["(unknown tools)"] = unknown_tool_cases()
    conversations = [conv for tool, cases in by_tool.items() for conv in _conversations(tool, cases)[:1]]
    conversations.append({"turns": [{"say": "done"}], "repeat_last": True})
    settings.database_url = store_url
    settings.model = script(conversations)
    # Two distinct callable models: delegate_to_model is offered only then, and must be hit.
    settings.model_tiers = {"small": settings.model, "large": script(conversations)}
    options = {"ask_user_timeout_seconds": 1, "ask_user_default": "first"}
    # The web faces are offered only while a configured search engine answers the worker.
    settings.web = WebConfig(search_engines=["searxng"], searxng_url=search_engine.url("/searx"))
    started = time.monotonic()
    async with worker_for(settings=settings) as client:
        outcomes = await asyncio.gather(
            *(
                run_session(client, f"HOSTILE {tool}", timeout=SESSION_TIMEOUT, tools=TOOLS, options=options)
                for tool in by_tool
            )
        )
        elapsed = time.monotonic() - started
        problems: list[str] = []
        counted = 0
        for (tool, cases), outcome in zip(by_tool.items(), outcomes, strict=True):
            if outcome.error is not None or outcome.result is None:
                problems.append(f"{tool}: the session did not end: {outcome.error}")
                continue
            if outcome.result.status != SessionStatus.completed:
                problems.append(f"{tool}: ended {outcome.result.status.value}: {outcome.result.error}")
            finished = outcome.finished()
            for case, call_id in zip(cases, _call_ids(cases), strict=True):
                counted += 1
                event = finished.get(call_id)
                if event is None:
                    problems.append(f"{tool} / {case.label}: no result")
                elif case.refused and not event.data["is_error"]:
                    problems.append(f"{tool} / {case.label}: accepted ({event.data['preview'][:120]!r})")
            for workflow_id in await tree_ids(client, outcome.handle.id):
                for failure in await task_failures(client.temporal, workflow_id):
                    problems.append(f"{tool}: workflow task failed in {workflow_id}: {failure}")
        assert problems == [], "\n".join(problems)
        # Nothing a model sent left a NUL byte in the store (PostgreSQL would have refused it outright).
        store = await client.transcripts()
        async with store.store.engine.connect() as conn:
            if store.store.dialect == "sqlite":  # PostgreSQL refuses a NUL outright: its write would have failed
                nul = await conn.execute(
                    text("SELECT count(*) FROM transcript_messages WHERE instr(content, char(0)) > 0")
                )
                assert nul.scalar_one() == 0
            tools_seen = await conn.execute(text("SELECT count(*) FROM transcript_messages WHERE role = 'tool'"))
            assert tools_seen.scalar_one() >= counted
    assert counted > 400  # every tool's cases ran (the closing note quotes the counts)
    print(f"hostile tool cases: {counted} in {len(outcomes)} sessions, {elapsed:.1f} s")
