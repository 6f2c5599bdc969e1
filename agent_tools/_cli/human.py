"""``agent-tools answer``: answer a session's askUser questions at the terminal, or from a script.

    agent-tools answer SESSION_ID                 # numbered choices, one question after the other
    agent-tools answer SESSION_ID --yes           # first option of every question (demos, smoke tests)
    agent-tools answer SESSION_ID --json '{"Which library?": "date-fns", "Extras": ["a", "b"]}'
    agent-tools answer SESSION_ID --json '{"Why?": {"other": "free text"}}' --signal

:func:`prompt_and_answer` is the same dialogue for other commands (``run`` calls it when a question arrives).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import typer
from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.service import RPCError

from agent_tools._cli.running import Interrupted, run_or_explain, unless
from agent_tools._errors import AgentToolsError, AnswerInputClosed
from agent_tools._session import SessionStatus
from agent_tools.contracts._human import (
    OTHER_LABEL,
    AnswerAccepted,
    AnsweredAsk,
    AnswerQuestions,
    AnswerRejected,
    HumanState,
    PendingQuestion,
    QuestionAnswer,
    parse_answer_payload,
)

if TYPE_CHECKING:
    from agent_tools._client import SessionHandle


class _Question(BaseModel):
    """A question as the dialogue needs it, from a progress event (dict) or a ``pending_questions`` row."""

    question: str
    header: str = ""
    labels: list[str]
    descriptions: list[str]
    multi: bool = False


def _normalise(questions: Sequence[Any]) -> list[_Question]:
    out: list[_Question] = []
    for q in questions:
        data = q.model_dump() if isinstance(q, BaseModel) else dict(q)
        options = data.get("options") or []
        out.append(
            _Question(
                question=str(data.get("question", "")),
                header=str(data.get("header", "")),
                labels=[str(o.get("label", "")) for o in options],
                descriptions=[str(o.get("description", "")) for o in options],
                multi=bool(data.get("multiSelect", False)),
            )
        )
    return out


def parse_choice(text: str, q: _Question) -> tuple[list[str], bool] | None:
    """Numbers typed for one question -> (chosen labels, Other chosen); None when the input does not fit.

    ``1`` picks the first option, ``1,3`` (or ``1 3``) several on a multi-select question, and the number
    after the last option is "Other". A label typed in full is accepted too.
    """
    text = text.strip()
    if not text:
        return None
    lowered = {label.casefold(): label for label in q.labels}
    if text.casefold() in lowered:
        return [lowered[text.casefold()]], False
    if text.casefold() == OTHER_LABEL.casefold():
        return [], True
    parts = [p for p in text.replace(",", " ").split() if p]
    if not all(p.isdigit() for p in parts):
        return None
    numbers = list(dict.fromkeys(int(p) for p in parts))
    if not q.multi and len(numbers) != 1:
        return None
    if any(n < 1 or n > len(q.labels) + 1 for n in numbers):
        return None
    labels = [q.labels[n - 1] for n in numbers if n <= len(q.labels)]
    return labels, (len(q.labels) + 1) in numbers


def read_line(prompt: str) -> str:
    """One line from the terminal (tests replace this)."""
    return input(prompt)


# The one line read in flight. input() blocks in a thread that cannot be stopped, so a prompt given up (its
# question answered elsewhere) leaves its read running; the next prompt takes that read over instead of
# starting a second reader that would race it for the next line typed.
_reads: dict[str, asyncio.Future[str]] = {}


async def ask_line(prompt: str) -> str:
    """One line from the terminal after ``prompt``, without blocking the event loop (progress streams and
    heartbeats go on); a caller cancelled meanwhile leaves the line to the next caller."""
    read = _reads.get("line")
    if read is None or read.done() or read.get_loop() is not asyncio.get_running_loop():
        read = _read_in_daemon_thread(prompt)
        _reads["line"] = read
    else:
        typer.echo(prompt, nl=False)  # the read in flight showed an older prompt
    try:
        return await asyncio.shield(read)
    finally:
        if read.done() and _reads.get("line") is read:
            del _reads["line"]


def _read_in_daemon_thread(prompt: str) -> asyncio.Future[str]:
    # A daemon thread, not the loop's executor: asyncio.run() waits for its executor's threads at the end,
    # and a read given up would keep the command from exiting until a line is typed.
    loop = asyncio.get_running_loop()
    read: asyncio.Future[str] = loop.create_future()

    def settle(line: str | None, error: BaseException | None) -> None:
        if read.done():
            return
        if error is not None:
            read.set_exception(error)
        else:
            read.set_result(line or "")

    def run() -> None:
        try:
            line = read_line(prompt)
        except BaseException as exc:  # EOFError, KeyboardInterrupt: the awaiting caller decides
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(settle, None, exc)
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, line, None)

    threading.Thread(target=run, name="agent-tools-stdin", daemon=True).start()
    return read


_ask = ask_line


async def collect_answers(questions: Sequence[Any], *, yes: bool = False) -> AnswerQuestions:
    """Ask each question at the terminal (or pick the first option of each with ``yes``)."""
    answers: list[QuestionAnswer] = []
    for q in _normalise(questions):
        if yes:
            typer.echo(f"[{q.header}] {q.question} -> {q.labels[0]} (--yes)")
            answers.append(QuestionAnswer(question=q.question, selected=[q.labels[0]]))
            continue
        typer.secho(f"\n[{q.header}] {q.question}", bold=True)
        for i, (label, description) in enumerate(zip(q.labels, q.descriptions, strict=True), 1):
            typer.echo(f"  {i}) {label}: {description}")
        typer.echo(f"  {len(q.labels) + 1}) {OTHER_LABEL} (type your own answer)")
        hint = "one or more numbers, e.g. 1,3" if q.multi else f"a number 1-{len(q.labels) + 1}"
        while True:
            choice = parse_choice(await _ask(f"Choose ({hint}): "), q)
            if choice is not None:
                break
            typer.secho(f"  Please type {hint}.", fg="red")
        labels, wants_other = choice
        other: str | None = None
        if wants_other:
            while not (other := (await _ask("  Your answer: ")).strip()):
                typer.secho("  The answer must not be empty.", fg="red")
        answers.append(QuestionAnswer(question=q.question, selected=labels, other=other))
    return AnswerQuestions(answers=answers, answered_by="cli")


async def prompt_and_answer(
    handle: SessionHandle, questions: Sequence[Any], *, yes: bool = False
) -> AnswerAccepted | None:
    """Ask at the terminal and send the answers by update; prints why when the session refuses them.

    ``questions``: the ``question`` progress event's ``questions`` (dicts) or ``pending_questions`` rows.
    Returns None when the session refused the answers (they were already answered elsewhere, for example).
    """
    asked = {q.ask_id for q in questions if isinstance(q, PendingQuestion)}
    try:
        request = await _unless_answered_elsewhere(handle, asked, collect_answers(questions, yes=yes))
    except _AnsweredElsewhere as elsewhere:
        typer.echo("")  # end the prompt's line
        typer.secho(str(elsewhere), fg="yellow")
        return None
    except EOFError as exc:
        typer.echo("")  # end the prompt's line
        raise AnswerInputClosed(
            f"No answer could be read: standard input is closed. Session {handle.id} is still waiting for it; "
            f"answer with `agent-tools answer {handle.id}` (at a terminal, or with --json), or use --yes."
        ) from exc
    try:
        accepted = await handle.answer_questions(request)
    except WorkflowUpdateFailedError as exc:
        typer.secho(f"The session refused the answers: {exc.cause or exc}", fg="red", err=True)
        return None
    except RPCError as exc:
        # The session ended while the answer was typed (answered elsewhere, stopped, timed out).
        typer.secho(f"The answers were not sent: {exc.message}", fg="red", err=True)
        return None
    if accepted is not None and accepted.remaining:
        typer.echo(f"{accepted.remaining} question(s) still pending.")
    return accepted


class _AnsweredElsewhere(AgentToolsError):
    """The questions being asked here were answered by someone else: the message says who and what."""


# How often a prompt checks whether its questions were answered elsewhere (another terminal, the UI, the API).
_ELSEWHERE_POLL_SECONDS = 0.5


async def _unless_answered_elsewhere(
    handle: SessionHandle, asked: set[str], dialogue: Coroutine[Any, Any, AnswerQuestions]
) -> AnswerQuestions:
    """The dialogue's answers, unless every ask in ``asked`` stops pending first (then _AnsweredElsewhere)."""
    if not asked:
        return await dialogue
    got = await unless(dialogue, _wait_until_answered(handle, asked))
    if isinstance(got, Interrupted):
        raise _AnsweredElsewhere(got.value)
    return got


