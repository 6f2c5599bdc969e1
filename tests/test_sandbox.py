"""exec_python: the sandbox engine directly, then the tool through a real session."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agent_tools.activities.sandbox import SandboxEngine, SandboxSettings, deployment_secrets, run_python
from agent_tools.agents import AgentDefinition
from agent_tools.catalog.spec import ToolLevel
from agent_tools.session import SessionStatus
from agent_tools.settings import Settings
from agent_tools.tools.sandbox import TOOLS, ExecPythonArgs, SandboxLimits

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="network/PID namespaces and privilege drop need root")


def engine(**overrides: Any) -> SandboxEngine:
    return SandboxEngine(SandboxSettings(**overrides))


async def run(code: str, eng: SandboxEngine | None = None, **kwargs: Any) -> Any:
    return await run_python(ExecPythonArgs(code=code, **kwargs), eng or engine())


@pytest_asyncio.fixture
async def tcp_server() -> AsyncIterator[int]:
    """A TCP server on 127.0.0.1 that answers 'hello' (reachable from the worker's own namespace)."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield port
    finally:
        server.close()
        await server.wait_closed()


async def test_returns_output_exit_status_and_files() -> None:
    r = await run(
        "import sys\nprint(open('data.csv').read().upper())\nprint('warn', file=sys.stderr)\n"
        "open('out/result.txt', 'w').write('42')\nsys.exit(3)",
        files={"data.csv": "a,b\n1,2", "out/.keep": ""},
    )
    assert r.stdout == "A,B\n1,2\n"
    assert r.stderr == "warn\n"
    assert r.exit_code == 3 and not r.ok and r.error is None
    # New and changed files come back; unchanged input files are not echoed.
    assert [(f.path, f.text, f.size_bytes) for f in r.files] == [("out/result.txt", "42", 2)]
    r = await run("open('data.csv', 'a').write('\\n3,4')", files={"data.csv": "a,b"})
    assert [(f.path, f.text) for f in r.files] == [("data.csv", "a,b\n3,4")]


async def test_syntax_error_and_exception_are_clear_results() -> None:
    r = await run("x = (")
    assert r.error == "syntax_error" and r.exit_code == 1
    assert "SyntaxError" in (r.error_message or "") and "<exec_python>" in r.stderr
    r = await run("print('before')\n1/0")
    assert r.error == "exception" and r.error_message == "ZeroDivisionError: division by zero"
    assert r.stdout == "before\n"
    # The traceback shows the user's line, not the launcher's frames.
    assert 'File "<exec_python>", line 2' in r.stderr and "1/0" in r.stderr and "launcher" not in r.stderr


async def test_timeout_kills_an_infinite_loop_and_its_children() -> None:
    # A directory the sandbox user (nobody) can write to, so a surviving child could leave its mark.
    shared = Path(tempfile.mkdtemp(prefix="sandbox-test-"))
    shared.chmod(0o777)
    marker = shared / "survivor"
    child = f"import time\ntime.sleep(2)\nopen({str(marker)!r}, 'w').write('alive')\n"
    # A child that leaves the process group; it must die with the sandbox all the same (PID namespace).
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, 'child.py'], start_new_session=True)\n"
        "while True:\n    pass\n"
    )
    # private_tmp off: the child must be able to reach the marker's directory for this test to tell anything.
    r = await run(code, engine(private_tmp=False), timeout_seconds=1, files={"child.py": child})
    assert r.error == "timeout" and not r.ok
    assert 900 <= r.duration_ms < 5000
    await asyncio.sleep(2.5)
    try:
        if ROOT:
            assert r.isolation.pid_namespace and not marker.exists()
    finally:
        shutil.rmtree(shared, ignore_errors=True)


async def test_memory_is_capped() -> None:
    r = await run("b = bytearray(1024 * 1024 * 1024)\nprint('allocated')", engine(limits=SandboxLimits(memory_mb=256)))
    assert r.error == "memory_limit" and "allocated" not in r.stdout
    r = await run("b = bytearray(100 * 1024 * 1024)\nprint(len(b))", engine(limits=SandboxLimits(memory_mb=256)))
    assert r.ok and r.stdout.strip() == str(100 * 1024 * 1024)


async def test_cpu_time_is_capped() -> None:
    # The wall clock normally fires first; with CPU time below it (as multi-threaded code would reach), the
    # CPU limit ends the run.
    r = await run("while True: pass", engine(limits=SandboxLimits(cpu_seconds_extra=-4)), timeout_seconds=6)
    assert r.error == "cpu_limit" and r.duration_ms < 5500


