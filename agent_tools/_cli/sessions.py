"""Session commands: run, send, stop, sessions, show, watch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agent_tools._cli.running import Interrupted, log_file, other_terminals, run_or_explain, unless
from agent_tools._client import AgentToolsClient, SessionHandle, TranscriptEntry
from agent_tools._model_spec import split_spec
from agent_tools._session_views import TERMINAL_STATUSES
from agent_tools._settings import Settings

if TYPE_CHECKING:
    from agent_tools._activity_io import ProgressEvent
    from agent_tools._cli.console import LiveConsole

DEMO_PROMPT = (
    "Plan a three-day trip to Lisbon for two people who love food and history, and tell me what to book first."
)


def _embedded_commands(settings: Settings) -> tuple[str, str]:
    """``agent-tools dev`` with the embedded run's ports, and the prefix other commands need to reach it
    (empty on the default ports)."""
    port = settings.temporal_address.rpartition(":")[2]
    ui_port = settings.temporal_ui_url.rstrip("/").rpartition(":")[2]
    if (port, ui_port) == ("7233", "8233"):
        return "agent-tools dev", ""
    return (
        f"agent-tools dev --port {port} --ui-port {ui_port}",
        f"AGENT_TOOLS_TEMPORAL_ADDRESS={settings.temporal_address} ",
    )


SCRIPTED_NOTICE = (
    "No model is configured, so this runs the scripted demo model: its answers are the bundled demo "
    "script's, whatever the prompt. For a real model set OPENAI_API_KEY or ANTHROPIC_API_KEY, or "
    "AGENT_TOOLS_MODEL (e.g. ollama:llama3.1), or pass --model."
)


def _how_to_follow(session_id: str, *, embedded: Settings | None) -> str:
    """What to run to reach the session again; after an embedded run, on that run's ports."""
    if embedded is not None:
        dev, reach = _embedded_commands(embedded)
        return (
            f"Stopped following. Session {session_id} is kept in .agent-tools/temporal.db and goes on when the "
            f"server runs again: `{dev}`, then `{reach}agent-tools watch {session_id}` to follow it or "
            f"`{reach}agent-tools stop {session_id}` to stop it."
        )
    return (
        f"Stopped following. Session {session_id} goes on: `agent-tools watch {session_id}` follows it, "
        f"`agent-tools stop {session_id}` stops it."
    )


async def _ask(client: AgentToolsClient, view: LiveConsole, event: ProgressEvent, yes: bool) -> None:
    """A question from anywhere in the tree, asked at this terminal and answered to the session that asked."""
    from agent_tools._cli.human import prompt_and_answer

    target = client.session(event.session_id)
    ask_id = event.data.get("ask_id")
    pending = [q for q in await target.pending_questions() if ask_id is None or q.ask_id == ask_id]
    if not pending:
        return  # answered meanwhile (elsewhere, or before `watch` started)
    if event.session_id != view.root_id:
        view.line(f"Question from sub-agent {view.labels.get(event.session_id, event.session_id)}:", "bold yellow")
    await prompt_and_answer(target, pending, yes=yes)


async def _decide(client: AgentToolsClient, view: LiveConsole, event: ProgressEvent, yes: bool) -> None:
    """A tool call waiting for approval anywhere in the tree, decided at this terminal. ``--yes`` answers
    questions, never approvals: the call stays pending and the line says how to decide it."""
    from agent_tools._cli.approvals import prompt_and_decide

    target = client.session(event.session_id)
    approval_id = event.data.get("approval_id")
    found = [p for p in await target.pending_approvals() if p.approval_id == approval_id]
    if not found:
        return  # decided meanwhile (elsewhere, or before `watch` started)
    if yes:
        view.line(
            f"Tool call {found[0].tool} waits for approval: agent-tools approve {event.session_id} {approval_id}",
            "bold yellow",
        )
        return
    if event.session_id != view.root_id:
        view.line(f"Approval for sub-agent {view.labels.get(event.session_id, event.session_id)}:", "bold yellow")
    await prompt_and_decide(target, found[0])


