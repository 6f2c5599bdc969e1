"""The lean-start patches: a session begun with one asks one patch marker and sets its first search
attributes in one command, and the Temporal UI still shows every session attribute (histories recorded on
every side of them replay in tests/test_replay.py). ``lean-start-2`` also stands for the patches asked since
the first, so a woken event wait records none."""

from __future__ import annotations

import asyncio
import base64
import json

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from agent_tools import _search_attributes as sa
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools.contracts._events.contract import PATCH_INLINE_EVENT, PATCH_LOAD_EVENT_LOCAL
from agent_tools.contracts._planning import PATCH_LOOP_FLOOR
from agent_tools.workflows._approvals import PATCH_APPROVAL_PARKED, PATCH_APPROVALS
from agent_tools.workflows._base import (
    ASKED_ITSELF,
    LEAN_START_2_IMPLIES,
    LEAN_START_IMPLIES,
    PATCH_BOUNDED_INPUTS,
    PATCH_LEAN_START,
    PATCH_LEAN_START_2,
    PATCH_STRICT_ARGUMENTS,
)
from agent_tools.workflows._session import PATCH_LOCAL_PREPARE, PATCH_MID_WAIT_CAN
from tests.record_histories import HISTORIES
from tests.support.fixture_types import Script, WorkerFor

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
    # Every patch a session asks for with workflow.patched today, besides the markers themselves.
    assert asked | {PATCH_APPROVALS, PATCH_LOAD_EVENT_LOCAL, PATCH_INLINE_EVENT} == LEAN_START_2_IMPLIES
    assert not {PATCH_LEAN_START, PATCH_LEAN_START_2} & LEAN_START_2_IMPLIES


def test_every_patch_a_session_asks_is_one_the_newest_marker_stands_for() -> None:
    """A patch added later must be folded in with a new marker (or be asked for itself on purpose): the
    session's code names each patch it asks through ``self.patched`` or ``workflow.patched``."""
    import re
    from pathlib import Path

    import agent_tools.workflows as pkg

    asked: set[str] = set()
    for path in Path(pkg.__file__).parent.glob("*.py"):
        if path.name == "_event_router.py":  # the router is its own workflow, with its own patch
            continue
        asked |= set(re.findall(r"patched\((PATCH_[A-Z_0-9]+)\)", path.read_text()))
    import agent_tools.contracts._events.contract as events
    import agent_tools.contracts._planning as planning
    import agent_tools.workflows._approvals as approvals
    import agent_tools.workflows._base as base
    import agent_tools.workflows._session as session

    values = {
        name: getattr(module, name)
        for name in asked
        for module in (base, session, approvals, events, planning)
        if hasattr(module, name)
    }
    assert set(values) == asked, asked - set(values)
    assert set(values.values()) - {PATCH_LEAN_START, PATCH_LEAN_START_2} - ASKED_ITSELF == LEAN_START_2_IMPLIES
    assert ASKED_ITSELF <= set(values.values()) and not ASKED_ITSELF & LEAN_START_2_IMPLIES


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
    settings: Settings, script: Script, worker_for: WorkerFor
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
        assert _patches(events) == [PATCH_LEAN_START_2]
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

        await handle.answer_questions({QUESTION: "dayjs"})
        result = await handle.result()
        assert result.status == SessionStatus.completed and "dayjs" in (result.final_message or "")
        attrs = (await handle.workflow.describe()).typed_search_attributes
        assert attrs.get(sa.SESSION_STATE) == "completed"


def _recorded_patches() -> list[tuple[str, list[str]]]:
    """Each recorded session history's name and the patch ids of its markers, in order."""
    out = []
    for path in sorted(HISTORIES.glob("session_*.json")):
        events = json.loads(path.read_text())["events"]
        markers = [e["markerRecordedEventAttributes"] for e in events if "markerRecordedEventAttributes" in e]
        ids = [
            json.loads(base64.b64decode(m["details"]["patch-data"]["payloads"][0]["data"]))["id"]
            for m in markers
            if m["markerName"] == "core_patch"
        ]
        out.append((path.name, ids))
    return out