async def _wait_until_answered(handle: SessionHandle, asked: set[str]) -> str:
    """Watch the session until none of ``asked`` is pending; returns what to tell the person. The server
    says whether the run's history grew (no worker involved); the worker is asked only when it did, since
    an answer is an update or a signal, which adds events."""
    seen: tuple[str | None, int] | None = None
    while True:
        await asyncio.sleep(_ELSEWHERE_POLL_SECONDS)
        try:
            description = await handle.workflow.describe()
        except Exception:
            continue  # the server is away for a moment: try again
        run_status = description.status
        closed = run_status is not None and run_status != WorkflowExecutionStatus.RUNNING
        now = (description.run_id, description.history_length)
        if now == seen and not closed:
            continue
        try:
            state: HumanState | None = await handle.human_state()
        except Exception:
            state = None  # no worker for a moment, or a run being replaced: ask again when the history moves
        if state is not None:
            seen = now
            if not any(ask.ask_id in asked for ask in state.pending):
                return _answered_line([a for a in state.answered if a.ask_id in asked])
        if closed and run_status is not None:
            status = await _status_or_none(handle)
            ended = status.value if status is not None else run_status.name.lower()
            return f"The session ended ({ended}) while the question waited here; nothing was sent."


async def _status_or_none(handle: SessionHandle) -> SessionStatus | None:
    try:
        return (await handle.status()).status
    except Exception:
        return None


