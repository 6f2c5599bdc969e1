"""The session routes with hostile input: deep and huge JSON, wrong types, NUL bytes and lone surrogates,
huge numbers, unknown ids, oversized messages, Last-Event-IDs that are garbage or another session's. Each
gets a 4xx with a reason (never a 500), and the session they were aimed at loses nothing and goes on."""

from __future__ import annotations

import json
from typing import Any

import httpx

from agent_tools._progress_resume import ProgressCursor
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor
from tests.support.hostile import task_failures
from tests.support.polling import eventually
from tests.support.session_api import ASK, FULL, auth, read_sse, session_api


def _deep(levels: int) -> str:
    return '{"x":' * levels + "1" + "}" * levels


def _cases(sid: str) -> list[tuple[str, str, str, dict[str, Any], int]]:
    """(label, method, path, request options, status)."""
    s = f"/sessions/{sid}"
    other = ProgressCursor.start("session-another").encode()
    raw = {"Content-Type": "application/json"}
    control = "\x01" * 100_000  # 100,000 characters, 600,000 bytes of JSON: over what a session takes
    return [
        ("start: nested 5,000 levels", "POST", "/sessions", {"content": '{"prompt": ' + _deep(5000) + "}"}, 400),
        (
            "start: options nested 40 levels",
            "POST",
            "/sessions",
            {"content": '{"output_schema": ' + _deep(40) + "}"},
            400,
        ),
        ("start: not JSON", "POST", "/sessions", {"content": "{nope"}, 400),
        ("start: not an object", "POST", "/sessions", {"content": "[1, 2]"}, 400),
        ("start: a wrong type", "POST", "/sessions", {"json": {"prompt": 12}}, 422),
        ("start: a huge number", "POST", "/sessions", {"json": {"prompt": "x", "max_steps": 10**40}}, 422),
        ("start: bad options", "POST", "/sessions", {"json": {"options": {"ask_user_timeout_seconds": "soon"}}}, 422),
        ("start: a huge body", "POST", "/sessions", {"content": '{"prompt": "' + "y" * 2_000_000 + '"}'}, 413),
        ("start: a huge prompt", "POST", "/sessions", {"json": {"prompt": "y" * 200_000}}, 422),
        ("start: no schema", "POST", "/sessions", {"json": {"output_schema": {"type": "nonsense"}}}, 422),
        ("start: a schema's $ref out", "POST", "/sessions", {"json": {"output_schema": {"$ref": "http://x/s"}}}, 422),
        ("start: its own id again", "POST", "/sessions", {"json": {"prompt": "x", "session_id": sid}}, 409),
        ("start: a NUL in the id (cleaned)", "POST", "/sessions", {"json": {"session_id": f"{sid}\x00b"}}, 201),
        ("list: an unknown state", "GET", "/sessions?state=sleepy", {}, 422),
        ("list: a huge limit", "GET", f"/sessions?limit={10**40}", {}, 422),
        ("list: a NUL in the agent", "GET", "/sessions?agent=a%00b", {}, 400),
        ("read: an unknown session", "GET", "/sessions/session-nobody", {}, 404),
        ("read: a NUL in the id", "GET", "/sessions/a%00b", {}, 400),
        ("read: a lone surrogate in the id", "GET", "/sessions/a%ED%A0%80b", {}, 404),  # decoded as U+FFFD
        ("read: an id of 10,000 characters", "GET", "/sessions/" + "i" * 10_000, {}, 400),
        ("transcript: unknown", "GET", "/sessions/session-nobody/transcript", {}, 404),
        ("transcript: a zero limit", "GET", f"{s}/transcript?limit=0", {}, 422),
        ("events: unknown", "GET", "/sessions/session-nobody/events", {}, 404),
        ("events: garbage Last-Event-ID", "GET", f"{s}/events", {"headers": {"Last-Event-ID": "garbage"}}, 400),
        ("events: another session's", "GET", f"{s}/events", {"headers": {"Last-Event-ID": other}}, 400),
        ("events: a huge offset", "GET", f"{s}/events", {"headers": {"Last-Event-ID": "0a0a0a0a." + "9" * 40}}, 400),
        ("events: a NUL cursor", "GET", f"{s}/events?cursor=ab%00", {}, 400),
        ("events: a cursor of 9,000", "GET", f"{s}/events?cursor=" + "1" * 9000, {}, 422),
        ("message: deep", "POST", f"{s}/messages", {"content": '{"content": ' + _deep(300) + "}"}, 400),
        ("message: a wrong type", "POST", f"{s}/messages", {"json": {"content": 5}}, 422),
        ("message: empty", "POST", f"{s}/messages", {"json": {"content": ""}}, 422),
        ("message: 200,000 characters", "POST", f"{s}/messages", {"json": {"content": "m" * 200_000}}, 422),
        ("message: over 512 KiB of JSON", "POST", f"{s}/messages", {"json": {"content": control}}, 422),
        ("message: unknown session", "POST", "/sessions/session-nobody/messages", {"json": {"content": "hi"}}, 404),
        ("answers: deep", "POST", f"{s}/answers", {"content": '{"Which one?": ' + _deep(300) + "}"}, 400),
        ("answers: a list", "POST", f"{s}/answers", {"content": "[]"}, 400),
        ("answers: empty", "POST", f"{s}/answers", {"json": {}}, 422),
        ("answers: a wrong shape", "POST", f"{s}/answers", {"json": {"answers": [{"question": 5}]}}, 422),
        ("answers: no such question", "POST", f"{s}/answers", {"json": {"Which two?": "First"}}, 409),
        ("answers: no such option", "POST", f"{s}/answers", {"json": {"Which one?": "Third"}}, 409),
        ("answers: unknown session", "POST", "/sessions/session-nobody/answers", {"json": {"a": "b"}}, 404),
        ("approval: unknown id", "POST", f"{s}/approvals/ap-9", {"json": {"approve": False}}, 422),
        ("approval: unknown, approved", "POST", f"{s}/approvals/ap-9", {"json": {"approve": True, "digest": "d"}}, 409),
        ("approval: a wrong type", "POST", f"{s}/approvals/ap-9", {"json": {"approve": "yes please"}}, 422),
        ("approval: a NUL in the id", "POST", f"{s}/approvals/a%00b", {"json": {"approve": False}}, 400),
        ("stop: a huge reason", "POST", f"{s}/stop", {"json": {"reason": "r" * 100_000}}, 422),
        ("stop: not JSON", "POST", f"{s}/stop", {"content": "{nope", "headers": raw}, 400),
        ("stop: unknown session", "POST", "/sessions/session-nobody/stop", {}, 404),
    ]


