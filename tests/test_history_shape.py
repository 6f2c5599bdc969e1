"""What a session's history holds before its first wait: no patch marker (1.0.0 folded every earlier patch
into its baseline) and its first search attributes in one command, while the Temporal UI still shows every
session attribute; and what a cached run keeps."""

from __future__ import annotations

import asyncio
import base64
import json

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent

from agent_tools import _search_attributes as sa
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.record_histories import RELEASED
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


def _patches(events: list[HistoryEvent]) -> list[str]:
    return [
        json.loads(e.marker_recorded_event_attributes.details["patch-data"].payloads[0].data)["id"]
        for e in events
        if e.HasField("marker_recorded_event_attributes")
        and e.marker_recorded_event_attributes.marker_name == "core_patch"
    ]


def _upserted(event: HistoryEvent) -> set[str]:
    return set(event.upsert_workflow_search_attributes_event_attributes.search_attributes.indexed_fields)


async def test_a_new_session_waits_with_no_marker_and_one_upsert_per_workflow_task(
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
        assert _patches(events) == []
        upserts = [_upserted(e) for e in events if e.HasField("upsert_workflow_search_attributes_event_attributes")]
        # The first status with the tree's attributes (those the client set at start are not sent again), and
        # waiting_for_user.
        assert upserts == [
            {sa.SESSION_STATE.name, sa.SESSION_UPDATED_AT.name},
            {sa.SESSION_STATE.name, sa.SESSION_UPDATED_AT.name},
        ]
        # Besides its workflow tasks (two, or three when the prepare step outlasts the first one's heartbeat):
        # the start, the prepare marker, the upsert, the model step (scheduled, started, completed), the upsert.
        kept = [
            EventType.Name(e.event_type)[11:] for e in events if "WORKFLOW_TASK" not in EventType.Name(e.event_type)
        ]
        assert len(kept) == 7, kept

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
    for path in sorted(RELEASED.glob("session_*.json")):
        events = json.loads(path.read_text())["events"]
        markers = [e["markerRecordedEventAttributes"] for e in events if "markerRecordedEventAttributes" in e]
        ids = [
            json.loads(base64.b64decode(m["details"]["patch-data"]["payloads"][0]["data"]))["id"]
            for m in markers
            if m["markerName"] == "core_patch"
        ]
        out.append((path.name, ids))
    return out


def test_the_recorded_sessions_have_no_patch_marker() -> None:
    recorded = _recorded_patches()
    assert recorded, "no recorded session histories"
    assert [(name, ids) for name, ids in recorded if ids] == []


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
