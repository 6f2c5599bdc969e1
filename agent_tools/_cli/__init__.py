"""``agent-tools``: the command line over the client.

Command groups live in modules of this package, each exporting ``register(app)``; a capability adds its
commands by adding its module to ``COMMAND_MODULES``.
"""

from __future__ import annotations

import os

import typer

from agent_tools._cli import approvals, dev, events, human, sessions, tools, web
from agent_tools._process_exit import run_and_exit

app = typer.Typer(
    name="agent-tools", help="Durable agent sessions on Temporal.", no_args_is_help=True, add_completion=False
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


COMMAND_MODULES = (sessions, dev, human, approvals, events, web, tools)
for _module in COMMAND_MODULES:
    _module.register(app)


def main() -> None:
    # Without finalization: a client's core threads can abort the interpreter's exit (see process_exit).
    run_and_exit(app)