async def test_hostile_requests_get_a_clear_4xx_and_the_session_goes_on(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([{"say": "asking", "tool_calls": [ASK]}, {"say": "answered {{last_tool}}"}])
    async with worker_for() as client, session_api(settings, client) as http:
        started = await http.post("/sessions", json={"prompt": "go"}, headers=auth(FULL))
        sid = started.json()["session_id"]

        async def asked() -> list[Any] | None:
            return (await http.get(f"/sessions/{sid}", headers=auth(FULL))).json()["pending_questions"] or None

        await eventually(asked, timeout=30, what="the question pending")
        wrong = []
        for label, method, path, options, status in _cases(sid):
            headers = {**auth(FULL), **options.pop("headers", {})}
            resp = await http.request(method, path, headers=headers, **options)
            detail = _detail(resp)
            if resp.status_code != status or not ((isinstance(detail, str) and detail) or status == 201):
                wrong.append((label, resp.status_code, resp.text[:300]))
        assert wrong == [], "\n".join(map(str, wrong))

        # Nothing was lost: the one question is still pending; the session answers, and ends as it should.
        view = (await http.get(f"/sessions/{sid}", headers=auth(FULL))).json()
        assert [q["question"] for q in view["pending_questions"]] == ["Which one?"]
        good = await http.post(f"/sessions/{sid}/answers", json={"Which one?": "First"}, headers=auth(FULL))
        assert good.status_code == 200, good.text
        read = await read_sse(http, f"/sessions/{sid}/events", auth(FULL))
        assert read.ended and read.events[-1].data["status"] == "COMPLETED"
        result = await client.session(sid).result()
        assert result.status == SessionStatus.completed and "First" in (result.final_message or "")
        assert await task_failures(client.temporal, sid) == []


async def test_nul_and_lone_surrogates_in_a_start_are_cleaned(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    settings.model = script([{"say": "got {{last_user}}"}])
    async with worker_for() as client, session_api(settings, client) as http:
        body = '{"prompt": "a\\u0000b\\ud800c", "title": "t\\udfff"}'
        started = await http.post(
            "/sessions", content=body.encode(), headers={**auth(FULL), "Content-Type": "application/json"}
        )
        assert started.status_code == 201, started.text
        result = await client.session(started.json()["session_id"]).result()
        assert result.final_message == "got a\ufffdb\ufffdc"


def _detail(resp: httpx.Response) -> Any:
    try:
        return resp.json().get("detail")
    except (ValueError, json.JSONDecodeError, AttributeError):
        return None


async def test_hostile_query_parameters_get_one_line_of_detail_like_every_other_error(settings: Settings) -> None:
    """A query parameter FastAPI refuses answers 422 with ``{"detail": "<where>: <why>"}``, a string as
    every other 4xx of the service, never FastAPI's list, and without the input echoed back."""
    from agent_tools._service.app import create_app
    from agent_tools.contracts._service import ServiceSettings
    from tests.support.session_api import KEYS

    app = create_app(settings.model_copy(update={"service": ServiceSettings(api_keys=KEYS)}))
    huge = "9" * 20_000
    cases = [
        ("/sessions?limit=abc", "query.limit"),
        (f"/sessions?limit={huge}", "query.limit"),
        ("/sessions?limit=1e400", "query.limit"),
        ("/sessions?offset=-1", "query.offset"),
        ("/sessions?offset=1&offset=x", "query.offset"),
        ("/sessions?state=%00", "query.state"),
        ("/sessions?state=%ED%A0%80", "query.state"),
        ("/sessions?agent=" + "a" * 10_000, "query.agent"),
        ("/sessions?root=", "query.root"),
        ("/sessions?limit=0&offset=-5&state=nope", "query.state"),
        (f"/sessions/s1/transcript?offset={10**40}", "query.offset"),
        ("/sessions/s1/transcript?limit=%F0%9F%92%A9", "query.limit"),
        ("/sessions/s1/events?cursor=" + "c" * 9_000, "query.cursor"),
    ]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
        wrong = []
        for path, where in cases:
            resp = await http.get(path, headers=auth(FULL))
            detail = _detail(resp)
            ok = resp.status_code == 422 and isinstance(detail, str) and detail.startswith(where)
            if not ok or len(detail) > 2_000 or "9" * 50 in detail or "a" * 50 in detail or "c" * 50 in detail:
                wrong.append((path[:60], resp.status_code, resp.text[:200]))
        assert wrong == [], "\n".join(map(str, wrong))
        # Several problems are one line, each named.
        many = _detail(await http.get("/sessions?limit=0&offset=-5&state=nope", headers=auth(FULL)))
        assert "query.limit" in many and "query.offset" in many and "query.state" in many
        # The OpenAPI document says so: a 422 is the service's error body.
        schema = app.openapi()["paths"]["/sessions"]["get"]["responses"]["422"]["content"]["application/json"]
        assert schema["schema"] == {"$ref": "#/components/schemas/ErrorBody"}


async def test_the_readiness_probe_takes_no_input_and_says_the_same_whatever_it_is_sent(settings: Settings) -> None:
    """``/readyz`` reads nothing of the request: hostile query strings, headers and bodies get the answer a
    plain GET gets (here 503: no Temporal on this address), other methods 405, and nothing is echoed."""
    from agent_tools._service.app import create_app

    away = settings.model_copy(update={"temporal_address": "127.0.0.1:9"})
    transport = httpx.ASGITransport(app=create_app(away))
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
        plain = await http.get("/readyz")
        assert plain.status_code == 503 and set(plain.json()["checks"]) == {"temporal", "store"}
        hostile = [
            "/readyz?" + "q=" + "9" * 20_000,
            "/readyz?x=%00%ED%A0%80&x=" + _deep(50),
            "/readyz?ready=true&checks=ok",
        ]
        for path in hostile:
            resp = await http.get(path, headers={"X-Junk": "\x7f" * 4_000})
            assert (resp.status_code, resp.json()) == (503, plain.json()), path[:40]
            assert "9" * 50 not in resp.text
        for method in ("POST", "PUT", "DELETE"):
            resp = await http.request(method, "/readyz", content=_deep(10_000))
            assert resp.status_code == 405, method
