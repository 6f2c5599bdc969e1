"""The CLI in a real terminal (tmux): streamed text shows before the model step ends, for both wire
formats; questions of a sub-agent are answered at the terminal; a chat reads the next message; Ctrl-C
leaves the session running and says how to reach it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._session import SessionStatus
from agent_tools._settings import ProviderEndpoint, Settings
from tests.support.fake_llm import FakeLLMServer, anthropic_stream, fake_llm_server, openai_stream
from tests.support.fixture_types import Script, WorkerFor
from tests.support.terminal import Terminal, cli_env

WORDS = "Lisbon is best on foot: start early in Alfama, ride tram 28 to Graca, and end the day at a miradouro".split()


def session_of(screen: str) -> str:
    found = re.search(r"session (session-[0-9a-f-]{36})", screen)
    assert found, screen
    return found.group(1)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(tmp_path)
    try:
        yield term
    finally:
        term.close()


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with fake_llm_server() as server:
        yield server


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_streamed_text_is_on_screen_before_the_step_ends(
    kind: str,
    llm: FakeLLMServer,
    settings: Settings,
    temporal_env: WorkflowEnvironment,
    worker_for: WorkerFor,
    terminal: Terminal,
) -> None:
    pieces = [w + " " for w in WORDS]
    slow = openai_stream if kind == "openai" else anthropic_stream
    llm.queue(slow(pieces, chunk_delay=0.25))  # about six seconds for the whole reply
    settings.providers = {"local": ProviderEndpoint(kind=kind, base_url=llm.base_url, api_key="k")}
    settings.model = "local:slow-model"
    async with worker_for() as client:
        terminal.start(["run", "plan a day in Lisbon"], cli_env(temporal_env, settings))
        mid = await terminal.wait_for(lambda s: "ride tram 28" in s, timeout=30)
        # Mid-step: the first words are on screen, the last are not written yet, the spinner runs.
        assert "miradouro" not in mid
        assert "model step 1 · slow-model" in mid
        assert "session ended" not in mid
        done = await terminal.wait_for(lambda s: "EXIT=" in s, timeout=30)
        result = await client.session(session_of(done)).result()
    assert "EXIT=0" in done and "session ended: completed" in done
    assert done.count("end the day at a miradouro") == 1  # the answer, once
    assert "Temporal UI: http://" in done and result.final_message == " ".join(WORDS) + " "


SUBAGENT_QUESTION = [
    {
        "match": {"title": "Budget check"},
        "turns": [
            {
                "say": "",
                "tool_calls": [
                    {
                        "name": "askUser",
                        "arguments": {
                            "questions": [
                                {
                                    "question": "How much may the trip cost?",
                                    "header": "Budget",
                                    "options": [
                                        {"label": "Under 1000 EUR", "description": "Frugal"},
                                        {"label": "Any", "description": "No limit"},
                                    ],
                                }
                            ]
                        },
                    }
                ],
            },
            {"say": "Budget: {{tool_results}}"},
        ],
    },
    {
        "turns": [
            {
                "say": "Asking a helper.",
                "tool_calls": [
                    {
                        "name": "subAgent",
                        "arguments": {"title": "Budget check", "instruction": "Ask the budget.", "mode": "sync"},
                    }
                ],
            },
            {"say": "Done: {{tool_results:subAgent.result}}"},
        ],
    },
]


async def test_a_sub_agents_question_is_asked_and_answered_at_the_terminal(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor, terminal: Terminal
) -> None:
    settings.model = script(SUBAGENT_QUESTION)
    async with worker_for() as client:
        terminal.start(["run", "plan"], cli_env(temporal_env, settings))
        asked = await terminal.wait_for(lambda s: "Choose (a number 1-3)" in s, timeout=40)
        assert "Question from sub-agent Budget check:" in asked and "How much may the trip cost?" in asked
        terminal.keys("2", "Enter")
        done = await terminal.wait_for(lambda s: "EXIT=" in s, timeout=40)
        listed = await client.list_sessions(root_id=session_of(done))
    assert "EXIT=0" in done, done
    assert '"How much may the trip cost?"="Any"' in done  # the sub-agent got the answer typed here
    assert len(listed) == 2


async def test_chat_reads_the_next_message_and_send_works_on_it(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor, terminal: Terminal
) -> None:
    from typer.testing import CliRunner

    from agent_tools._cli import app

    settings.model = script([{"say": "hello, you said {{last_user}}"}, {"say": "second: {{last_user}}"},
                             {"say": "third: {{last_user}}"}])  # fmt: skip
    env = cli_env(temporal_env, settings)
    async with worker_for() as client:
        terminal.start(["chat", "first words"], env)
        await terminal.wait_for(lambda s: "hello, you said first words" in s and "you>" in s, timeout=40)
        terminal.keys("tell me more", "Enter")
        await terminal.wait_for(lambda s: "second: tell me more" in s, timeout=40)
        session_id = session_of(await terminal.wait_for(lambda s: "you>" in s))
        sent = await asyncio.to_thread(CliRunner().invoke, app, ["send", session_id, "from elsewhere"], env=env)
        assert sent.exit_code == 0, sent.output
        await terminal.wait_for(lambda s: "third: from elsewhere" in s, timeout=40)  # shown in the chat too
        # ... and then a new prompt, under that turn's answer, not the old one above it.
        await terminal.wait_for(lambda s: s.split("third: from elsewhere", 1)[-1].count("you>") == 1, timeout=20)
        terminal.keys("/exit", "Enter")
        done = await terminal.wait_for(lambda s: "EXIT=" in s, timeout=30)
        status = await client.session(session_id).status()
        await client.session(session_id).stop()
    assert "EXIT=0" in done and f"agent-tools send {session_id}" in done
    assert status.status == SessionStatus.idle  # the chat left it open


async def test_ctrl_c_leaves_the_session_running_and_says_how_to_reach_it(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor, terminal: Terminal
) -> None:
    settings.model = script([{"say": " ".join(WORDS), "word_seconds": 0.3}])
    async with worker_for() as client:
        terminal.start(["run", "plan"], cli_env(temporal_env, settings))
        await terminal.wait_for(lambda s: "start early" in s, timeout=30)
        terminal.keys("C-c")
        done = await terminal.wait_for(lambda s: "EXIT=" in s, timeout=20)
        session_id = session_of(done)
        result = await client.session(session_id).result()
    assert "EXIT=130" in done and "Traceback" not in done and "Aborted" not in done
    assert f"Session {session_id} goes on: `agent-tools watch {session_id}`" in done
    assert "start early" in done  # what was shown stays shown
    assert result.status == SessionStatus.completed  # it went on without the terminal


def test_no_key_names_the_demo_model_and_a_malformed_spec_fails_at_once(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from agent_tools._cli import app

    env = {
        "AGENT_TOOLS_TEMPORAL_ADDRESS": "127.0.0.1:1",
        "AGENT_TOOLS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/s.db",
    }
    out = CliRunner().invoke(app, ["run", "hi", "--model", "gpt-4.1-mini"], env=env)
    assert out.exit_code == 1 and "model spec 'gpt-4.1-mini' must look like 'provider:model'" in out.output
    # Providers and script files are the worker's to know: a well-formed spec goes on to the server (here
    # unreachable); a worker that cannot serve it fails the session (tests/test_ui_and_client.py).
    for spec in ("nosuch:model-x", f"scripted:{tmp_path}/missing.yaml"):
        out = CliRunner().invoke(app, ["run", "hi", "--model", spec], env=env)
        assert out.exit_code == 1 and "cannot reach Temporal" in out.output, out.output


async def test_a_question_answered_elsewhere_leaves_the_prompt_and_the_run_goes_on(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor, terminal: Terminal
) -> None:
    """`run` waits at the prompt; the answer comes from another client: the prompt says who answered what,
    the run follows the session to its end, and a key typed afterwards is no traceback."""
    from agent_tools.contracts._human import AnswerQuestions, QuestionAnswer

    settings.model = script(SUBAGENT_QUESTION)
    async with worker_for() as client:
        terminal.start(["run", "plan"], cli_env(temporal_env, settings))
        asked = await terminal.wait_for(lambda s: "Choose (a number 1-3)" in s, timeout=40)
        child = f"{session_of(asked)}/sub-1"  # the sub-agent asked
        await client.session(child).answer_questions(
            AnswerQuestions(
                answers=[QuestionAnswer(question="How much may the trip cost?", selected=["Any"])],
                answered_by="the ops console",
            )
        )
        moved = await terminal.wait_for(lambda s: "Answered elsewhere" in s, timeout=20)
        assert "Answered elsewhere (by the ops console): How much may the trip cost? -> Any" in moved
        done = await terminal.wait_for(lambda s: "EXIT=" in s, timeout=40)
        terminal.keys("1", "Enter")
        after = await terminal.wait_for(lambda s: "EXIT=" in s)
    assert "EXIT=0" in done, done
    assert '"How much may the trip cost?"="Any"' in done
    assert "Traceback" not in after
