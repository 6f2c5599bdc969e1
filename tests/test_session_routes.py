"""The session routes against a real dev server and worker: start, read, answer, approve, stop; the event
stream resumed with Last-Event-ID mid-session (every item once); the keys' scopes; the OpenAPI document."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._agents import AgentDefinition
from agent_tools._client import AgentToolsClient
from agent_tools._progress_resume import ProgressCursor
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.session_api import (
    ANSWERER,
    ASK,
    FULL,
    KEYS,
    OTHER_AGENT,
    READER,
    SseEvent,
    auth,
    read_sse,
    session_api,
    sub_agent_asks,
)

WORDS = " ".join(f"word{i}" for i in range(40))


def _readers() -> int:
    """The event streams' reading tasks running in this process (the service runs in the test's loop)."""
    names = ("follow.<locals>.pump", "_Tree._pump")
    return sum(1 for t in asyncio.all_tasks() if getattr(t.get_coro(), "__qualname__", "") in names)


def _key(e: SseEvent) -> tuple[str, int]:
    return (str(e.data["session_id"]), int(e.data["offset"]))


async def test_a_stream_resumed_twice_mid_session_loses_nothing_and_repeats_nothing(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"match": {"title": "Child"}, "turns": [{"say": "child " + WORDS, "word_seconds": 0.03}]},
            {
                "match": {"prompt_contains": "PARENT"},
                "turns": [
                    {"say": WORDS, "word_seconds": 0.02, "tool_calls": [ASK]},
                    {
                        "say": "thanks",
                        "tool_calls": [
                            {
                                "name": "subAgent",
                                "arguments": {"title": "Child", "instruction": "talk", "mode": "sync"},
                            }
                        ],
                    },
                    {"say": "all done " + WORDS, "word_seconds": 0.01},
                ],
            },
        ]
    )
    async with worker_for() as client, session_api(settings, client) as http:
        started = await http.post("/sessions", json={"prompt": "PARENT go"}, headers=auth(FULL))
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        assert started.headers["location"] == f"/sessions/{sid}"
        path = started.json()["links"]["events"]

        # First connection: up to the question, then the browser goes away.
        first = await read_sse(http, path, auth(READER), stop=lambda e: e.data.get("kind") == "question")
        assert first.items[-1].data["kind"] == "question" and not first.ended

        # The server (in this process) stops following once the browser has gone: no reader is left behind.
        async def readers_left() -> int:
            return _readers()

        await eventually(readers_left, until=lambda n: n == 0, timeout=10, what="the readers gone")
        view = (await http.get(f"/sessions/{sid}", headers=auth(READER))).json()
        assert [q["question"] for q in view["pending_questions"]] == ["Which one?"]
        answered = await http.post(f"/sessions/{sid}/answers", json={"Which one?": "First"}, headers=auth(ANSWERER))
        assert answered.status_code == 200, answered.text

        readers: list[int] = []

        def in_child(e: SseEvent) -> bool:
            readers.append(_readers())
            return bool(e.data.get("session_id") == f"{sid}/sub-1" and e.data.get("kind") == "text_delta")

        # Second: from the last id seen, until the sub-agent has said something; gone again mid-child.
        second = await read_sse(http, path, {**auth(READER), "Last-Event-ID": str(first.events[-1].id)}, stop=in_child)
        assert max(readers) >= 2  # while a stream is open, its reader and the root's pump run
        cursor = ProgressCursor.decode(sid, str(second.events[-1].id))
        assert f"{sid}/sub-1" in cursor.offsets  # the sub-agent's stream is resumed from its own offset

        # Third: to the end (the cursor goes in the query this time).
        third = await read_sse(http, f"{path}?cursor={second.events[-1].id}", auth(READER))
        assert third.ended and third.events[-1].data["status"] == "COMPLETED"

        # Every item of the three connections, against one read of the whole stream after the end: each
        # session's items the same and in the same order, none twice (how a parent's items interleave with
        # a sub-agent's is the timing's).
        whole = await read_sse(http, path, auth(READER))
        resumed = first.items + second.items + third.items
        assert len({_key(e) for e in resumed}) == len(resumed)
        for session in {e.data["session_id"] for e in whole.items}:
            assert [e.data for e in resumed if e.data["session_id"] == session] == [
                e.data for e in whole.items if e.data["session_id"] == session
            ]
        assert sorted(_key(e) for e in resumed) == sorted(_key(e) for e in whole.items)
        for e in resumed:  # each id says: go on after this item of its session
            assert ProgressCursor.decode(sid, str(e.id)).offsets[e.data["session_id"]] == e.data["offset"] + 1
        kinds = {e.data["kind"] for e in whole.items}
        assert {"text_delta", "question", "answer", "subagent_started", "subagent_done", "turn_finished"} <= kinds
        child = [e for e in whole.items if e.data["session_id"] == f"{sid}/sub-1"]
        assert child and all(e.data["kind"] for e in child)
        # The sub-agent's last words come before its parent's subagent_done.
        done_at = next(i for i, e in enumerate(whole.items) if e.data["kind"] == "subagent_done")
        assert max(i for i, e in enumerate(whole.items) if e.data["session_id"] == f"{sid}/sub-1") < done_at

        # The session answers afterwards, and the transcript is there, paged.
        page = await http.get(f"/sessions/{sid}/transcript", params={"limit": 2}, headers=auth(READER))
        assert page.status_code == 200, page.text
        assert len(page.json()["entries"]) == 2 and page.json()["next_offset"] == 2
        listed = await http.get("/sessions", params={"root": sid}, headers=auth(READER))
        assert {s["session_id"] for s in listed.json()["sessions"]} >= {sid}


async def test_text_reaches_the_stream_while_the_model_writes(
    settings: Settings, script: Script, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each text delta's arrival at an SSE client, against when the model wrote its last character (the
    worker runs in this process: one clock): what the stream adds (the step's batching, the poll, the
    HTTP hop), reported as p50/p95."""
    from agent_tools.activities._providers.scripted import ScriptedProvider

    written: list[tuple[int, float]] = []  # (characters written so far, when)
    complete = ScriptedProvider.complete

    async def timed(self: ScriptedProvider, request: Any, on_text: Any = None) -> Any:
        def sink(piece: str) -> None:
            written.append(((written[-1][0] if written else 0) + len(piece), time.monotonic()))
            if on_text is not None:
                on_text(piece)

        return await complete(self, request, sink)

    monkeypatch.setattr(ScriptedProvider, "complete", timed)
    settings.model = script([{"say": WORDS + " " + WORDS, "word_seconds": 0.05}])
    async with worker_for() as client, session_api(settings, client, poll_seconds=0.05) as http:
        started = await http.post("/sessions", json={"prompt": "hello"}, headers=auth(FULL))
        sid = started.json()["session_id"]
        arrivals: list[tuple[float, SseEvent]] = []

        def note(e: SseEvent) -> bool:
            arrivals.append((time.monotonic(), e))
            return False

        read = await read_sse(http, f"/sessions/{sid}/events", auth(READER), stop=note)
        assert read.ended
        deltas = [(t, e) for t, e in arrivals if e.data.get("kind") == "text_delta"]
        finished = next(t for t, e in arrivals if e.data.get("kind") == "assistant_message")
        # Text arrived in several pieces, and well before the step ended: streamed, not sent at the end.
        assert len(deltas) >= 5, [e.data for _, e in deltas]
        assert finished - deltas[0][0] > 1.0
        lags = []
        for t, e in deltas:
            delta = e.data["data"]  # the item's own data: its place in the step's text, and the text
            end = int(delta["offset"]) + len(str(delta["text"]))
            produced = next(when for count, when in written if count >= end)
            lags.append(t - produced)
        lags.sort()
        p50, p95 = statistics.median(lags), lags[int(0.95 * (len(lags) - 1))]
        print(f"text delta to SSE client over {len(lags)} deltas: p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms")
        assert min(lags) >= 0 and p95 < 2.0


