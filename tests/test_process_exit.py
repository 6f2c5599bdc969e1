"""Commands leave with the status a normal exit gives, their output flushed, without finalization."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent_tools._process_exit import exit_status


def _run(body: str, *args: str) -> subprocess.CompletedProcess[str]:
    code = f"import sys\nfrom agent_tools._process_exit import run_and_exit\n{body}"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, check=False)


def test_exit_status_follows_sys_exit() -> None:
    assert exit_status(None) == 0
    assert exit_status(0) == 0
    assert exit_status(3) == 3


def test_exit_status_prints_a_message_and_gives_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert exit_status("no such session") == 1
    assert capsys.readouterr().err == "no such session\n"


@pytest.mark.parametrize(
    ("body", "status", "out", "err"),
    [
        # Buffered output (no newline, a pipe) still reaches the reader: os._exit alone would drop it.
        ("run_and_exit(lambda: print('answer', end=''))", 0, "answer", ""),
        ("run_and_exit(lambda: sys.exit(4))", 4, "", ""),
        ("run_and_exit(lambda: sys.exit('bad input'))", 1, "", "bad input\n"),
        ("def boom():\n    raise ValueError('kaput')\nrun_and_exit(boom)", 1, "", "ValueError: kaput"),
        ("def stop():\n    raise KeyboardInterrupt\nrun_and_exit(stop)", 130, "", ""),
        # Without a Temporal core runtime the exit is a normal one: atexit handlers (and SQLite's last
        # checkpoint when a store closes at exit) run.
        ("import atexit\natexit.register(print, 'finalized')\nrun_and_exit(lambda: None)", 0, "finalized\n", ""),
        # With one, finalization (where the core runtime's late callbacks run) is skipped.
        (
            "import atexit\nfrom temporalio.runtime import Runtime\nRuntime.default()\n"
            "atexit.register(print, 'finalized')\nrun_and_exit(lambda: None)",
            0,
            "",
            "",
        ),
        # Logging handlers are flushed and closed as at a normal exit.
        (
            "import logging\nlogging.basicConfig(stream=sys.stdout)\n"
            "run_and_exit(lambda: logging.getLogger('x').warning('kept'))",
            0,
            "WARNING:x:kept\n",
            "",
        ),
    ],
)
def test_run_and_exit(body: str, status: int, out: str, err: str) -> None:
    proc = _run(body)
    assert proc.returncode == status, proc.stderr
    assert proc.stdout == out
    assert err in proc.stderr
    if not err:
        assert proc.stderr == ""


def test_cli_exits_through_run_and_exit() -> None:
    # Typer's usage error keeps its status (2) and its message through the CLI's entry point.
    proc = subprocess.run(
        [sys.executable, "-m", "agent_tools._cli", "no-such-command"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
    ok = subprocess.run(
        [sys.executable, "-m", "agent_tools._cli", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert ok.returncode == 0
    assert "Durable agent sessions on Temporal" in ok.stdout
