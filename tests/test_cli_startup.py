"""The command line answers without importing what a command does not use: ``--help`` loads no command
module, and the table it prints from matches what the modules register."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from agent_tools._cli import COMMANDS, app, module_commands


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


def _loaded_after(args: list[str]) -> list[str]:
    code = (
        "import sys, json\n"
        "from agent_tools._cli import app\n"
        "try:\n"
        f"    app({args!r}, standalone_mode=False)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    modules: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return modules


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