async def test_start_approve_message_and_stop_through_the_routes(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script(
        [
            {"tool_calls": [{"name": "todoWrite", "arguments": {"todos": [{"content": "x", "status": "pending"}]}}]},
            {"say": "listed"},
            {"say": "second answer"},
        ]
    )
    async with worker_for() as client, session_api(settings, client) as http:
        body = {"prompt": "todo", "keep_alive": True, "options": {"approval": {"require": ["todoWrite"]}}}
        started = await http.post("/sessions", json=body, headers=auth(FULL))
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]

        async def pending() -> list[dict[str, Any]] | None:
            view = (await http.get(f"/sessions/{sid}", headers=auth(READER))).json()
            return view["pending_approvals"] or None

        [approval] = await eventually(pending, timeout=30, what="a pending approval")
        url = f"/sessions/{sid}/approvals/{approval['approval_id']}"
        wrong = await http.post(url, json={"approve": True, "digest": "sha256:not-it"}, headers=auth(ANSWERER))
        assert wrong.status_code == 409 and "digest" in wrong.json()["detail"]
        decided = await http.post(url, json={"approve": True, "digest": approval["digest"]}, headers=auth(ANSWERER))
        assert decided.status_code == 200 and decided.json()["approved"] is True, decided.text
        again = await http.post(url, json={"approve": True, "digest": approval["digest"]}, headers=auth(ANSWERER))
        assert again.status_code == 409 and "already decided" in again.json()["detail"]

        async def idle() -> dict[str, Any] | None:
            view = (await http.get(f"/sessions/{sid}", headers=auth(READER))).json()
            return view if view["status"]["status"] == "idle" and view["status"]["turns"] >= 1 else None

        await eventually(idle, timeout=30, what="the first turn done")
        sent = await http.post(f"/sessions/{sid}/messages", json={"content": "again"}, headers=auth(ANSWERER))
        assert sent.status_code == 200, sent.text

        async def two_turns() -> dict[str, Any] | None:
            view = (await http.get(f"/sessions/{sid}", headers=auth(READER))).json()
            return view if view["status"]["turns"] >= 2 and view["status"]["status"] == "idle" else None

        view = await eventually(two_turns, timeout=30, what="the second turn done")
        assert view["status"]["usage"]["calls"] >= 3
        stopped = await http.post(f"/sessions/{sid}/stop", json={"reason": "enough"}, headers=auth(FULL))
        assert stopped.status_code == 202, stopped.text
        result = await client.session(sid).result()
        assert result.status == SessionStatus.stopped
        decider = (await client.session(sid).approval_state()).decided[0].decided_by
        assert decider == "answerer"  # the key's name, never the key
        entries = await client.session(sid).transcript()
        assert [e.content for e in entries if e.role == "user"] == ["todo", "again"]