async def test_file_size_is_capped() -> None:
    r = await run("open('big', 'wb').write(b'x' * 3 * 1024 * 1024)", engine(limits=SandboxLimits(file_size_mb=1)))
    assert r.error == "exception" and "File too large" in (r.error_message or "")


async def test_output_is_capped() -> None:
    r = await run(
        "import sys\nprint('A' * 50000)\nsys.stderr.write('B' * 50000 + 'END')",
        engine(limits=SandboxLimits(output_chars=1000)),
    )
    assert r.stdout_truncated and r.stdout == "A" * 1000
    assert r.stderr_truncated and r.stderr.endswith("END") and len(r.stderr) == 1000


async def test_environment_is_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOLS_OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("DATABASE_PASSWORD", "hunter2")
    r = await run("import os, json; print(json.dumps(dict(os.environ)))")
    env = json.loads(r.stdout)
    assert "sk-parent-secret" not in r.stdout and "hunter2" not in r.stdout
    assert set(env) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR", "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                        "MKL_NUM_THREADS", "MPLBACKEND"}  # fmt: skip


@needs_root
async def test_no_network_in_the_namespace(tcp_server: int) -> None:
    code = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {tcp_server}), timeout=2)\n"
        "print(s.recv(5).decode())"
    )
    # Control: the same code without the namespace reaches the server, so the test can tell the difference.
    open_run = await run(code, engine(isolate_network=False))
    assert open_run.stdout.strip() == "hello" and open_run.isolation.network == "none"
    r = await run(code)
    assert r.isolation.network == "namespace" and r.isolation.pid_namespace
    assert r.error == "exception" and "hello" not in r.stdout
    assert "Network is unreachable" in (r.error_message or "")