class _Terminal:
    """One followed session tree at this terminal: its events shown, its questions and approvals asked, and
    in a chat the next message read whenever the root is idle."""

    def __init__(self, handle: SessionHandle, view: LiveConsole, yes: bool) -> None:
        self.handle, self.view, self.yes = handle, view, yes
        self.client = handle._client
        self.stdin = asyncio.Lock()  # one reader of standard input at a time: a question or the chat prompt
        self.idle = asyncio.Event()
        self.busy = asyncio.Event()  # the root runs a turn (started here or from elsewhere)
        self.noticed = False

    async def consume(self) -> None:
        """Show the tree's progress until the root's stream ends."""
        async for event in self.handle.progress(tree=True):
            self.view.handle(event)
            if event.kind == "step_started" and not self.noticed and self.view.scripted_demo():
                self.noticed = True
                self.view.line(SCRIPTED_NOTICE, "yellow")
            if event.kind == "question":
                async with self.stdin:
                    with self.view.paused():
                        await _ask(self.client, self.view, event, self.yes)
            if event.kind == "approval" and event.data.get("state") == "pending":
                async with self.stdin:
                    with self.view.paused():
                        await _decide(self.client, self.view, event, self.yes)
            if event.session_id == self.handle.id and event.kind == "status":
                self._root_status(event.data.get("status"))

    def _root_status(self, status: Any) -> None:
        if status == "idle":
            self.busy.clear()
            self.idle.set()
        elif status == "running":
            self.idle.clear()
            self.busy.set()

    async def _unless_busy(self, reading: Coroutine[Any, Any, str]) -> str | None:
        """The line typed, or None when the root starts a turn first (the line then goes to the next prompt)."""
        got = await unless(reading, self.busy.wait())
        return None if isinstance(got, Interrupted) else got

    async def converse(self) -> None:
        """Read the next message whenever the root is idle, until ``/exit`` or the end of input."""
        from agent_tools._cli.human import ask_line

        while True:
            await self.idle.wait()
            async with self.stdin:
                with self.view.paused():
                    try:
                        line = await self._unless_busy(ask_line("you> "))
                    except EOFError:
                        line = "/exit"
            if line is None:
                # A turn started elsewhere (`agent-tools send`, the API): show it, then prompt again once
                # the root is idle (the status events set and clear ``idle``; it may be idle already).
                continue
            text = line.strip()
            if text in ("/exit", "/quit"):
                return
            if text:
                self.idle.clear()
                await self.handle.send(text)


async def follow(
    handle: SessionHandle,
    *,
    yes: bool = False,
    chat: bool = False,
    view: LiveConsole | None = None,
) -> LiveConsole:
    """Show the live progress of ``handle``'s session tree until the root ends; answer questions at the
    terminal; in a ``chat``, read the next message whenever the session is idle.

    Returns the console, which knows what it showed.
    """
    if view is None:
        # Imported here: the live console (rich, the tool catalog) is for the commands that follow a session.
        from agent_tools._cli.console import LiveConsole

        view = LiveConsole(handle.id)
    terminal = _Terminal(handle, view, yes)
    view.start()
    try:
        tasks = [asyncio.create_task(terminal.consume())]
        if chat:
            tasks.append(asyncio.create_task(terminal.converse()))
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
        for task in done:
            task.result()  # the consumer's error (a question that could not be asked), if any
    finally:
        view.close()
    return view