async def test_without_a_worker_routes_say_so_and_the_stream_goes_on_with_the_next(
    settings: Settings, script: Script, worker_for: WorkerFor, temporal_env: WorkflowEnvironment
) -> None:
    settings.model = script([{"say": "asking", "tool_calls": [ASK]}, {"say": "answered {{last_tool}} " + WORDS}])
    client = AgentToolsClient(temporal_env.client, settings)
    async with session_api(settings, client, call_timeout_seconds=1.0) as http:
        async with worker_for():
            started = await http.post("/sessions", json={"prompt": "go"}, headers=auth(FULL))
            sid = started.json()["session_id"]
            path = f"/sessions/{sid}/events"
            seen: list[str] = []
            follow = asyncio.create_task(
                read_sse(http, path, auth(READER), timeout=90, stop=lambda e: seen.append(e.data["kind"]))
            )

            async def asked() -> list[str] | None:
                return seen if "question" in seen else None

            await eventually(asked, timeout=30, what="the question on the stream")
        # No worker: a read or an answer says so instead of hanging; the open stream just waits.
        gone = await http.get(f"/sessions/{sid}", headers=auth(READER))
        assert gone.status_code == 503 and "worker" in gone.json()["detail"], gone.text
        refused = await http.post(f"/sessions/{sid}/answers", json={"Which one?": "First"}, headers=auth(ANSWERER))
        assert refused.status_code == 503, refused.text
        assert not follow.done()
        async with worker_for():
            answer = await eventually(
                lambda: http.post(f"/sessions/{sid}/answers", json={"Which one?": "First"}, headers=auth(ANSWERER)),
                until=lambda r: r.status_code in (200, 409),
                timeout=60,
                what="the answer taken by the new worker",
            )
            assert answer.status_code in (200, 409), answer.text  # 409: the first try was taken after all
            read = await follow
            assert read.ended and read.comments >= 1
            whole = await read_sse(http, path, auth(READER))
        assert [e.data for e in read.items] == [e.data for e in whole.items]
        assert [e.data["kind"] for e in read.items].count("question") == 1
        assert "First" in str((await client.session(sid).result()).final_message)