def test_recorded_histories_cover_every_side_of_them() -> None:
    lean2: list[str] = []
    lean: list[str] = []
    before: list[str] = []
    for name, ids in _recorded_patches():
        (lean2 if PATCH_LEAN_START_2 in ids else lean if PATCH_LEAN_START in ids else before).append(name)
    assert lean2 and lean and before, (lean2, lean, before)


def test_a_session_begun_with_lean_start_2_records_no_other_patch() -> None:
    # Its event woken and rendered from the delivery, its approvals waited on: nothing asks a marker after
    # it (a handler of the run's first activation, before ``run``, may ask one first, as it always did;
    # runs begun with lean-start recorded tool-approvals or inline-event after it).
    names = set()
    for name, ids in _recorded_patches():
        if PATCH_LEAN_START_2 in ids:
            assert ids[-1] == PATCH_LEAN_START_2 and set(ids[:-1]) <= LEAN_START_IMPLIES, (name, ids)
            names.add(name.split(".")[0])
    assert {"session_event_wait", "session_tool_approval", "session_ask_user_mid_wait"} <= names, names


def test_sessions_of_a_worker_share_one_policy_object() -> None:
    """What a cached run keeps: equal policies decoded per session become the worker's one object."""
    from agent_tools._policy import ExecutionPolicy
    from agent_tools.workflows._base import shared_policy

    first = shared_policy(ExecutionPolicy.model_validate_json(ExecutionPolicy().model_dump_json()))
    again = shared_policy(ExecutionPolicy.model_validate_json(ExecutionPolicy().model_dump_json()))
    assert again is first
    other = ExecutionPolicy().model_copy(update={"model_step": ExecutionPolicy().tool_call})
    assert shared_policy(other) is not first and shared_policy(other) == other


def test_a_cached_run_keeps_only_the_identity_of_its_request() -> None:
    """Once prepared, a run keeps the request's identity fields (what continue-as-new carries, as before)
    and the worker's one tool list, not the request's prompt, history and options."""
    from agent_tools._messages import Message
    from agent_tools._session import SessionConfig, SessionRequest
    from agent_tools.workflows._session import AgentSession

    def config(session_id: str) -> SessionConfig:
        return SessionConfig(
            session_id=session_id, agent="helper", organisation="o", project="p", user="u", title="t",
            model="scripted:x", tools=["askUser", "recall"], max_steps=5, root_id="root",
        )  # fmt: skip

    runs = []
    for session_id in ("a", "b"):
        run = AgentSession.__new__(AgentSession)
        run._config = config(session_id)
        run.request = SessionRequest(
            agent="helper", prompt="a long prompt " * 50, title="t", parent_id="parent", root_id="root", depth=2,
            history=[Message(role="user", content="before")], system_prompt="be brief",
        )  # fmt: skip
        run._keep_only_what_runs_need()
        runs.append(run)
    first, second = runs
    assert first.request is None
    carried = first._carried_request()
    assert (
        carried.model_dump()
        == SessionRequest.model_construct(
            agent="helper", title="t", parent_id="parent", root_id="root", depth=2
        ).model_dump()
    )
    assert carried.prompt is None and carried.history == [] and carried.system_prompt is None
    assert second.config.tools is first.config.tools == ["askUser", "recall"]
    first._keep_only_what_runs_need()  # again (a run that resumes): nothing left to drop, identity kept
    assert first._carried_request().depth == 2


def test_a_full_cache_of_shared_lists_still_shares_a_new_list() -> None:
    """The shared-list cache stays bounded, and once full a new list displaces the oldest rather than going
    unshared (many distinct tool lists must not end sharing for the agents that come after them)."""
    from agent_tools.workflows import _base

    saved = dict(_base._SHARED_NAMES)
    _base._SHARED_NAMES.clear()
    try:
        for i in range(_base._SHARED_MAX + 5):
            _base.shared_names([f"tool{i}"])
        assert len(_base._SHARED_NAMES) == _base._SHARED_MAX
        assert ("tool0",) not in _base._SHARED_NAMES
        first = _base.shared_names(["askUser", "late"])
        assert _base.shared_names(["askUser", "late"]) is first
    finally:
        _base._SHARED_NAMES.clear()
        _base._SHARED_NAMES.update(saved)
