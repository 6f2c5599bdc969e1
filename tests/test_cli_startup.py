"""The command line answers without importing what a command does not use: ``--help`` loads no command
module, and the table it prints from matches what the modules register."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
import typer
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter
from temporalio.testing import WorkflowEnvironment
from typer.testing import CliRunner

from agent_tools._cli import COMMANDS, app, module_commands
from agent_tools._connection import compose_data_converter
from agent_tools._settings import Settings
from tests.support.fixture_types import Script, WorkerFor


def _first_paragraph(text: str | None) -> str:
    return " ".join((text or "").strip().split("\n\n")[0].split())


@pytest.mark.parametrize("module", sorted({e.module for e in COMMANDS.values()}))
def test_the_table_matches_what_each_module_registers(module: str) -> None:
    group = module_commands(module)
    ctx = typer.Context(group)
    registered = set(group.list_commands(ctx))
    listed = {name for name, e in COMMANDS.items() if e.module == module}
    assert registered == listed
    for name in registered:
        command = group.get_command(ctx, name)
        assert command is not None
        assert _first_paragraph(command.help) == COMMANDS[name].help, name


def _loaded_after(args: list[str], env: dict[str, str] | None = None) -> list[str]:
    code = (
        "import sys, json\n"
        "from agent_tools._cli import app\n"
        "try:\n"
        f"    app({args!r}, standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60, env=env)
    lines = out.stdout.strip().splitlines()
    modules: list[str] = json.loads(lines[-1])
    return ["\n".join(lines[:-1]), *modules] if env is not None else modules


def test_help_imports_no_command_module_and_no_temporal_client() -> None:
    modules = _loaded_after(["--help"])
    commands = [m for m in modules if m.startswith("agent_tools._cli.")]
    assert commands == [], commands
    assert "temporalio.client" not in modules and "pydantic_settings" not in modules


def test_a_command_loads_only_its_own_module() -> None:
    modules = _loaded_after(["tools", "--help"])
    assert [m for m in modules if m.startswith("agent_tools._cli.")] == ["agent_tools._cli.tools"]
    modules = _loaded_after(["show", "--help"])
    assert "agent_tools._cli.console" not in modules  # show prints no live progress
    assert "agent_tools._catalog.registry" not in modules  # nor any tool's contract


def test_help_lists_every_command_with_its_line_and_unknown_ones_fail() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["--help"])
    assert out.exit_code == 0
    for name in COMMANDS:
        assert f" {name} " in out.output, name
    bad = runner.invoke(app, ["no-such-command"])
    assert bad.exit_code == 2 and "No such command" in bad.output
    sub = runner.invoke(app, ["events", "--help"])
    assert sub.exit_code == 0 and "send" in sub.output


# What ``show`` has no use for: the worker side (the plugin, the SDK's worker and sandbox, the tool catalog),
# starting a session, following progress, the live console, the state a session carries and the tools'
# models (the settings need only each capability's settings section).
NOT_FOR_SHOW = (
    "agent_tools._session",
    "agent_tools.contracts._web.tools",
    "agent_tools.contracts._web.models",
    "agent_tools._plugin",
    "temporalio.worker",
    "agent_tools._catalog.registry",
    "agent_tools._session_start",
    "agent_tools._progress_poll",
    "agent_tools._progress_resume",
    "agent_tools._cli.console",
    "rich",
    # The tools' and the waits' models: a finished session's show reads none of them.
    "agent_tools.contracts._events.contract",
    "agent_tools.contracts._memory.contract",
    "agent_tools.contracts._human",
    "agent_tools.contracts._approvals",
    "agent_tools.contracts._output",
    "agent_tools._activity_io",
    "yaml",
    # The transcript of a SQLite store is read with the standard library.
    "sqlalchemy",
)


async def test_show_answers_without_the_worker_side_modules(
    settings: Settings, script: Script, temporal_env: WorkflowEnvironment, worker_for: WorkerFor
) -> None:
    settings.model = script([{"say": "shown answer"}])
    async with worker_for() as client:
        handle = await client.start_session("hi")
        await handle.result()
        env = {
            **os.environ,
            "AGENT_TOOLS_TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
            "AGENT_TOOLS_DATABASE_URL": settings.database_url,
        }
        # A thread: the worker answers the status query on this loop meanwhile.
        output, *modules = await asyncio.to_thread(_loaded_after, ["show", handle.id], env)
    assert '"status": "completed"' in output and "assistant: shown answer" in output, output
    loaded = [m for m in modules if m in NOT_FOR_SHOW or m.startswith(tuple(f"{n}." for n in NOT_FOR_SHOW))]
    assert loaded == [], loaded


def test_the_client_converter_is_the_plugins() -> None:
    """The client composes its converter with the plugin's one function, from the connection module, so
    that a client never loads the plugin module for it."""
    from agent_tools import _connection, _plugin

    assert _plugin.compose_data_converter is _connection.compose_data_converter
    assert compose_data_converter(None).payload_converter_class is PydanticPayloadConverter
    custom = DataConverter(failure_converter_class=DataConverter.default.failure_converter_class)
    composed = compose_data_converter(custom)
    assert composed.payload_converter_class is PydanticPayloadConverter
    assert composed.failure_converter_class is custom.failure_converter_class