async def run_and_follow(
    client: AgentToolsClient,
    prompt: str | None,
    *,
    yes: bool,
    chat: bool = False,
    embedded: bool = False,
    **fields: Any,
) -> int:
    handle = await client.start_session(prompt, keep_alive=chat, **fields)
    typer.secho(f"session {handle.id}  ·  {handle.ui_url()}", dim=True)
    if chat:
        typer.secho("a chat: type a message when `you>` asks, /exit (or Ctrl-D) to leave it running", dim=True)
    try:
        view = await follow(handle, yes=yes, chat=chat)
    except asyncio.CancelledError:
        ours = client.settings if embedded else None
        typer.secho("\n" + _how_to_follow(handle.id, embedded=ours), fg="yellow")
        raise
    if chat:
        status = await handle.status()
        if status.status.value not in ("completed", "failed", "stopped", "handed_off"):
            typer.secho(
                f'Left the chat; session {handle.id} stays open: `agent-tools send {handle.id} "..."` talks to it, '
                f"`agent-tools watch {handle.id}` follows it, `agent-tools stop {handle.id}` ends it.",
                fg="yellow",
            )
            return 0
    result = await handle.result()
    if result.final_message and handle.id not in view.replied:
        typer.echo(result.final_message)  # nothing streamed it (the stream was cut): the answer, once
    if result.output is not None:
        typer.echo(json.dumps(result.output, indent=2, ensure_ascii=False))  # the structured result, parsed
    usage = result.usage + result.tree_usage
    typer.echo("")
    typer.secho(
        f"session ended: {result.status.value}  ·  {usage.calls} model call{'' if usage.calls == 1 else 's'}, "
        f"{usage.input_tokens}+{usage.output_tokens} tokens, ${usage.cost_usd:.4f}",
        bold=True,
    )
    if result.error and result.status.value != "completed":
        typer.secho(f"error: {result.error}", fg="red")
    typer.echo(f"Temporal UI: {handle.ui_url()}")
    if result.handed_off_to:
        typer.echo(f"handed off: the conversation continues in session {result.handed_off_to}")
    return 0 if result.status.value in ("completed", "handed_off") else 1


def register(app: typer.Typer) -> None:
    """The session commands: those that start and follow one, those that steer one, those that look."""
    _register_starts(app)
    _register_steering(app)
    _register_looks(app)


def _register_starts(app: typer.Typer) -> None:
    @app.command()
    def run(
        prompt: str = typer.Argument(..., help="What the agent should do"),
        agent: str = typer.Option("assistant", help="Agent name (agents.toml)"),
        model: str | None = typer.Option(None, help="Model spec, e.g. openai:gpt-4.1-mini"),
        chat: bool = typer.Option(
            False, "--chat", help="Keep the session open and read the next message at the prompt"
        ),
        embedded: bool = typer.Option(False, "--embedded", help="Start an embedded dev server and worker"),
        yes: bool = typer.Option(False, "--yes", "-y", help="Answer every question with its first option"),
        keep_open: bool = typer.Option(False, help="With --embedded: keep the server and UI up until Ctrl-C"),
        port: int = typer.Option(7233, help="With --embedded: Temporal frontend port"),
        ui_port: int = typer.Option(8233, help="With --embedded: Temporal UI port"),
        schema: Path | None = typer.Option(
            None, "--schema", help="A JSON Schema file: the final answer must match it; printed as JSON"
        ),
        tool: list[str] | None = typer.Option(
            None, "--tool", help="Offer this tool (repeatable): the session gets exactly the tools named"
        ),
    ) -> None:
        """Start a session, stream its progress, answer its questions at the terminal, print the answer."""
        ports = (port, ui_port)
        _command(_Run(prompt, agent, model, chat, embedded, yes, keep_open, ports, _read_schema(schema), tool))

    @app.command()
    def chat(
        prompt: str | None = typer.Argument(None, help="The first message (or type it at the prompt)"),
        agent: str = typer.Option("assistant", help="Agent name (agents.toml)"),
        model: str | None = typer.Option(None, help="Model spec, e.g. openai:gpt-4.1-mini"),
        embedded: bool = typer.Option(False, "--embedded", help="Start an embedded dev server and worker"),
        yes: bool = typer.Option(False, "--yes", "-y", help="Answer every question with its first option"),
        port: int = typer.Option(7233, help="With --embedded: Temporal frontend port"),
        ui_port: int = typer.Option(8233, help="With --embedded: Temporal UI port"),
        tool: list[str] | None = typer.Option(
            None, "--tool", help="Offer this tool (repeatable): the session gets exactly the tools named"
        ),
    ) -> None:
        """A conversation: the session stays open, each line you type is its next message (`run --chat`)."""
        _command(_Run(prompt, agent, model, chat=True, embedded=embedded, yes=yes, ports=(port, ui_port), tools=tool))

    @app.command()
    def demo(
        yes: bool = typer.Option(True, "--yes/--ask", help="Answer the demo's question automatically"),
        keep_open: bool = typer.Option(False, help="Keep the embedded server and UI up until Ctrl-C"),
        port: int = typer.Option(7233, help="Temporal frontend port"),
        ui_port: int = typer.Option(8233, help="Temporal UI port"),
    ) -> None:
        """The demo session on the embedded dev server (scripted model unless an API key is set)."""
        _command(_Run(DEMO_PROMPT, embedded=True, yes=yes, keep_open=keep_open, ports=(port, ui_port)))


