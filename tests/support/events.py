"""The events ingress on a real socket, and what a test reads back of subscriptions, routers and
event-waiting sessions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from agent_tools._client import AgentToolsClient
from agent_tools._errors import StoreNotReady
from agent_tools._service.app import create_app
from agent_tools._settings import Settings
from agent_tools._store.db import Store
from agent_tools._store.event_tables import (
    count_open_waits,
)
from agent_tools.contracts._events.contract import (
    ACTIVITY_LOAD_EVENT,
    RouterView,
    router_workflow_id,
)
from agent_tools.contracts._events.settings import EventSettings, EventSource
from agent_tools.contracts._events.signatures import sign_github
from tests.support.asgi import served
from tests.support.fixture_types import Script
from tests.support.polling import eventually

TOKEN = "token-acme-" + "x" * 16
GH_SECRET = "gh-secret-0123456789"
HMAC_SECRET = "hmac-secret-0123456789"


@asynccontextmanager
async def ingress(
    settings: Settings, temporal: Client | None, project: str, **cfg: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Store]]:
    """The ingress app served by uvicorn on a real 127.0.0.1 socket, and an HTTP client pointed at it
    (``temporal=None``: the app connects to ``settings.temporal_address`` itself)."""
    event_settings = EventSettings(
        tokens={f"acme/{project}": TOKEN},
        sources={
            "gh": EventSource(type="github", secret=GH_SECRET, organisation="acme", project=project),
            "ci": EventSource(type="hmac", secret=HMAC_SECRET, organisation="acme", project=project, kind_prefix="ci"),
        },
        **cfg,
    )
    store = Store(settings.database_url)
    await store.create_schema()
    state: dict[str, Any] = {"event_store": store}
    if temporal is not None:
        state["temporal"] = temporal
    app = create_app(settings.model_copy(update={"events": event_settings}), **state)
    try:
        async with served(app, timeout=10) as http:
            yield http, store
    finally:
        await store.close()


def github_headers(event: str, body: bytes, delivery: str, secret: str = GH_SECRET) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign_github(secret, body),
        "Content-Type": "application/json",
    }


async def router_state(client: AgentToolsClient, project: str) -> RouterView:
    handle = client.temporal.get_workflow_handle(router_workflow_id("acme", project))
    view: RouterView = await handle.query("state", result_type=RouterView)
    return view


async def subscribed(client: AgentToolsClient, project: str, count: int, *, router: bool | None = None) -> None:
    """Until ``count`` open waits of acme's ``project`` are in place: kept in the store (where the ingress
    finds them), and, when the worker subscribes with the router too (``direct_delivery`` off), in the
    router."""
    with_router = not client.settings.events.direct_delivery if router is None else router

    async def check() -> bool:
        try:  # the worker creates the store as its first activity starts
            store = (await client.transcripts()).store
            kept = await count_open_waits(store, organisation="acme", project=project)
        except StoreNotReady:
            return False
        if kept < count:
            return False
        if not with_router:
            return True
        try:
            return len((await router_state(client, project)).subscriptions) >= count
        except Exception:
            return False

    await eventually(check, timeout=30, interval=0.05, what=f"{count} open waits of acme/{project}")


def wait_script(script: Script, arguments: dict[str, Any]) -> str:
    return str(
        script(
            [
                {"say": "waiting", "tool_calls": [{"name": "wait_for_event", "arguments": arguments}]},
                {"say": "got: {{last_tool}}"},
            ]
        )
    )


def final_event(result_message: str | None) -> dict[str, Any]:
    assert result_message is not None and result_message.startswith("got: "), result_message
    data: dict[str, Any] = json.loads(result_message.removeprefix("got: "))
    return data


def loads(history_events: list[Any]) -> int:
    """How many times a session read an event from the store (``load_event``, local or not)."""
    return sum(
        1
        for ev in history_events
        if (
            ev.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
            and ev.activity_task_scheduled_event_attributes.activity_type.name == ACTIVITY_LOAD_EVENT
        )
        or (
            ev.event_type == EventType.EVENT_TYPE_MARKER_RECORDED
            and ACTIVITY_LOAD_EVENT.encode() in ev.marker_recorded_event_attributes.SerializeToString()
        )
    )
