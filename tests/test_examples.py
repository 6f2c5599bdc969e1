"""Every README example is a file, and each runs here."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "AGENT_TOOLS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/store.sqlite", **env}
    for key in ("AGENT_TOOLS_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        full_env.pop(key, None)
    return subprocess.run(args, cwd=tmp_path, env=full_env, capture_output=True, text=True, timeout=180)


def test_quickstart_example(tmp_path: Path) -> None:
    proc = _run([sys.executable, str(ROOT / "examples/quickstart.py")], tmp_path,
                EXAMPLE_TEMPORAL_PORT=str(_free_port()), EXAMPLE_UI_PORT=str(_free_port()))  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "answered: ['What budget should the plan assume?']" in proc.stdout
    assert "tool: subAgent" in proc.stdout
    assert "Temporal UI: http://" in proc.stdout


def test_custom_tool_example(tmp_path: Path) -> None:
    proc = _run([sys.executable, str(ROOT / "examples/custom_tool.py")], tmp_path, PYTHONPATH=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Today 1 USD = 0.92 EUR." in proc.stdout


def test_demo_command_runs_the_main_job(tmp_path: Path) -> None:
    """The README's main command ends in `agent-tools demo`: a full session on the embedded server."""
    proc = _run([sys.executable, "-m", "agent_tools._cli", "demo", "--port", str(_free_port()),
                 "--ui-port", str(_free_port())], tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "session ended: completed" in out
    assert "Temporal UI: http://" in out
    assert "[x] Write the day-by-day plan" in out  # a todo list, kept up to date
    assert "[Budget] What budget should the plan assume? -> Mid-range" in out  # a question, answered (--yes)
    assert out.count("◆ sub-agent") == 4  # two sub-agents, started...
    assert out.rindex("research started") < out.index("research completed")  # ...together, then done
    assert "Food: pasteis de nata" in out and "History: Sao Jorge Castle" in out
    assert out.count("Book first: timed-entry tickets") == 1  # the final answer, printed once
    assert "runs the scripted demo model" in out and "OPENAI_API_KEY" in out  # says which model answers
    assert out.count("worker logs: .agent-tools/logs/worker.log, the server's: .agent-tools/logs/temporal.log") == 1
    assert "Traceback" not in out + proc.stderr and "WARN" not in proc.stderr
    assert (tmp_path / ".agent-tools" / "logs" / "worker.log").exists()
    # The dev server's banner goes to its log: on the terminal it repeated our one line about the server.
    assert "Temporal Persistence:" not in out + proc.stderr
    assert "Temporal Persistence:" in (tmp_path / ".agent-tools" / "logs" / "temporal.log").read_text()


def test_examples_import_only_the_public_faces() -> None:
    import ast

    faces = {"agent_tools", "agent_tools.testing", "agent_tools.contracts"}
    deep: set[str] = set()
    for example in sorted((ROOT / "examples").glob("*.py")):
        for node in ast.walk(ast.parse(example.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("agent_tools"):
                if node.module not in faces:
                    deep.add(str(node.module))
            elif isinstance(node, ast.Import):
                deep.update(a.name for a in node.names if a.name.startswith("agent_tools.") and a.name not in faces)
    assert deep == set()