def _register_steering(app: typer.Typer) -> None:
    @app.command()
    def send(session_id: str, message: str) -> None:
        """Send a message to a session (accepted or refused with a reason)."""

        async def go() -> None:
            client = await AgentToolsClient.connect()
            accepted = await client.session(session_id).send(message)
            typer.echo(f"accepted (queued behind {accepted.queued_behind})")

        run_or_explain(go())

    @app.command()
    def stop(session_id: str, reason: str = typer.Option("stopped by user")) -> None:
        """Stop a session and its sub-agents."""

        async def go() -> None:
            client = await AgentToolsClient.connect()
            await client.session(session_id).stop(reason)
            typer.echo("stop requested")

        run_or_explain(go())


def _register_looks(app: typer.Typer) -> None:
    @app.command()
    def sessions(
        agent: str | None = typer.Option(None),
        root: str | None = typer.Option(None, help="Only this session tree"),
        state: str | None = typer.Option(None, help="SessionState, e.g. waiting_for_user"),
        limit: int = typer.Option(50),
    ) -> None:
        """List sessions (Temporal visibility, filtered by the session search attributes)."""

        async def go() -> None:
            client = await AgentToolsClient.connect()
            for s in await client.list_sessions(agent=agent, root_id=root, state=state, limit=limit):
                indent = "  " * (s.depth or 0)
                title = f"  {s.title}" if s.title else ""
                typer.echo(
                    f"{indent}{s.session_id}  {s.agent}  {s.state}  {s.status}  {s.start_time:%Y-%m-%d %H:%M:%S}{title}"
                )

        run_or_explain(go())

    @app.command()
    def show(session_id: str, transcript: bool = typer.Option(True, help="Print the stored transcript")) -> None:
        """Status and transcript of a session."""

        async def go() -> None:
            client = await AgentToolsClient.connect()
            handle = client.session(session_id)
            # The transcript (the store) is read while the status (a query) is asked; a missing session is
            # the status's error to report, whatever the store says.
            reading = asyncio.ensure_future(handle.transcript(limit=10_000) if transcript else _no_entries())
            try:
                status = await handle.status()
            except BaseException:
                reading.cancel()
                raise
            entries = await reading
            typer.echo(status.model_dump_json(indent=2))
            if status.status not in TERMINAL_STATUSES:
                await _show_waiting(handle)
            if transcript:
                for e in entries:
                    calls = " ".join(f"{c['name']}({json.dumps(c['arguments'])[:80]})" for c in e.tool_calls)
                    typer.echo(
                        f"[{e.seq}] {e.role}{' ' + e.name if e.name else ''}: {e.content[:2000]} {calls}".rstrip()
                    )
            await client.close()

        run_or_explain(go())

    @app.command()
    def watch(session_id: str, yes: bool = typer.Option(False, "--yes", "-y")) -> None:
        """Follow a session's live progress (its sub-agents' too) and answer its questions here."""

        async def go() -> None:
            client = await AgentToolsClient.connect()
            handle = client.session(session_id)
            try:
                await follow(handle, yes=yes)
            except asyncio.CancelledError:
                typer.secho("\n" + _how_to_follow(session_id, embedded=None), fg="yellow")
                raise
            status = await handle.status()
            typer.secho(f"session ended: {status.status.value}", bold=True)

        run_or_explain(go())


