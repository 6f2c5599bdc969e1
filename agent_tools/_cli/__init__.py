"""``agent-tools``: the command line over the client.

Command groups live in modules of this package, each exporting ``register(app)``. A module is imported only
when one of its commands runs (or shows its own help), so ``agent-tools --help`` imports none of them and a
command pays only for what it uses: ``COMMANDS`` names each command's module and the line ``--help`` shows
for it (a test holds the table to what the modules register).
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass

import typer
import typer.main
from typer import _click as click  # the click Typer vendors: its commands and contexts are of these types
from typer.core import TyperCommand, TyperGroup

from agent_tools._process_exit import run_and_exit


@dataclass(frozen=True)
class CommandEntry:
    """Where a command is defined and its one-line help."""

    module: str
    help: str


COMMANDS: dict[str, CommandEntry] = {
    "run": CommandEntry("sessions", "Start a session, stream its progress, answer its questions at the terminal, print the answer."),
    "chat": CommandEntry("sessions", "A conversation: the session stays open, each line you type is its next message (`run --chat`)."),
    "demo": CommandEntry("sessions", "The demo session on the embedded dev server (scripted model unless an API key is set)."),
    "send": CommandEntry("sessions", "Send a message to a session (accepted or refused with a reason)."),
    "stop": CommandEntry("sessions", "Stop a session and its sub-agents."),
    "sessions": CommandEntry("sessions", "List sessions (Temporal visibility, filtered by the session search attributes)."),
    "show": CommandEntry("sessions", "Status and transcript of a session."),
    "watch": CommandEntry("sessions", "Follow a session's live progress (its sub-agents' too) and answer its questions here."),
    "dev": CommandEntry("dev", "Embedded Temporal dev server with UI, plus a worker, until Ctrl-C."),
    "worker": CommandEntry("dev", "Run a worker against the Temporal server of TEMPORAL_* (or a profile) or AGENT_TOOLS_TEMPORAL_ADDRESS."),
    "migrate": CommandEntry("dev", "Create the store at AGENT_TOOLS_DATABASE_URL, or bring its schema to this version (workers do it too)."),
    "answer": CommandEntry("human", "Answer the questions a session asked with askUser."),
    "approve": CommandEntry("approvals", "Approve or deny a tool call that waits for a person's approval, or list the pending ones."),
    "serve": CommandEntry("events", "Run the HTTP service (event ingress and webhooks, plus the other mounted routes) with uvicorn."),
    "tools": CommandEntry("tools", "List the built-in tools: capability, tool level, and how an agent of PROFILE gets each."),
    "events": CommandEntry("events", "Events: publish to the ingress that wakes sessions waiting in wait_for_event."),
    "web": CommandEntry("web", "Web search, page fetching and deep research."),
}  # fmt: skip

_loaded: dict[str, TyperGroup] = {}


def module_commands(module: str) -> TyperGroup:
    """The click commands that ``agent_tools._cli.<module>`` registers, as one group (imported once)."""
    group = _loaded.get(module)
    if group is None:
        sub = typer.Typer(add_completion=False)
        sub.callback()(_nothing)  # a callback makes Typer build a group even for a single command
        importlib.import_module(f"agent_tools._cli.{module}").register(sub)
        group = typer.main.get_group(sub)
        _loaded[module] = group
    return group


def _nothing() -> None:
    """Nothing: a module's group runs no code of its own."""


class LazyCommands(TyperGroup):
    """The top-level group: lists the table's commands, imports a command's module only to run it."""

    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        if self._listing:
            # The overview needs a name and a line, not the command: nothing is imported for it.
            return TyperCommand(cmd_name, help=entry.help, short_help=entry.help)
        return module_commands(entry.module).get_command(ctx, cmd_name)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="agent-tools",
    help="Durable agent sessions on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    cls=LazyCommands,
)


@app.callback()
def _options(
    profile: str | None = typer.Option(
        None,
        "--profile",
        metavar="NAME",
        help="The Temporal client profile to connect with (TEMPORAL_PROFILE; from TEMPORAL_CONFIG_FILE, or "
        "~/.config/temporalio/temporal.toml)",
    ),
) -> None:
    """Durable agent sessions on Temporal."""
    if profile is not None:
        # What the temporal CLI's --profile means: the SDK reads the profile name from here.
        os.environ["TEMPORAL_PROFILE"] = profile


def main() -> None:
    # Without finalization: a client's core threads can abort the interpreter's exit (see process_exit).
    run_and_exit(app)
