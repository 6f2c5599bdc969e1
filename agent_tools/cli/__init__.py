"""``agent-tools``: the command line over the client.

Command groups live in modules of this package, each exporting ``register(app)``; a capability adds its
commands by adding a module to ``COMMAND_MODULES``.
"""

from __future__ import annotations

import typer

from agent_tools.modules import present_modules
from agent_tools.process_exit import run_and_exit

app = typer.Typer(
    name="agent-tools", help="Durable agent sessions on Temporal.", no_args_is_help=True, add_completion=False
)

COMMAND_MODULES: tuple[str, ...] = (
    "agent_tools.cli.sessions",
    "agent_tools.cli.dev",
    "agent_tools.cli.human",
    "agent_tools.cli.events",
    "agent_tools.cli.web",
)


def _register_all() -> None:
    for module in present_modules(COMMAND_MODULES):
        module.register(app)


_register_all()


def main() -> None:
    # Without finalization: a client's core threads can abort the interpreter's exit (see process_exit).
    run_and_exit(app)