async def _no_entries() -> list[TranscriptEntry]:
    return []


async def _show_waiting(handle: SessionHandle) -> None:
    """What the session waits for a person to do, and the command that does it (``show`` printed only the
    status, where a pending approval was one field among many)."""
    from agent_tools._cli.approvals import describe

    questions, approvals = await handle.pending_questions(), await handle.pending_approvals()
    for q in questions:
        options = ", ".join(o.label for o in q.options)
        typer.secho(f"Waiting for an answer: {q.question} [{options}]", bold=True)
    if questions:
        typer.echo(f"  answer with `agent-tools answer {handle.id}`")
    for p in approvals:
        typer.secho("Waiting for an approval:", bold=True)
        typer.echo("  " + describe(p).replace("\n", "\n  "))
        typer.echo(f"  decide with `agent-tools approve {handle.id} {p.approval_id} [--deny --reason ...]`")


@dataclass(frozen=True)
class _Run:
    """What run, chat and demo ask for."""

    prompt: str | None
    agent: str = "assistant"
    model: str | None = None
    chat: bool = False
    embedded: bool = False
    yes: bool = False
    keep_open: bool = False
    ports: tuple[int, int] = (7233, 8233)
    output_schema: dict[str, Any] | None = None
    tools: list[str] | None = None


def _read_schema(path: Path | None) -> dict[str, Any] | None:
    """The JSON Schema of ``--schema``; a file that is not one stops the command before anything starts."""
    if path is None:
        return None
    from agent_tools.contracts._output import schema_refusal

    try:
        schema = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="--schema") from exc
    refusal = schema_refusal(schema)
    if refusal is not None:
        raise typer.BadParameter(refusal, param_hint="--schema")
    return dict(schema)


def _command(run: _Run) -> None:
    """One session, followed at this terminal; exits with its status."""
    raise typer.Exit(run_or_explain(_run(run)))


async def _run(run: _Run) -> int:
    prompt, agent, model, chat, embedded, yes = run.prompt, run.agent, run.model, run.chat, run.embedded, run.yes
    keep_open, ports = run.keep_open, run.ports
    settings = Settings()
    fields: dict[str, Any] = {"agent": agent}
    if model:
        fields["model"] = model
    if run.output_schema is not None:
        fields["output_schema"] = run.output_schema
    if run.tools:
        fields["tools"] = list(dict.fromkeys(run.tools))
    spec = model or settings.model
    if spec:
        # A malformed spec fails here, before a session or a server starts. Whether the provider exists and
        # has a key is the worker's to say (its settings, not this terminal's): it fails the session if not.
        split_spec(spec)
    if not embedded:
        client = await AgentToolsClient.connect(settings)
        return await run_and_follow(client, prompt, yes=yes, chat=chat, **fields)
    from agent_tools._embedded import embedded as start_embedded
    from agent_tools._embedded import server_log_file

    async with start_embedded(
        settings, port=ports[0], ui_port=ports[1], log_file=log_file(), exit_on_cancel=True
    ) as client:
        ours = client.settings
        typer.secho(f"embedded Temporal dev server at {ours.temporal_address}, UI {ours.temporal_ui_url}", dim=True)
        typer.secho(f"worker logs: {log_file()}, the server's: {server_log_file(log_file())}", dim=True)
        code = await run_and_follow(client, prompt, yes=yes, chat=chat, embedded=True, **fields)
        if keep_open:
            typer.echo(other_terminals(ours))
            typer.echo("server and UI stay up; Ctrl-C to stop")
            with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
                await asyncio.Event().wait()
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
