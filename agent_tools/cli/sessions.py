"""Session commands: run, send, stop, sessions, show, watch."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import typer

from agent_tools.activity_io import ProgressEvent
from agent_tools.cli.running import run_or_explain
from agent_tools.client import AgentToolsClient, SessionHandle
from agent_tools.settings import Settings

DEMO_PROMPT = (
    "Plan a three-day trip to Lisbon for two people who love food and history, and tell me what to book first."
)


def _echo_event(event: ProgressEvent) -> None:
    d = event.data
    if event.kind == "tool_started":
        args = json.dumps(d.get("arguments", {}), ensure_ascii=False)
        typer.secho(f"  -> {d.get('tool')}({args[:120]}{'...' if len(args) > 120 else ''})", fg="cyan")
    elif event.kind == "tool_finished":
        mark = "x" if d.get("is_error") else "ok"
        preview = str(d.get("preview", "")).replace("\n", " ")[:100]
        typer.secho(f"  <- {d.get('tool')} [{mark}] {preview}", fg="red" if d.get("is_error") else "green")
    elif event.kind == "assistant_message":
        typer.echo(f"assistant: {d.get('content')}")
    elif event.kind == "todos":
        typer.secho("  todos:", fg="magenta")
        for t in d.get("todos", []):
            mark = {"completed": "[x]", "in_progress": "[~]"}.get(t.get("status"), "[ ]")
            typer.secho(f"    {mark} {t.get('content')}", fg="magenta")
    elif event.kind in ("subagent_started", "subagent_done", "goal", "loop", "event"):
        typer.secho(f"  * {event.kind}: {json.dumps(d, ensure_ascii=False)[:160]}", fg="yellow")
    elif event.kind == "turn_started":
        typer.secho(f"turn {d.get('turn')} ({d.get('trigger')})", dim=True)


async def follow(
    handle: SessionHandle,
    *,
    on_question: Callable[[SessionHandle, dict[str, Any]], Awaitable[None]] | None = None,
) -> None:
    """Print live progress until the session ends; hand questions to ``on_question``."""
    async for event in handle.progress():
        if event.session_id != handle.id:
            continue
        _echo_event(event)
        if event.kind == "question" and on_question is not None:
            await on_question(handle, event.data)


def _question_answerer(yes: bool) -> Callable[[SessionHandle, dict[str, Any]], Awaitable[None]] | None:
    try:
        from agent_tools.cli.human import prompt_and_answer
    except ModuleNotFoundError:
        return None

    async def answer(handle: SessionHandle, data: dict[str, Any]) -> None:
        await prompt_and_answer(handle, data.get("questions", []), yes=yes)

    return answer


async def run_and_follow(client: AgentToolsClient, prompt: str, *, yes: bool, **fields: Any) -> int:
    handle = await client.start_session(prompt, **fields)
    typer.secho(f"session {handle.id}", bold=True)
    watcher = asyncio.create_task(follow(handle, on_question=_question_answerer(yes)))
    outcome = asyncio.ensure_future(handle.result())
    try:
        await asyncio.wait({outcome, watcher}, return_when=asyncio.FIRST_COMPLETED)
        failed = watcher.exception() if watcher.done() and not watcher.cancelled() else None
        if failed is not None and not outcome.done():
            # The watcher could not go on (a question it could not ask: stdin closed), so waiting for the
            # result would never end. The session is untouched and keeps waiting; the error says what to do.
            raise failed
        result = await outcome
    finally:
        # Let the stream drain the last items before stopping the watcher.
        await asyncio.wait({watcher}, timeout=2)
        watcher.cancel()
        outcome.cancel()
    typer.echo("")
    typer.secho(f"status: {result.status.value}", bold=True)
    typer.echo(f"answer: {result.final_message}")
    usage = result.usage + result.tree_usage
    typer.echo(
        f"usage:  {usage.calls} model calls, {usage.input_tokens}+{usage.output_tokens} tokens, ${usage.cost_usd:.4f}"
    )
    typer.echo(f"Temporal UI: {handle.ui_url()}")
    if result.handed_off_to:
        typer.echo(f"handed off: the conversation continues in session {result.handed_off_to}")
    return 0 if result.status.value in ("completed", "handed_off") else 1


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        prompt: str = typer.Argument(..., help="What the agent should do"),
        agent: str = typer.Option("assistant", help="Agent name (agents.toml)"),
        model: str | None = typer.Option(None, help="Model spec, e.g. openai:gpt-4.1-mini"),
        embedded: bool = typer.Option(False, "--embedded", help="Start an embedded dev server and worker"),
        yes: bool = typer.Option(False, "--yes", "-y", help="Answer every question with its first option"),
        keep_open: bool = typer.Option(False, help="With --embedded: keep the server and UI up until Ctrl-C"),
        port: int = typer.Option(7233, help="With --embedded: Temporal frontend port"),
        ui_port: int = typer.Option(8233, help="With --embedded: Temporal UI port"),
    ) -> None:
        """Start a session, stream its progress, answer its questions at the terminal, print the answer."""
        code = run_or_explain(
            _run(
                prompt, agent=agent, model=model, embedded=embedded, yes=yes, keep_open=keep_open, ports=(port, ui_port)
            )
        )
        raise typer.Exit(code)

    @app.command()
    def demo(
        yes: bool = typer.Option(True, "--yes/--ask", help="Answer the demo's question automatically"),
        keep_open: bool = typer.Option(False, help="Keep the embedded server and UI up until Ctrl-C"),
        port: int = typer.Option(7233, help="Temporal frontend port"),
        ui_port: int = typer.Option(8233, help="Temporal UI port"),
    ) -> None:
        """The demo session on the embedded dev server (scripted model unless an API key is set)."""
        code = run_or_explain(
            _run(
                DEMO_PROMPT,
                agent="assistant",
                model=None,
                embedded=True,
                yes=yes,
                keep_open=keep_open,
                ports=(port, ui_port),
            )
        )
        raise typer.Exit(code)

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
                typer.echo(
                    f"{indent}{s.session_id}  {s.agent}  {s.state}  {s.status}  {s.start_time:%Y-%m-%d %H:%M:%S}"
                )

        run_or_explain(go())

    @app.command()
    def show(session_id: str, transcript: bool = typer.Option(True, help="Print the stored transcript")) -> None:
        """Status and transcript of a session."""

        async def go() -> None:
            client = await AgentToolsClient.connect()
            handle = client.session(session_id)
            status = await handle.status()
            typer.echo(status.model_dump_json(indent=2))
            if transcript:
                for e in await handle.transcript(limit=10_000):
                    calls = " ".join(f"{c['name']}({json.dumps(c['arguments'])[:80]})" for c in e.tool_calls)
                    typer.echo(
                        f"[{e.seq}] {e.role}{' ' + e.name if e.name else ''}: {e.content[:2000]} {calls}".rstrip()
                    )
            await client.close()

        run_or_explain(go())

    @app.command()
    def watch(session_id: str, yes: bool = typer.Option(False, "--yes", "-y")) -> None:
        """Follow a session's live progress."""

        async def go() -> None:
            client = await AgentToolsClient.connect()
            await follow(client.session(session_id), on_question=_question_answerer(yes))

        run_or_explain(go())


async def _run(
    prompt: str, *, agent: str, model: str | None, embedded: bool, yes: bool, keep_open: bool, ports: tuple[int, int]
) -> int:
    settings = Settings()
    fields: dict[str, Any] = {"agent": agent}
    if model:
        fields["model"] = model
    if not embedded:
        client = await AgentToolsClient.connect(settings)
        return await run_and_follow(client, prompt, yes=yes, **fields)
    from agent_tools.embedded import embedded as start_embedded

    async with start_embedded(settings, port=ports[0], ui_port=ports[1]) as client:
        typer.secho(
            f"embedded Temporal dev server at {client.settings.temporal_address}, UI {client.settings.temporal_ui_url}",
            dim=True,
        )
        code = await run_and_follow(client, prompt, yes=yes, **fields)
        if keep_open:
            typer.echo("server and UI stay up; Ctrl-C to stop")
            with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
                await asyncio.Event().wait()
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(0)
