"""The lean-start patch: a session begun with it asks one patch marker and sets its first search attributes
in one command, and the Temporal UI still shows every session attribute (histories recorded on both sides of
it replay in tests/test_replay.py)."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from agent_tools import search_attributes as sa
from agent_tools.contracts.planning import PATCH_LOOP_FLOOR
from agent_tools.human_client import answer_questions
from agent_tools.session import SessionStatus
from agent_tools.workflows.approvals import PATCH_APPROVAL_PARKED
from agent_tools.workflows.base import (
    LEAN_START_IMPLIES,
    PATCH_BOUNDED_INPUTS,
    PATCH_LEAN_START,
    PATCH_STRICT_ARGUMENTS,
)
from agent_tools.workflows.session import PATCH_LOCAL_PREPARE, PATCH_MID_WAIT_CAN
from tests.record_histories import HISTORIES

QUESTION = "Which date formatting library should we use?"
ASK = {
    "name": "askUser",
    "arguments": {
        "questions": [
            {
                "question": QUESTION,
                "header": "Date Library",
                "options": [{"label": "date-fns", "description": "small"}, {"label": "dayjs", "description": "tiny"}],
            }
        ]
    },
}


def test_it_stands_for_every_patch_a_session_asked_before_it() -> None:
    asked = {
        PATCH_MID_WAIT_CAN,
        PATCH_APPROVAL_PARKED,
        PATCH_LOCAL_PREPARE,
        PATCH_BOUNDED_INPUTS,
        PATCH_STRICT_ARGUMENTS,
        PATCH_LOOP_FLOOR,
    }
    assert asked == LEAN_START_IMPLIES
    assert PATCH_LEAN_START not in LEAN_START_IMPLIES


def _patches(events: list[HistoryEvent]) -> list[str]:
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def _upserted(event: HistoryEvent) -> set[str]:
    return set(event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)


async def test_a_new_session_waits_after_one_marker_and_one_upsert_per_workflow_task(
    settings: Any, script: Any, worker_for: Any
) -> None:
    settings.model = script([{"say": "", "tool_calls": [ASK]}, {"say": "got: {{last_tool}}"}])
    async with worker_for() as client:
        handle = await client.start_session("choose", tools=["askUser"], title="Pick a library")
        for _ in range(400):
            if (await handle.status()).status == SessionStatus.waiting_for_user:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("never waited for the user")
        events = list((await handle.workflow.fetch_history()).events)
        assert _patches(events) == [PATCH_LEAN_START]
        upserts = [_upserted(e) for e in events if e.HasField("upsert_workflow_search_attributes_event_attributes")]
        # The core's TemporalChangeVersion for the marker, the first status with the tree's attributes (those
        # the client set at start are not sent again), and waiting_for_user.
        assert upserts == [
            {"TemporalChangeVersion"},
            {sa.SESSION_STATE.name, sa.SESSION_UPDATED_AT.name},
            {sa.SESSION_STATE.name, sa.SESSION_UPDATED_AT.name},
        ]
        # Besides its workflow tasks (two, or three when the prepare step outlasts the first one's heartbeat):
        # the start, the marker and its upsert, the prepare marker, the upsert, the model step, the upsert.
        kept = [
            EventType.Name(e.event_type)[11:] for e in events if "WORKFLOW_TASK" not in EventType.Name(e.event_type)
        ]
        assert len(kept) == 9, kept

        attrs = (await handle.workflow.describe()).typed_search_attributes
        assert attrs.get(sa.AGENT_NAME) == "assistant"
        assert attrs.get(sa.SESSION_ROOT_ID) == handle.id
        assert attrs.get(sa.DEPTH) == 0
        assert attrs.get(sa.SESSION_TITLE) == "Pick a library"
        assert attrs.get(sa.SESSION_STATE) == "waiting_for_user"
        assert attrs.get(sa.SESSION_UPDATED_AT) is not None

        await answer_questions(handle, {QUESTION: "dayjs"})
        result = await handle.result()
        assert result.status == SessionStatus.completed and "dayjs" in (result.final_message or "")
        attrs = (await handle.workflow.describe()).typed_search_attributes
        assert attrs.get(sa.SESSION_STATE) == "completed"


def test_recorded_histories_cover_both_sides_of_it() -> None:
    lean, before = [], []
    for path in sorted(HISTORIES.glob("session_*.json")):
        events = json.loads(path.read_text())["events"]
        markers = [e["markerRecordedEventAttributes"] for e in events if "markerRecordedEventAttributes" in e]
        ids = [
            json.loads(base64.b64decode(m["details"]["patch-data"]["payloads"][0]["data"]))["id"]
            for m in markers
            if m["markerName"] == "core_patch"
        ]
        (lean if PATCH_LEAN_START in ids else before).append(path.name)
    assert lean and before, (lean, before)


def test_sessions_of_a_worker_share_one_policy_object() -> None:
    """What a cached run keeps: equal policies decoded per session become the worker's one object."""
    from agent_tools.policy import ExecutionPolicy
    from agent_tools.workflows.base import shared_policy

    first = shared_policy(ExecutionPolicy.model_validate_json(ExecutionPolicy().model_dump_json()))
    again = shared_policy(ExecutionPolicy.model_validate_json(ExecutionPolicy().model_dump_json()))
    assert again is first
    other = ExecutionPolicy().model_copy(update={"model_step": ExecutionPolicy().tool_call})
    assert shared_policy(other) is not first and shared_policy(other) == other