@needs_root
async def test_sees_only_its_own_processes() -> None:
    r = await run("import os\nprint(os.getpid())\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert r.isolation.pid_namespace and r.isolation.private_proc
    pid, visible = r.stdout.splitlines()
    assert pid == "1" and visible == "[1]"  # not the worker, not pytest, not the Temporal server


@needs_root
@pytest.mark.skipif(not os.access("/usr/bin/python3", os.X_OK), reason="needs a system python readable by nobody")
async def test_drops_privileges_when_the_interpreter_allows_it(open_dir: Path) -> None:
    secret = open_dir / "secret.txt"
    secret.write_text("root only")
    secret.chmod(0o600)
    eng = engine(python=shutil.which("python3", path="/usr/bin") or "/usr/bin/python3", private_tmp=False)
    r = await run(f"import os\nprint(os.getuid())\nprint(open({str(secret)!r}).read())", eng)
    assert r.isolation.user == "nobody"
    assert r.stdout.splitlines()[0] == "65534"
    assert r.error == "exception" and "PermissionError" in (r.error_message or "")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory the sandbox user can traverse (pytest's tmp_path lives under a root-only 0700 parent)."""
    path = Path(tempfile.mkdtemp(prefix="sandbox-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def world_readable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o644)
    return path


@needs_root
async def test_deployment_files_are_hidden(open_dir: Path) -> None:
    # World-readable on purpose: the sandbox user could read them if they were not hidden.
    store = world_readable(open_dir / "store.sqlite", "every transcript")
    secrets_dir = open_dir / "secrets"
    secrets_dir.mkdir(mode=0o755)
    world_readable(secrets_dir / "key", "sk-live")
    visible = world_readable(open_dir / "visible", "ok")
    hide = deployment_secrets(Settings(database_url=f"sqlite+aiosqlite:///{store}"))
    assert str(store) in hide and f"{store}-wal" in hide
    eng = SandboxEngine(SandboxSettings(hide_paths=[str(secrets_dir)], private_tmp=False), hide_paths=hide)
    code = (
        f"import os\nprint(repr(open({str(store)!r}).read()))\n"
        f"print(os.listdir({str(secrets_dir)!r}))\nprint(open({str(visible)!r}).read())"
    )
    r = await run(code, eng)
    assert r.ok, r.stderr
    assert r.stdout.splitlines() == ["''", "[]", "ok"]
    assert str(store) in r.isolation.hidden_paths and str(secrets_dir) in r.isolation.hidden_paths
    # Only the sandbox's view changed.
    assert store.read_text() == "every transcript" and (secrets_dir / "key").read_text() == "sk-live"


@needs_root
async def test_private_size_limited_tmp(open_dir: Path) -> None:
    outside = world_readable(open_dir / "other-run.txt", "another session's file")
    code = (
        "import os\n"
        f"print(os.path.exists({str(outside)!r}))\n"
        "print(open('in.txt').read())\n"
        "open('out.txt', 'w').write('result')\n"
        "try:\n"
        "    with open('/tmp/fill', 'wb') as f:\n"
        "        for _ in range(40):\n"
        "            f.write(b'x' * 1024 * 1024)\n"
        "except OSError as exc:\n"
        "    print(exc.strerror)\n"
    )
    r = await run(code, engine(limits=SandboxLimits(disk_mb=16)), files={"in.txt": "input"})
    assert r.isolation.private_tmp and r.ok, r.stderr
    assert r.stdout.splitlines() == ["False", "input", "No space left on device"]
    assert [(f.path, f.text) for f in r.files] == [("out.txt", "result")]
    assert not Path("/tmp/fill").exists()


async def test_reports_user_honestly_when_privileges_stay() -> None:
    r = await run("import os; print(os.getuid())", engine(user=None))
    assert r.stdout.strip() == str(os.geteuid())
    assert r.isolation.user.startswith(os.environ.get("USER", "") or r.isolation.user.split()[0])
    assert "(" in r.isolation.user  # the reason why privileges were kept is stated


def test_contract() -> None:
    spec = TOOLS[0]
    assert spec.name == "exec_python" and spec.level == ToolLevel.l3_sandbox and spec.runs_in == "activity"
    schema = spec.parameters_schema()
    assert schema["properties"]["timeout_seconds"]["maximum"] == 120
    assert schema["properties"]["timeout_seconds"]["default"] == 30
    with pytest.raises(ValueError):
        ExecPythonArgs(code="1", timeout_seconds=121)
    with pytest.raises(ValueError):
        ExecPythonArgs(code="1", files={"../escape": "x"})
    with pytest.raises(ValueError):
        ExecPythonArgs(code="1", files={"/etc/passwd": "x"})


def test_codai_profile_gets_them_by_level() -> None:
    """Once both modules are in the catalog, the codai face lists them, exec_python only from l3_sandbox."""
    from agent_tools.catalog.registry import ToolCatalog
    from agent_tools.tools import sandbox, skills

    catalog = ToolCatalog([*sandbox.TOOLS, *skills.TOOLS])
    assert catalog.resolve(profile="codai", level=ToolLevel.l3_sandbox) == ["exec_python", "use_skill"]
    assert catalog.resolve(profile="codai", level=ToolLevel.l1_http) == ["use_skill"]


async def test_exec_python_in_a_session(settings: Any, script: Any, worker_for: Any) -> None:
    call = {"name": "exec_python", "arguments": {"code": "print(sum(range(10)))"}}
    settings.model = script(
        [
            {"match": {"agent": "reader"}, "turns": [{"tool_calls": [call]}, {"say": "{{tool_results}}"}]},
            {
                "turns": [
                    {"tool_calls": [call]},
                    {
                        "tool_calls": [
                            {"name": "exec_python", "arguments": {"code": "while 1: pass", "timeout_seconds": 1}}
                        ]
                    },
                    {"say": "done: {{tool_results}}"},
                ]
            },
        ]
    )
    coder = AgentDefinition(name="coder", tool_level=ToolLevel.l3_sandbox, profile=None, tools=["exec_python"])
    reader = AgentDefinition(name="reader", tool_level=ToolLevel.l1_http, profile=None, tools=["exec_python"])
    async with worker_for(agents=[coder, reader]) as client:
        handle = await client.start_session("compute", agent="coder")
        result = await handle.result()
        assert result.status == SessionStatus.completed
        tool_msgs = [e for e in await handle.transcript() if e.role == "tool"]
        first = json.loads(tool_msgs[0].content)
        assert first["stdout"] == "45\n" and first["ok"] is True
        assert '"error":"timeout"' in tool_msgs[1].content
        # The tool level gates it: an l1_http agent does not get exec_python.
        handle = await client.start_session("compute", agent="reader")
        await handle.result()
        tool_msgs = [e for e in await handle.transcript() if e.role == "tool"]
        assert "Unknown tool 'exec_python'" in tool_msgs[0].content


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("the sandbox uses Linux namespaces and rlimits")
