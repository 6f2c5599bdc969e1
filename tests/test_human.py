"""askUser end to end on real Temporal: update and signal answers, refusals, timeouts, a 30-day wait."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import SessionHandle
from agent_tools._session import SessionResult, SessionStatus
from agent_tools._settings import Settings
from agent_tools.contracts._human import PendingQuestion
from tests.support.fixture_types import Script, WorkerFor
from tests.support.polling import eventually
from tests.support.sessions import current_details
from tests.support.temporal import running_worker, skip_time

Q_LIB = "Which date formatting library should we use?"
Q_EXTRAS = "Which extras do you want?"
ASK = {
    "name": "askUser",
    "arguments": {
        "questions": [
            {
                "question": Q_LIB,
                "header": "Date Library",
                "options": [
                    {"label": "date-fns", "description": "Lightweight, tree-shakable"},
                    {"label": "dayjs", "description": "Moment.js compatible API, only 2KB"},
                ],
            },
            {
                "question": Q_EXTRAS,
                "header": "Extras",
                "multiSelect": True,
                "options": [
                    {"label": "Time zones", "description": "tz support"},
                    {"label": "Locales", "description": "i18n"},
                    {"label": "Durations", "description": "durations"},
                ],
            },
        ]
    },
}
OPT = {"label": "a", "description": "x"}
SCRIPT = [{"say": "Let me ask.", "tool_calls": [ASK]}, {"say": "got: {{last_tool}}"}]


async def skipping_result(env: WorkflowEnvironment, handle: SessionHandle) -> SessionResult:
    """The result with time skipping unlocked while waiting (only handles the environment's own client
    started do that by themselves; the worker fixture's client is a plain one)."""
    async with env.time_skipping_unlocked():  # type: ignore[attr-defined]  # the test server's
        result: SessionResult = await handle.result()
    return result


async def first_events(handle: SessionHandle) -> Any:
    """Progress events up to and including the first ``question`` event."""
    async for event in handle.progress():
        yield event
        if event.kind == "question":
            return


async def wait_for_questions(handle: SessionHandle, count: int = 1, timeout: float = 20.0) -> list[PendingQuestion]:
    return await eventually(
        lambda: handle.pending_questions(),
        until=lambda pending: len(pending) >= count,
        ignoring=(Exception,),  # the workflow may not have run its first task yet
        timeout=timeout,
        what=f"{count} pending questions",
    )


async def test_ask_user_answered_by_update(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    settings.model = script(SCRIPT)
    async with worker_for() as client:
        handle = await client.start_session("pick a library")
        pending = await wait_for_questions(handle, 2)
        assert [q.question for q in pending] == [Q_LIB, Q_EXTRAS]
        assert pending[1].multiSelect and [o.label for o in pending[0].options] == ["date-fns", "dayjs"]
        assert (await handle.status()).status == SessionStatus.waiting_for_user
        details = await current_details(handle)
        assert "**Waiting for the user**" in details and f"**[Date Library]** {Q_LIB}" in details
        events = [e async for e in first_events(handle)]
        assert [q["question"] for q in events[-1].data["questions"]] == [Q_LIB, Q_EXTRAS]
        # Partial answer: one question answered, the other still pending.
        accepted = await handle.answer_questions({Q_LIB: "date-fns"})
        assert accepted is not None and accepted.accepted == [Q_LIB] and accepted.remaining == 1
        assert [q.question for q in await handle.pending_questions()] == [Q_EXTRAS]
        accepted = await handle.answer_questions({"Extras": {"selected": ["Time zones", "Locales"], "other": "ISO"}})
        assert accepted is not None and accepted.remaining == 0
        result = await handle.result()
        assert result.status == SessionStatus.completed
        assert result.final_message == (
            f'got: User has answered your questions: "{Q_LIB}"="date-fns", "{Q_EXTRAS}"="Time zones" and '
            '"Locales", Other: "ISO". You can now continue with the user\'s answers in mind.'
        )
        state = await handle.human_state()
        assert state.pending == []
        recorded = {a.question: a for a in state.answered[0].answers}
        assert recorded[Q_LIB].selected == ["date-fns"] and recorded[Q_LIB].via == "update"
        assert recorded[Q_EXTRAS].selected == ["Time zones", "Locales"] and recorded[Q_EXTRAS].other == "ISO"


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        ({"What is your name?": "Bob"}, "unknown question"),
        ({Q_LIB: "moment"}, "is not an option"),
        ({Q_LIB: ["date-fns", "dayjs"]}, "single-select"),
        ({Q_LIB: {"other": "   "}}, "non-empty text"),
        ({Q_EXTRAS: []}, "no option chosen"),
    ],
)
async def test_bad_answers_are_refused_and_questions_stay_pending(
    settings: Settings, script: Script, worker_for: WorkerFor, answers: dict[str, Any], reason: str
) -> None:
    settings.model = script(SCRIPT)
    async with worker_for() as client:
        handle = await client.start_session("pick a library")
        await wait_for_questions(handle, 2)
        with pytest.raises(WorkflowUpdateFailedError) as info:
            await handle.answer_questions(answers)
        assert reason in str(info.value.cause)
        assert len(await handle.pending_questions()) == 2
        # By signal the same answer cannot be refused: it is recorded, and nothing else changes.
        await handle.answer_questions(answers, by_signal=True)
        for _ in range(100):
            state = await handle.human_state()
            if state.rejected:
                break
            await asyncio.sleep(0.05)
        assert reason in state.rejected[-1].reason
        assert len(state.pending_questions()) == 2
        assert (await handle.status()).status == SessionStatus.waiting_for_user
        await handle.stop("test over")
        result = await handle.result()
        assert result.status == SessionStatus.stopped
        assert await handle.pending_questions() == []