def _answered_line(answered: Sequence[AnsweredAsk]) -> str:
    """ "Answered elsewhere (by ui): Which library? -> date-fns" for what someone else answered."""
    answers = [a for ask in answered for a in ask.answers]
    if not answers:
        return "These questions were answered elsewhere."
    if any(ask.timed_out for ask in answered):
        who = "its timeout"
    else:
        who = ", ".join(dict.fromkeys(a.answered_by or f"an {a.via}" for a in answers))
    picked = "; ".join(
        f"{a.question} -> {', '.join([*a.selected, *([a.other] if a.other else [])]) or '(no choice)'}" for a in answers
    )
    return f"Answered elsewhere (by {who}): {picked}"[:2000]


async def _answer(session_id: str, payload: str | None, yes: bool, by_signal: bool) -> int:
    from agent_tools._client import AgentToolsClient

    client = await AgentToolsClient.connect()
    try:
        handle = client.session(session_id)
        if payload is not None:
            try:
                request = parse_answer_payload(payload)
                accepted = await handle.answer_questions(request, by_signal=by_signal)
            except AnswerRejected as exc:
                typer.secho(f"Bad answers: {exc}", fg="red", err=True)
                return 2
            except WorkflowUpdateFailedError as exc:
                typer.secho(f"The session refused the answers: {exc.cause or exc}", fg="red", err=True)
                return 1
            if accepted is None:
                typer.echo("Answers signalled (a bad answer is recorded as rejected; see `pending_questions`).")
            else:
                typer.echo(json.dumps(accepted.model_dump()))
            return 0
        pending = await handle.pending_questions()
        if not pending:
            typer.echo("No questions are pending.")
            return 1
        return 0 if await prompt_and_answer(handle, pending, yes=yes) is not None else 1
    finally:
        await client.close()


def register(app: typer.Typer) -> None:
    @app.command("answer")
    def answer(
        session_id: str = typer.Argument(..., help="The session waiting on askUser"),
        payload: str | None = typer.Option(
            None,
            "--json",
            help='Answers as JSON: {"question or header": "label" | ["labels"] | {"other": "text"}}',
        ),
        yes: bool = typer.Option(False, "--yes", "-y", help="Pick the first option of every question"),
        signal: bool = typer.Option(False, "--signal", help="Send by signal instead of update (with --json)"),
    ) -> None:
        """Answer the questions a session asked with askUser."""
        raise typer.Exit(run_or_explain(_answer(session_id, payload, yes, signal)))
