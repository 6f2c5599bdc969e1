"""``event_arrived`` with hostile input, as a raw client can send it: a delivery that carries its event
is rendered by the session itself, so what it carries must never fail a workflow
task. Undecodable deliveries are dropped by the SDK and the session goes on waiting; a decodable one that is
too deep, too large or names another event is read from the store instead; NUL bytes and huge numbers are
rendered (JSON escapes the one, Python's int holds the other). Lone surrogates never get that far: pydantic's
JSON parser refuses them, so such a delivery is dropped."""

from __future__ import annotations

import asyncio
import json

from temporalio.api.common.v1 import Payload
from temporalio.common import RawValue

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools.contracts._events.contract import SIGNAL_EVENT_ARRIVED, EventWait
from tests.support.events import final_event, loads, wait_script
from tests.support.fixture_types import Script, WorkerFor
from tests.support.hostile import signal_settled, task_failures
from tests.support.polling import eventually

AT = "2026-12-01T00:00:00Z"


def _raw(data: str) -> RawValue:
    return RawValue(Payload(metadata={"encoding": b"json/plain"}, data=data.encode("utf-8", "surrogatepass")))


def _delivery(sub: str, event_id: str, event: str | None) -> str:
    body = (
        f'{{"subscription_id":{json.dumps(sub)},"event_id":{json.dumps(event_id)},"kind":"ci.done","received_at":"{AT}"'
    )
    return body + (f',"event":{event}}}' if event is not None else "}")


def _event(event_id: str, payload: str) -> str:
    return (
        f'{{"event_id":{json.dumps(event_id)},"kind":"ci.done","organisation":"acme","project":"p","source":"api",'
        f'"delivery_id":"d-1","received_at":"{AT}","payload":{payload}}}'
    )


def _deep(levels: int) -> str:
    return '{"x":' * levels + "1" + "}" * levels


async def _waiting(client: AgentToolsClient) -> tuple[SessionHandle, str]:
    handle = await client.start_session("wait for CI", organisation="acme", project="hostile-events")

    async def waits() -> list[EventWait]:
        if (await handle.status()).status != SessionStatus.waiting_for_event:
            return []
        found: list[EventWait] = await handle.workflow.query("event_waits", result_type=list[EventWait])
        return found

    found = await eventually(waits, timeout=40, interval=0.05, what="the session waiting")
    return handle, found[0].subscription_id


async def test_event_deliveries_a_raw_client_may_send(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = wait_script(script, {"kind": "ci.done", "timeout_seconds": 300})
    async with worker_for() as client:
        # Undecodable, each dropped: the session keeps waiting, and the valid delivery after them wins.
        handle, sub = await _waiting(client)
        for data in (
            _delivery(sub, "e-1", '"an event as a string"'),
            _delivery(sub, "e-1", "5"),
            _delivery(sub, "e-1", _event("e-1", "[1, 2]")),  # a payload must be an object
            _delivery(sub, "e-1", _event("e-1", _deep(5_000))),
            _delivery(sub, "e-1", _event("e-1", '{"text": "a\\ud800b"}')),  # a lone surrogate: not JSON's text
            '{"subscription_id": ' + "[" * 5_000 + "]" * 5_000 + "}",
            _delivery(sub, "e-1", _event("e-1", '{"n": 1}'))[:-40],  # cut short
        ):
            # Each settled by an update the session refuses (no question is pending): delivered after it.
            await signal_settled(handle, SIGNAL_EVENT_ARRIVED, _raw(data), ("answer_questions", {"answers": []}))
        assert (await handle.status()).status == SessionStatus.waiting_for_event
        await handle.workflow.signal(SIGNAL_EVENT_ARRIVED, _raw(_delivery(sub, "e-1", _event("e-1", '{"ok": true}'))))
        result = await asyncio.wait_for(handle.result(), 60)
        got = final_event(result.final_message)
        assert got["status"] == "received" and got["event"]["payload"] == {"ok": True}
        assert await task_failures(client.temporal, handle.id) == []

        # Decodable but not to be rendered from the signal: too deep for the ingress, too large for the
        # session's history, or another event than the delivery names. The session reads the store (which
        # has no such event) and says so.
        cases = {
            "deep": _event("e-2", _deep(100)),
            "huge": _event("e-2", json.dumps({"log": "x" * 1_000_000})),
            "other id": _event("e-other", '{"ok": true}'),
        }
        for label, event in cases.items():
            handle, sub = await _waiting(client)
            await handle.workflow.signal(SIGNAL_EVENT_ARRIVED, _raw(_delivery(sub, "e-2", event)))
            result = await asyncio.wait_for(handle.result(), 60)
            got = final_event(result.final_message)
            assert got["status"] == "received" and "no longer in the store" in got["message"], (label, got)
            assert loads([ev async for ev in handle.workflow.fetch_history_events()]) == 1, label
            assert await task_failures(client.temporal, handle.id) == [], label

        # Rendered from the signal: a NUL byte (escaped in the JSON the model reads), a number no float holds.
        handle, sub = await _waiting(client)
        payload = '{"text": "a\\u0000b", "n": 1' + "0" * 400 + "}"
        await handle.workflow.signal(SIGNAL_EVENT_ARRIVED, _raw(_delivery(sub, "e-3", _event("e-3", payload))))
        result = await asyncio.wait_for(handle.result(), 60)
        got = final_event(result.final_message)
        assert got["event"]["payload"]["text"] == "a\x00b"  # the NUL survives as JSON's escape
        assert got["event"]["payload"]["n"] == 10**400
        assert loads([ev async for ev in handle.workflow.fetch_history_events()]) == 0
        assert await task_failures(client.temporal, handle.id) == []