async def test_keys_and_scopes(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    settings.model = script([{"say": '{"greeting": "hi"}'}])
    async with worker_for() as client, session_api(settings, client) as http:
        assert (await http.post("/sessions", json={"prompt": "x"})).status_code == 401
        unknown = await http.get("/sessions", headers=auth("not-a-key-0123456789"))
        assert unknown.status_code == 401 and unknown.headers["www-authenticate"] == "Bearer"
        basic = await http.get("/sessions", headers={"Authorization": f"Basic {FULL}"})
        assert basic.status_code == 401
        refused = {
            "a reader cannot start": await http.post("/sessions", json={"prompt": "x"}, headers=auth(READER)),
            "an answerer cannot list": await http.get("/sessions", headers=auth(ANSWERER)),
            "an ops key cannot start assistant": await http.post(
                "/sessions", json={"prompt": "x"}, headers=auth(OTHER_AGENT)
            ),
        }
        for label, resp in refused.items():
            assert resp.status_code == 403, (label, resp.text)
        schema = {"type": "object", "properties": {"greeting": {"type": "string"}}, "required": ["greeting"]}
        started = await http.post("/sessions", json={"prompt": "x", "output_schema": schema}, headers=auth(FULL))
        sid = started.json()["session_id"]
        assert (await http.get(f"/sessions/{sid}", headers=auth(OTHER_AGENT))).status_code == 403
        assert (await http.get(f"/sessions/{sid}/events", headers=auth(OTHER_AGENT))).status_code == 403
        assert (await http.post(f"/sessions/{sid}/stop", headers=auth(ANSWERER))).status_code == 403
        assert (await http.post(f"/sessions/{sid}/stop", headers=auth(READER))).status_code == 403
        assert (
            await http.get("/sessions", params={"agent": "assistant"}, headers=auth(OTHER_AGENT))
        ).status_code == 403
        mine = await http.get("/sessions", headers=auth(OTHER_AGENT))  # an ops key lists ops sessions only
        assert mine.status_code == 200 and mine.json()["sessions"] == []
        assert (await client.session(sid).result()).output == {"greeting": "hi"}  # the schema went through
        for resp in [*refused.values(), unknown, basic]:
            for key in KEYS:
                assert key.key.get_secret_value() not in resp.text
        assert (await http.get(f"/sessions/{sid}", headers=auth(READER))).status_code == 200


async def test_listing_filters_and_pages(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    settings.model = script([{"say": "hi"}])
    # An agent of this test's own: the dev server holds every test's sessions.
    agent = f"pager-{uuid.uuid4().hex[:8]}"
    async with worker_for(agents=[AgentDefinition(name=agent)]) as client, session_api(settings, client) as http:
        ids = set()
        for _ in range(3):
            started = await http.post("/sessions", json={"prompt": "x", "agent": agent}, headers=auth(FULL))
            ids.add(started.json()["session_id"])
        for sid in ids:
            await client.session(sid).result()

        async def listed() -> dict[str, Any]:
            query: dict[str, str | int] = {"state": "completed", "agent": agent, "limit": 2}
            resp = await http.get("/sessions", params=query, headers=auth(READER))
            assert resp.status_code == 200, resp.text
            body: dict[str, Any] = resp.json()
            return body

        first = await eventually(
            listed, until=lambda b: b["next_offset"] == 2, timeout=30, what="three completed sessions listed"
        )
        rest_query: dict[str, str | int] = {"state": "completed", "agent": agent, "limit": 2, "offset": 2}
        rest = (await http.get("/sessions", params=rest_query, headers=auth(READER))).json()
        assert rest["next_offset"] is None
        assert {s["session_id"] for s in first["sessions"] + rest["sessions"]} == ids
        assert all(s["state"] == "completed" and s["agent"] == agent for s in first["sessions"])
        running = await http.get("/sessions", params={"state": "running", "agent": agent}, headers=auth(READER))
        assert running.json() == {"sessions": [], "next_offset": None}


async def test_no_keys_means_closed_and_cors_is_closed_by_default(settings: Settings) -> None:
    from tests.support.session_api import session_api as serve

    async with serve(settings, None) as http:
        preflight = await http.options(
            "/sessions",
            headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        )
        assert "access-control-allow-origin" not in preflight.headers
    async with serve(settings, None, cors_origins=["https://app.example"]) as http:
        allowed = await http.options(
            "/sessions",
            headers={
                "Origin": "https://app.example",
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization,content-type",
            },
        )
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        other = await http.options(
            "/sessions", headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
        )
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"


async def test_a_sub_agents_question_and_approval_show_on_the_root_and_are_answered_to_it(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    """GET of the root lists what its sub-agent waits on, each item naming the sub-agent; the answer and the
    decision go to the sub-agent's routes, and the tree finishes."""
    turns, agent = sub_agent_asks()
    settings.model = script(turns)
    async with worker_for(agents=[agent]) as client, session_api(settings, client) as http:
        started = await http.post("/sessions", json={"prompt": "go"}, headers=auth(FULL))
        sid = started.json()["session_id"]
        child = f"{sid}/sub-1"

        async def view_with(field: str) -> dict[str, Any] | None:
            body: dict[str, Any] = (await http.get(f"/sessions/{sid}", headers=auth(READER))).json()
            return body if body.get(field) else None

        view = await eventually(lambda: view_with("pending_questions"), timeout=60, what="the child's question")
        [question] = view["pending_questions"]
        assert question["session_id"] == child and question["question"] == "Which one?"
        assert view["status"]["session_id"] == sid and view["pending_approvals"] == []
        # The child's own view has it too, and the root's answers route does not take the child's question.
        own = (await http.get(f"/sessions/{child}", headers=auth(READER))).json()
        assert [q["ask_id"] for q in own["pending_questions"]] == [question["ask_id"]]
        wrong = await http.post(f"/sessions/{sid}/answers", json={"Which one?": "First"}, headers=auth(ANSWERER))
        assert wrong.status_code in (409, 422), wrong.text
        answered = await http.post(f"/sessions/{child}/answers", json={"Which one?": "First"}, headers=auth(ANSWERER))
        assert answered.status_code == 200, answered.text

        view = await eventually(lambda: view_with("pending_approvals"), timeout=60, what="the child's approval")
        [approval] = view["pending_approvals"]
        assert approval["session_id"] == child and approval["tool"] == "todoWrite"
        decided = await http.post(
            f"/sessions/{child}/approvals/{approval['approval_id']}",
            json={"approve": True, "digest": approval["digest"]},
            headers=auth(ANSWERER),
        )
        assert decided.status_code == 200, decided.text
        result = await asyncio.wait_for(client.session(sid).result(), 60)
    assert result.status == SessionStatus.completed and "helper done" in str(result.final_message)


async def test_a_served_app_is_ready_before_its_first_request_and_rides_out_temporal_away(
    settings: Settings, temporal_env: WorkflowEnvironment, caplog: pytest.LogCaptureFixture
) -> None:
    from agent_tools._boundaries import model_schema
    from agent_tools._service.app import create_app
    from agent_tools._service.sessions_routes import StartSession
    from agent_tools._store.db import Store
    from agent_tools.contracts._service import ServiceSettings
    from tests.support.asgi import served

    service = ServiceSettings(api_keys=KEYS)
    address = temporal_env.client.service_client.config.target_host
    app = create_app(settings.model_copy(update={"service": service, "temporal_address": address}), warm=True)
    async with served(app, timeout=30) as http:

        async def connected() -> object | None:
            return getattr(app.state, "agent_client", None)

        await eventually(connected, timeout=20, what="the service connected at start-up")
        hits = model_schema.cache_info().hits
        model_schema(StartSession)
        assert model_schema.cache_info().hits == hits + 1  # built at start-up, not by a request
        # Ready once it reaches Temporal and a store a worker made; the probe names what is missing.
        unready = await http.get("/readyz")
        assert unready.status_code == 503
        assert unready.json()["checks"]["temporal"] == "ok"
        assert "does not exist yet: start a worker" in unready.json()["checks"]["store"]
        made = Store(settings.database_url)
        await made.create_schema()
        await made.close()
        ready = await http.get("/readyz")
        assert ready.status_code == 200 and ready.json() == {"ready": True, "checks": {"temporal": "ok", "store": "ok"}}
        transcript = await http.get("/sessions/s-none/transcript", headers=auth(FULL))
        assert transcript.status_code == 404, transcript.text
        assert await app.state.agent_client.session("s-none").transcript() == []
        assert app.state.agent_client_owned
    assert not app.state.agent_client_owned  # closed with the app: its store too

    # Temporal not there at start-up: the log says where it was looked for, the routes answer 503.
    caplog.set_level("WARNING", logger="agent_tools._service.app_client")
    away = settings.model_copy(update={"service": service, "temporal_address": "127.0.0.1:9"})
    app = create_app(away, warm=True)
    async with served(app, timeout=30) as http:

        async def warned() -> bool | None:
            return True if "cannot reach Temporal (address 127.0.0.1:9" in caplog.text else None

        await eventually(warned, timeout=20, what="the warning")
        assert (await http.get("/healthz")).status_code == 200
        refused = await http.post("/sessions", json={"prompt": "hi"}, headers=auth(FULL))
        assert refused.status_code == 503, refused.text
        assert refused.json()["detail"] == "the service cannot reach Temporal now; try again shortly"
        streamed = await http.get("/sessions/s-1/events", headers=auth(FULL))
        assert streamed.status_code == 503, streamed.text
        run = {"threadId": "t-1", "runId": "r1", "state": {}, "tools": [], "context": [], "forwardedProps": {},
               "messages": [{"id": "u1", "role": "user", "content": "hi"}]}  # fmt: skip
        agui = await http.post("/agui", json=run, headers=auth(FULL))
        assert agui.status_code == 503, agui.text
        probe = await http.get("/readyz")
        assert probe.status_code == 503 and probe.json()["checks"]["temporal"] == "not connected yet"
    assert FULL not in caplog.text
