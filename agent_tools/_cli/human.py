"""``agent-tools answer``: answer a session's askUser questions at the terminal, or from a script.

    agent-tools answer SESSION_ID                 # numbered choices, one question after the other
    agent-tools answer SESSION_ID --yes           # first option of every question (demos, smoke tests)
    agent-tools answer SESSION_ID --json '{"Which library?": "date-fns", "Extras": ["a", "b"]}'
    agent-tools answer SESSION_ID --json '{"Why?": {"other": "free text"}}' --signal

:func:`prompt_and_answer` is the same dialogue for other commands (``run`` calls it when a question arrives).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer
from pydantic import BaseModel
from temporalio.client import WorkflowUpdateFailedError

from agent_tools._cli.running import run_or_explain
from agent_tools._errors import AnswerInputClosed
from agent_tools.contracts._human import (
    OTHER_LABEL,
    AnswerAccepted,
    AnswerQuestions,
    AnswerRejected,
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


async def _ask(prompt: str) -> str:
    # input() blocks; a thread keeps the event loop (progress stream, heartbeats) running meanwhile.
    return await asyncio.to_thread(read_line, prompt)


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
    try:
        request = await collect_answers(questions, yes=yes)
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
    if accepted is not None and accepted.remaining:
        typer.echo(f"{accepted.remaining} question(s) still pending.")
    return accepted


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