async def test_ask_user_answered_by_signal(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    settings.model = script(SCRIPT)
    async with worker_for() as client:
        handle = await client.start_session("pick a library")
        await wait_for_questions(handle, 2)
        # A malformed payload is recorded too (the signal takes raw JSON), not dropped.
        await handle.workflow.signal("answer_questions_signal", {"answers": "nope"})
        await handle.answer_questions({Q_LIB: {"other": "luxon"}, Q_EXTRAS: ["Durations"]}, by_signal=True)
        result = await handle.result()
        assert result.final_message == (
            f'got: User has answered your questions: "{Q_LIB}"=Other: "luxon", "{Q_EXTRAS}"="Durations". '
            "You can now continue with the user's answers in mind."
        )
        state = await handle.human_state()
        assert len(state.rejected) == 1 and "malformed" in state.rejected[0].reason
        assert {a.via for a in state.answered[0].answers} == {"signal"}


async def test_invalid_ask_user_arguments_come_back_as_a_tool_error(
    settings: Settings, script: Script, worker_for: WorkerFor
) -> None:
    question = {"question": "No question mark", "header": "Far too long header", "options": [OPT]}
    bad = {"name": "askUser", "arguments": {"questions": [question]}}
    settings.model = script([{"tool_calls": [bad]}, {"say": "{{last_tool}}"}])
    async with worker_for() as client:
        result = await (await client.start_session("ask badly")).result()
        text = result.final_message or ""
        assert text.startswith("Invalid arguments for askUser")
        assert "question mark" in text and "at most 12 characters" in text and "at least 2" in text


async def test_timeout_policy_gives_the_default_answer(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    settings.model = script(SCRIPT)
    async with running_worker(time_skipping_env, settings) as client:
        handle = await client.start_session(
            "pick a library", options={"ask_user_timeout_seconds": 3600, "ask_user_default": "first"}
        )
        result = await skipping_result(time_skipping_env, handle)  # the server jumps over the hour
        assert result.final_message == (
            "got: User did not answer within 3600 seconds; the default answers were used: "
            f'"{Q_LIB}"="date-fns", "{Q_EXTRAS}"="Time zones". '
            "Continue with your best judgement and state the assumptions you make."
        )


async def test_timeout_without_default_says_no_answer(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    settings.model = script(SCRIPT)
    async with running_worker(time_skipping_env, settings) as client:
        handle = await client.start_session("pick a library", options={"ask_user_timeout_seconds": 60})
        result = await skipping_result(time_skipping_env, handle)
        assert result.final_message is not None
        assert f'User did not answer within 60 seconds: "{Q_LIB}", "{Q_EXTRAS}" (no answer).' in result.final_message


async def test_session_waiting_30_days_resumes(
    time_skipping_env: WorkflowEnvironment, settings: Settings, script: Script
) -> None:
    settings.model = script(SCRIPT)
    # No workflow cache: every task replays from history, so nothing of the waiting session lives in the
    # worker's memory and the answer after 30 days is handled by a replay.
    async with running_worker(time_skipping_env, settings, max_cached_workflows=0) as client:
        handle = await client.start_session("pick a library")
        pending = await wait_for_questions(handle, 2)
        asked_at = datetime.fromisoformat(pending[0].asked_at)
        await skip_time(time_skipping_env, timedelta(days=30))
        assert (await handle.status()).status == SessionStatus.waiting_for_user
        assert len(await handle.pending_questions()) == 2
        await handle.answer_questions({Q_LIB: "dayjs", Q_EXTRAS: ["Locales"]})
        result = await skipping_result(time_skipping_env, handle)
        assert result.status == SessionStatus.completed
        assert result.final_message is not None and '"dayjs"' in result.final_message
        state = await handle.human_state()
        answered_at = datetime.fromisoformat(state.answered[0].answers[0].answered_at or "")
        assert answered_at - asked_at >= timedelta(days=30)


async def test_terminal_dialogue_answers_with_numbers(
    settings: Settings, script: Script, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_tools._cli.human import prompt_and_answer

    typed = iter(["x", "3", "", "luxon", "1, 3"])  # a typo, Other, an empty text, the text, two extras
    monkeypatch.setattr("agent_tools._cli.human.read_line", lambda prompt: next(typed))
    settings.model = script(SCRIPT)
    async with worker_for() as client:
        handle = await client.start_session("pick a library")
        accepted = await prompt_and_answer(handle, await wait_for_questions(handle, 2))
        assert accepted is not None and accepted.remaining == 0
        result = await handle.result()
        assert f'"{Q_LIB}"=Other: "luxon", "{Q_EXTRAS}"="Time zones" and "Durations"' in (result.final_message or "")
        state = await handle.human_state()
        assert {a.answered_by for a in state.answered[0].answers} == {"cli"}


async def test_closed_stdin_ends_run_with_advice_and_the_session_keeps_waiting(
    settings: Settings, script: Script, worker_for: WorkerFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agent_tools._cli.sessions import run_and_follow
    from agent_tools._errors import AnswerInputClosed

    def closed(prompt: str) -> str:
        raise EOFError  # what input() does when stdin is /dev/null, a finished pipe, or Ctrl-D

    monkeypatch.setattr("agent_tools._cli.human.read_line", closed)
    settings.model = script(SCRIPT)
    async with worker_for() as client:
        # `agent-tools run` used to wait for the result for ever once its question could not be asked.
        with pytest.raises(AnswerInputClosed, match=r"agent-tools answer session-") as raised:
            await asyncio.wait_for(run_and_follow(client, "pick a library", yes=False), timeout=60)
        session_id = str(raised.value).split("Session ", 1)[1].split(" ", 1)[0]
        handle = client.session(session_id)
        assert (await handle.status()).status == SessionStatus.waiting_for_user
        assert len(await handle.pending_questions()) == 2  # nothing was answered or lost
        await handle.answer_questions({Q_LIB: "dayjs", Q_EXTRAS: ["Locales"]})
        result = await handle.result()
        assert result.status == SessionStatus.completed
        assert f'"{Q_LIB}"="dayjs", "{Q_EXTRAS}"="Locales"' in (result.final_message or "")


async def test_answer_command_json_and_yes(
    temporal_env: WorkflowEnvironment,
    settings: Settings,
    script: Script,
    worker_for: WorkerFor,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from agent_tools._cli import app

    monkeypatch.setenv("AGENT_TOOLS_TEMPORAL_ADDRESS", temporal_env.client.service_client.config.target_host)
    monkeypatch.setenv("AGENT_TOOLS_DATABASE_URL", settings.database_url)
    runner = CliRunner()

    def cli(*args: str) -> Any:
        return runner.invoke(app, list(args))

    settings.model = script(SCRIPT)
    async with worker_for() as client:
        handle = await client.start_session("pick a library")
        await wait_for_questions(handle, 2)
        shown = await asyncio.to_thread(cli, "show", handle.id, "--no-transcript")
        assert shown.exit_code == 0 and f"Waiting for an answer: {Q_LIB} [" in shown.output, shown.output
        assert f"answer with `agent-tools answer {handle.id}`" in shown.output, shown.output
        refused = await asyncio.to_thread(cli, "answer", handle.id, "--json", f'{{"{Q_LIB}": "moment"}}')
        assert refused.exit_code == 1 and "is not an option" in refused.output
        ok = await asyncio.to_thread(cli, "answer", handle.id, "--json", f'{{"{Q_LIB}": "dayjs"}}')
        assert ok.exit_code == 0 and '"remaining": 1' in ok.output
        rest = await asyncio.to_thread(cli, "answer", handle.id, "--yes")
        assert rest.exit_code == 0 and "Time zones (--yes)" in rest.output
        result = await handle.result()
        assert f'"{Q_LIB}"="dayjs", "{Q_EXTRAS}"="Time zones"' in (result.final_message or "")
        none_left = await asyncio.to_thread(cli, "answer", handle.id, "--yes")
        assert none_left.exit_code == 1 and "No questions are pending" in none_left.output
