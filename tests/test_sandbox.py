"""exec_python: the engine under bubblewrap, hostile arguments at the activity's boundary, failing closed when
there is no isolation (the tool is then not offered), the tool in a real session, and the escape tests run
again as an unprivileged account. The escapes themselves are in tests/test_sandbox_escapes.py."""

from __future__ import annotations

import json
import logging
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from agent_tools._activity_io import SessionRef, ToolCallInput
from agent_tools._agents import AgentDefinition, AgentRegistry
from agent_tools._catalog.spec import ToolLevel
from agent_tools._session import PrepareInput, SessionRequest, SessionStatus
from agent_tools._settings import Settings
from agent_tools.activities._engine import prepare_session
from agent_tools.activities._sandbox.engine import SandboxEngine, protected_paths
from agent_tools.activities._sandbox.isolation import default_library_paths, inside
from agent_tools.activities._sandbox.tool import IMPLEMENTATIONS, announce
from agent_tools.activities._services import Services
from agent_tools.activities._tool_runner import run_tool
from agent_tools.contracts._sandbox import MAX_CODE_CHARS, MAX_INPUT_FILE_CHARS, TOOLS, SandboxLimits, SandboxSettings
from tests.support.fixture_types import Script, WorkerFor
from tests.support.sandbox import REPO, REQUIRE_SANDBOX, ROOT, run, sandbox_engine, world_readable_dir

UNPRIVILEGED_USER = "agentci"


@pytest_asyncio.fixture
async def engine() -> SandboxEngine:
    return await sandbox_engine()


# ---- what the code gets back --------------------------------------------------------------------------


async def test_returns_output_exit_status_and_files(engine: SandboxEngine) -> None:
    r = await run(
        engine,
        "import sys\nprint(open('data.csv').read().upper())\nprint('warn', file=sys.stderr)\n"
        "open('out/result.txt', 'w').write('42')\nsys.exit(3)",
        files={"data.csv": "a,b\n1,2", "out/.keep": ""},
    )
    assert r.stdout == "A,B\n1,2\n"
    assert r.stderr == "warn\n"
    assert r.exit_code == 3 and not r.ok and r.error is None
    # New and changed files come back; unchanged input files are not echoed.
    assert [(f.path, f.text, f.size_bytes) for f in r.files] == [("out/result.txt", "42", 2)]
    r = await run(engine, "open('data.csv', 'a').write('\\n3,4')", files={"data.csv": "a,b"})
    assert [(f.path, f.text) for f in r.files] == [("data.csv", "a,b\n3,4")]
    assert r.isolation is not None and r.isolation.mode == "bubblewrap" and r.isolation.network == "none"


async def test_syntax_error_and_exception_are_clear_results(engine: SandboxEngine) -> None:
    r = await run(engine, "x = (")
    assert r.error == "syntax_error" and r.exit_code == 1
    assert "SyntaxError" in (r.error_message or "") and "<exec_python>" in r.stderr
    r = await run(engine, "print('before')\n1/0")
    assert r.error == "exception" and r.error_message == "ZeroDivisionError: division by zero"
    assert r.stdout == "before\n"
    # The traceback shows the user's line, not the launcher's frames.
    assert 'File "<exec_python>", line 2' in r.stderr and "1/0" in r.stderr and "launcher" not in r.stderr
    r = await run(engine, "class E(Exception):\n    def __str__(self):\n        raise RuntimeError\nraise E()")
    assert r.error == "exception" and r.error_message == "E: <unprintable>"


async def test_the_code_ends_like_a_script(engine: SandboxEngine) -> None:
    # atexit handlers and threads finish, and what the code defines pickles (multiprocessing works).
    code = (
        "import atexit, threading, time, multiprocessing\n"
        "def square(x):\n    return x * x\n"
        "atexit.register(print, 'atexit ran')\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread finished'))).start()\n"
        "with multiprocessing.Pool(2) as pool:\n    print(pool.map(square, [1, 2, 3]))\n"
    )
    r = await run(engine, code)
    assert r.ok, r.stderr
    lines = r.stdout.splitlines()
    # Python ends a script's threads first, then runs its atexit handlers.
    assert sorted(lines[:2]) == ["[1, 4, 9]", "thread finished"] and lines[2:] == ["atexit ran"]


async def test_files_come_back_after_a_timeout_too(engine: SandboxEngine) -> None:
    # The launcher ends the code at the wall clock, then lists the workspace.
    r = await run(engine, "open('partial.txt', 'w').write('so far')\nwhile True: pass", timeout_seconds=1)
    assert r.error == "timeout" and [(f.path, f.text) for f in r.files] == [("partial.txt", "so far")]


async def test_without_proc_for_containers_that_mask_theirs() -> None:
    eng = await sandbox_engine(mount_proc=False)
    r = await run(eng, "import os\nprint(os.path.exists('/proc'), os.getpid())")
    assert r.ok and r.stdout == "False 2\n", r.stderr
    assert r.isolation is not None and r.isolation.proc == "none"


async def test_memory_is_capped() -> None:
    eng = await sandbox_engine(limits=SandboxLimits(memory_mb=256))
    r = await run(eng, "b = bytearray(1024 * 1024 * 1024)\nprint('allocated')")
    assert r.error == "memory_limit" and "allocated" not in r.stdout
    r = await run(eng, "b = bytearray(100 * 1024 * 1024)\nprint(len(b))")
    assert r.ok and r.stdout.strip() == str(100 * 1024 * 1024)


async def test_cpu_time_is_capped() -> None:
    # The wall clock normally fires first; with CPU time below it (as multi-threaded code would reach), the
    # CPU limit ends the run.
    # 2 s of CPU against 30 s of wall clock: on a machine whose cores other processes share, 2 s of CPU can take
    # several times as long on the clock (6 s of wall clock against 2 s of CPU was seen to lose that race).
    eng = await sandbox_engine(limits=SandboxLimits(cpu_seconds_extra=-28))
    r = await run(eng, "while True: pass", timeout_seconds=30)
    assert r.error == "cpu_limit" and r.duration_ms < 29_000 and r.exit_code is not None and r.exit_code < 0


async def test_file_size_and_disk_are_capped() -> None:
    eng = await sandbox_engine(limits=SandboxLimits(file_size_mb=1, disk_mb=8))
    r = await run(eng, "open('big', 'wb').write(b'x' * 3 * 1024 * 1024)")
    assert r.error == "exception" and "File too large" in (r.error_message or "")
    code = (
        "import os\n"
        "try:\n"
        "    for i in range(40):\n"
        "        open(f'part{i}', 'wb').write(b'x' * 1024 * 1024)\n"
        "except OSError as exc:\n"
        "    print(exc.strerror, len(os.listdir('.')))\n"
    )
    r = await run(eng, code)
    assert r.ok and r.stdout.startswith("No space left on device"), (r.stdout, r.stderr)
    assert not Path("/tmp/part0").exists()  # the workspace is the sandbox's own tmpfs


async def test_output_is_capped() -> None:
    eng = await sandbox_engine(limits=SandboxLimits(output_chars=1000))
    r = await run(eng, "import sys\nprint('A' * 50000)\nsys.stderr.write('B' * 50000 + 'END')")
    assert r.stdout_truncated and r.stdout == "A" * 1000
    assert r.stderr_truncated and r.stderr.endswith("END") and len(r.stderr) == 1000


async def test_runs_as_an_unprivileged_account(engine: SandboxEngine) -> None:
    r = await run(engine, "import os\nprint(os.getuid(), os.getgid(), os.getgroups())")
    account = pwd.getpwnam("nobody") if ROOT else pwd.getpwuid(os.getuid())
    uid, gid, groups = r.stdout.split(" ", 2)
    assert (int(uid), int(gid)) == (account.pw_uid, account.pw_gid) and account.pw_uid != 0
    # As root, bwrap starts as that account with no supplementary groups; otherwise it keeps the worker's.
    assert set(json.loads(groups)) <= (set() if ROOT else set(os.getgroups())), groups
    assert r.isolation is not None and r.isolation.user == ("nobody" if ROOT else pwd.getpwuid(os.getuid()).pw_name)


async def test_files_round_trip_and_odd_names_come_back_escaped(engine: SandboxEngine) -> None:
    content = "nul:\x00 é 🙂 \u2028 end"
    code = (
        "data = open('in.txt', encoding='utf-8').read()\n"
        "print(ascii(data))\n"
        "open(b'bad\\xff.txt', 'wb').write(b'\\xff\\xfe binary')\n"
        "open('copy.txt', 'w', encoding='utf-8').write(data)\n"
    )
    r = await run(engine, code, files={"in.txt": content})
    assert r.ok, r.stderr
    assert r.stdout.strip() == ascii(content)
    files = {f.path: f for f in r.files}
    assert files["copy.txt"].text == content
    # A name that is not UTF-8 is escaped; a binary file is listed without text.
    assert files["bad\\xff.txt"].text is None and files["bad\\xff.txt"].size_bytes == 9
    json.loads(r.model_dump_json())  # and the whole result is valid JSON


async def test_a_forged_status_cannot_break_the_result(engine: SandboxEngine) -> None:
    """The code can find the launcher's status pipe and write to it: what it writes only changes its own
    result, and never makes the result unserialisable (lone surrogates, wrong types, junk)."""
    forged = (
        '{"done": true, "exit_code": "zero", "signal": true, "error": "\\udcff", "message": "\\ud800",'
        ' "files": [{"path": "\\udc80", "size_bytes": 1, "text": "\\ud800"}, {"path": 5}, "junk"],'
        ' "files_truncated": "yes"}'
    )
    code = (
        "import os, stat\n"
        "for fd in map(int, os.listdir('/proc/self/fd')):\n"
        "    try:\n"
        "        if fd > 2 and stat.S_ISFIFO(os.fstat(fd).st_mode):\n"
        f"            os.write(fd, b'not json\\n' + {forged.encode()!r} + b'\\n' + b'x' * 100000 + b'\\n')\n"
        "    except OSError:\n"
        "        pass\n"
    )
    r = await run(engine, code)
    out = json.loads(r.model_dump_json())
    assert out["isolation"]["mode"] == "bubblewrap"  # stated by the worker, whatever the code wrote
    # The launcher's own last status line wins over the forged one.
    assert r.ok and r.exit_code == 0 and r.files == []


# ---- hostile arguments, through the activity's own entry -------------------------------------------------


@pytest_asyncio.fixture
async def services(settings: Settings) -> AsyncIterator[Services]:
    opened = await Services.open(settings)
    try:
        yield opened
    finally:
        await opened.close()


async def call(services: Services, arguments: Any) -> tuple[bool, str]:
    inp = ToolCallInput(
        session=SessionRef(
            session_id="s-hostile", run_id="r1", agent="coder", organisation="o", project="p", user="u",
            root_id="s-hostile", model="scripted:x",
        ),
        call_id="c1",
        name="exec_python",
        arguments=arguments,
    )  # fmt: skip
    out = await run_tool(services, services.catalog.get("exec_python"), IMPLEMENTATIONS["exec_python"], inp)
    return out.is_error, out.content


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"code": "x" * (MAX_CODE_CHARS + 1)}, "at most 100000 characters"),
        ({"code": ""}, "at least 1 character"),
        ({"code": "print(1)\x00"}, "NUL character at offset 8"),
        ({"code": "print('\ud800')"}, "unable to parse raw data as a unicode string"),
        ({"code": 123}, "valid string"),
        ({"code": ["print(1)"]}, "valid string"),
        ({}, "Field required"),
        ({"code": "1", "timeout_seconds": 0}, "greater than or equal to 1"),
        ({"code": "1", "timeout_seconds": 121}, "less than or equal to 120"),
        ({"code": "1", "timeout_seconds": "soon"}, "valid integer"),
        ({"code": "1", "files": ["a.txt"]}, "valid dictionary"),
        ({"code": "1", "files": {"a.txt": 1}}, "valid string"),
        ({"code": "1", "files": {"../escape": "x"}}, "without empty, '.' or '..' segments"),
        ({"code": "1", "files": {"a/../../escape": "x"}}, "'..' segments"),
        ({"code": "1", "files": {"/etc/passwd": "x"}}, "'..' segments"),
        ({"code": "1", "files": {"a/./b": "x"}}, "'.' or '..' segments"),
        ({"code": "1", "files": {"a//b": "x"}}, "empty"),
        ({"code": "1", "files": {"dir/": "x"}}, "empty"),
        ({"code": "1", "files": {"a\x00b": "x"}}, "letters, digits"),
        ({"code": "1", "files": {"a\ud800": "x"}}, "letters, digits"),
        ({"code": "1", "files": {"a\nb": "x"}}, "letters, digits"),
        ({"code": "1", "files": {"x" * 201: "x"}}, "1 to 200 characters"),
        ({"code": "1", "files": {"a.txt": "\udc80"}}, "lone surrogate at offset 0"),
        ({"code": "1", "files": {"a": "x", "a/b": "y"}}, "also the directory of 'a/b'"),
        ({"code": "1", "files": {"big": "x" * (MAX_INPUT_FILE_CHARS + 1)}}, "larger than 200000"),
        ({"code": "1", "files": {"a": "x" * 150_000, "b": "y" * 150_000}}, "300000 characters together"),
        ({"code": "1", "files": {f"f{i}": "" for i in range(21)}}, "at most 20 items"),
    ],
)
async def test_hostile_arguments_are_clear_tool_errors(services: Services, arguments: Any, expected: str) -> None:
    is_error, content = await call(services, arguments)
    assert is_error and expected in content, content


async def test_odd_but_valid_arguments_run(services: Services) -> None:
    await sandbox_engine()  # skips (or fails in CI) without a sandbox
    huge = "x = 0\n" + "x += 1\n" * ((MAX_CODE_CHARS - 20) // 7) + "print(x)\n"
    assert len(huge) <= MAX_CODE_CHARS
    is_error, content = await call(services, {"code": huge})
    assert not is_error and json.loads(content)["stdout"] == f"{(MAX_CODE_CHARS - 20) // 7}\n"
    files = {"data/é ü.txt": "a\x00b", "deep/er/file-1.csv": "1,2"}
    code = "import os\nprint(sorted(os.listdir('data')), repr(open('data/é ü.txt').read()))"
    is_error, content = await call(services, {"code": code, "files": files, "timeout_seconds": "5"})
    assert not is_error, content
    assert json.loads(content)["stdout"] == "['é ü.txt'] 'a\\x00b'\n"


def test_contract() -> None:
    spec = TOOLS[0]
    assert spec.name == "exec_python" and spec.level == ToolLevel.l3_sandbox and spec.runs_in == "activity"
    schema = spec.parameters_schema()
    assert schema["properties"]["timeout_seconds"]["maximum"] == 120
    assert schema["properties"]["timeout_seconds"]["default"] == 30
    assert schema["properties"]["code"]["maxLength"] == MAX_CODE_CHARS
    assert schema["properties"]["files"]["maxProperties"] == 20


def test_codai_profile_gets_them_by_level() -> None:
    """The codai face lists both, exec_python only from l3_sandbox."""
    from agent_tools._catalog.registry import ToolCatalog

    catalog = ToolCatalog.builtin()
    at_l3 = catalog.resolve(profile="codai", level=ToolLevel.l3_sandbox)
    at_l1 = catalog.resolve(profile="codai", level=ToolLevel.l1_http)
    assert "exec_python" in at_l3 and "use_skill" in at_l3
    assert "exec_python" not in at_l1 and "use_skill" in at_l1


# ---- failing closed ----------------------------------------------------------------------------------


@pytest.fixture
def open_dir() -> Iterator[Path]:
    yield from world_readable_dir()


def userns_disabled_bwrap(directory: Path) -> str:
    """A real bwrap on a machine where user namespaces are off: it runs in a user namespace of its own whose
    max_user_namespaces is 0 (a limit local to that namespace: the machine's stays as it is)."""
    bwrap, unshare = shutil.which("bwrap"), shutil.which("unshare")
    if not bwrap or not unshare:
        pytest.skip("needs bwrap and unshare (util-linux)")
    script = directory / "bwrap-without-userns"
    script.write_text(
        "#!/bin/sh\n"
        f"exec {unshare} --user --map-root-user sh -c "
        '\'echo 0 > /proc/sys/user/max_user_namespaces && exec "$0" "$@"\' '
        f'{bwrap} "$@"\n'
    )
    script.chmod(0o755)
    return str(script)


async def test_without_bwrap_the_tool_is_not_available() -> None:
    eng = SandboxEngine(SandboxSettings(bwrap="/nonexistent/bwrap"))
    found = await eng.availability()
    assert not found.offered and found.sandbox is None
    assert "bubblewrap is not installed: no executable '/nonexistent/bwrap'" in found.reason
    # A call that still reaches such a worker is refused: the code never runs unisolated.
    r = await run(eng, "print('ran')")
    assert not r.ok and r.error == "sandbox_error" and r.stdout == ""
    assert "exec_python is not available on this worker: bubblewrap is not installed" in (r.error_message or "")


async def test_a_bwrap_that_fails_its_probe_is_not_used(open_dir: Path) -> None:
    await sandbox_engine()  # the real bwrap works here, so what fails below is the missing user namespaces
    eng = SandboxEngine(SandboxSettings(bwrap=userns_disabled_bwrap(open_dir)))
    found = await eng.availability()
    assert not found.offered
    assert "bubblewrap cannot run the code here" in found.reason
    assert "max_*_namespaces exceeded" in found.reason, found.reason


@pytest.mark.skipif(not ROOT, reason="the sandbox account is chosen only by a root worker")
async def test_a_root_worker_needs_an_unprivileged_sandbox_account() -> None:
    for user, why in [("no-such-account-x", "does not exist"), ("root", "is root"), (None, "no sandbox user is set")]:
        found = await SandboxEngine(SandboxSettings(user=user)).availability()
        assert not found.offered and why in found.reason, found.reason


@pytest.mark.skipif(not ROOT, reason="a worker that is not root runs the code as itself, which reads its own files")
async def test_a_library_path_the_sandbox_account_cannot_read_is_named(open_dir: Path) -> None:
    """A private library directory binds fine and only fails the code's imports later: the probe, run as the
    sandbox account, names the path instead of offering a tool whose libraries are missing."""
    await sandbox_engine()  # the sandbox works here with the default library paths
    private = open_dir / "private-site-packages"
    private.mkdir()
    private.chmod(0o700)
    found = await SandboxEngine(SandboxSettings(library_paths=[str(private)])).availability()
    assert not found.offered, found.reason
    assert f"the sandbox account cannot read {private} (a library path)" in found.reason, found.reason
    # Below a private directory (a venv under a 0700 home, or /root) a readable one is offered: the worker
    # hands bwrap its own descriptor of the path, which the sandbox account never has to reach.
    inner = private / "site-packages"
    inner.mkdir()
    inner.chmod(0o755)
    (inner / "under_a_private_home.py").write_text("ANSWER = 7\n")
    (inner / "under_a_private_home.py").chmod(0o644)
    eng = SandboxEngine(SandboxSettings(library_paths=[str(inner)]))
    found = await eng.availability()
    assert found.offered, found.reason
    r = await run(
        eng,
        f"import os, under_a_private_home\nprint(under_a_private_home.ANSWER, os.listdir({inside(str(private))!r}))",
    )
    assert r.ok and r.stdout == "7 ['site-packages']\n", r  # the private directory shows only the bound path
    # A readable one is offered, although it is under /tmp, where the sandbox has its workspace.
    readable = open_dir / "site-packages"  # (availability is cached per configuration: a new path)
    readable.mkdir()
    readable.chmod(0o755)  # (not through mkdir's mode, which the umask cuts)
    (readable / "offered_here.py").write_text("ANSWER = 42\n")
    (readable / "offered_here.py").chmod(0o644)
    eng = SandboxEngine(SandboxSettings(library_paths=[str(readable)]))
    found = await eng.availability()
    assert found.offered, found.reason
    r = await run(eng, "import os, offered_here\nprint(offered_here.ANSWER, os.listdir('.'))")
    assert r.ok and r.stdout == "42 []\n", r  # imported, and not among the workspace's files


@pytest.mark.skipif(not ROOT, reason="a worker that is not root runs the code as itself, which reads its own files")
async def test_an_interpreter_under_a_private_home_runs(request: pytest.FixtureRequest) -> None:
    """The worker's Python installed under a 0700 home (pyenv, uv under /root): bound from the worker's own
    descriptors, it runs as the sandbox account, with the worker's libraries."""
    await sandbox_engine()
    home = Path(tempfile.mkdtemp(prefix="private-home-", dir="/var/tmp"))  # 0700, and not under /tmp
    request.addfinalizer(lambda: shutil.rmtree(home, ignore_errors=True))
    (home / "bin").mkdir()
    python = home / "bin" / "python3"
    shutil.copy2(os.path.realpath(sys.executable), python)
    python.chmod(0o755)
    eng = SandboxEngine(SandboxSettings(python=str(python), python_fallbacks=[]))
    found = await eng.availability()
    assert found.offered and found.sandbox is not None, found.reason
    assert found.sandbox.runtime.executable == str(python)
    r = await run(eng, "import sys, os, pydantic\nprint(sys.executable, os.getuid() != 0)")
    assert r.ok and r.stdout == f"{python} True\n", r


async def test_the_store_env_and_worker_tree_are_never_bound(open_dir: Path) -> None:
    store = open_dir / "agent_tools.db"
    store.write_text("every transcript")
    protected = protected_paths(Settings(database_url=f"sqlite+aiosqlite:///{store}"))
    assert protected[:2] == (str(store), f"{store}-wal") and str(Path.cwd().resolve()) in protected
    for extra in ({"read_only_paths": [str(open_dir)]}, {"library_paths": [str(REPO)]}):
        found = await SandboxEngine(SandboxSettings(**extra), protected=protected).availability()
        assert not found.offered and "would show" in found.reason, found.reason


async def test_the_unisolated_mode_is_an_explicit_opt_in_refused_to_root() -> None:
    eng = SandboxEngine(SandboxSettings(bwrap="/nonexistent/bwrap", unsafe_run_without_isolation=True))
    found = await eng.availability()
    if ROOT:
        assert not found.offered and "refused to a worker that runs as root" in found.reason
        return
    assert found.unisolated is not None and found.sandbox is None
    r = await run(eng, "import os\nprint(os.getuid())\nopen('out.txt', 'w').write('x')", files={"in.txt": "i"})
    assert r.ok and r.stdout == f"{os.getuid()}\n" and [f.path for f in r.files] == ["out.txt"]
    assert r.isolation is not None and r.isolation.mode == "none" and r.isolation.network == "host"
    assert "unisolated" in r.isolation.user


async def tools_prepared(settings: Settings) -> list[str]:
    coder = AgentDefinition(name="coder", tool_level=ToolLevel.l3_sandbox, profile=None, tools=["exec_python"])
    services = await Services.open(settings, agents=AgentRegistry([coder]))
    try:
        out = await prepare_session(
            services, PrepareInput(session_id="s-prep", request=SessionRequest(agent="coder", prompt="x"))
        )
    finally:
        await services.close()
    # FYAI's automatic tools (memory, readers) join any own tool list; only exec_python is in question here.
    return [t for t in out.config.tools if not services.catalog.is_automatic(t, None)]


async def test_prepare_offers_exec_python_only_with_a_sandbox(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, open_dir: Path
) -> None:
    await sandbox_engine()
    assert await tools_prepared(settings) == ["exec_python"]
    settings.sandbox = SandboxSettings(bwrap="/nonexistent/bwrap")
    assert await tools_prepared(settings) == []
    settings.sandbox = SandboxSettings(bwrap=userns_disabled_bwrap(open_dir))
    assert await tools_prepared(settings) == []


async def test_the_worker_says_why_at_start(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    settings.sandbox = SandboxSettings(bwrap="/nonexistent/bwrap")
    services = await Services.open(settings)
    try:
        with caplog.at_level(logging.INFO, logger="agent_tools.activities._sandbox.tool"):
            await announce(services)
    finally:
        await services.close()
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert caplog.records[0].getMessage() == (
        "exec_python is not offered by this worker: bubblewrap is not installed: no executable "
        "'/nonexistent/bwrap' (Debian/Ubuntu package 'bubblewrap')"
    )
    # Switched off by the deployment: nothing to say.
    caplog.clear()
    services = await Services.open(settings.model_copy(update={"disabled_tools": ["exec_python"]}))
    try:
        await announce(services)
    finally:
        await services.close()
    assert caplog.records == []


# ---- in a session ------------------------------------------------------------------------------------------


async def test_exec_python_in_a_session(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    await sandbox_engine()
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


async def test_a_session_on_a_worker_without_isolation_has_no_exec_python(
    settings: Settings,
    script: Script,
    worker_for: WorkerFor,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings.sandbox = SandboxSettings(bwrap="/nonexistent/bwrap")
    call = {"name": "exec_python", "arguments": {"code": "print('escaped')"}}
    settings.model = script([{"turns": [{"tool_calls": [call]}, {"say": "{{tool_results}}"}]}])
    coder = AgentDefinition(name="coder", tool_level=ToolLevel.l3_sandbox, profile=None, tools=["exec_python"])
    with caplog.at_level(logging.WARNING, logger="agent_tools.activities._sandbox.tool"):
        async with worker_for(agents=[coder]) as client:
            handle = await client.start_session("compute", agent="coder")
            await handle.result()
            tool_msgs = [e for e in await handle.transcript() if e.role == "tool"]
    assert "Unknown tool 'exec_python'" in tool_msgs[0].content and "escaped" not in tool_msgs[0].content
    assert any("exec_python is not offered by this worker" in r.getMessage() for r in caplog.records)


# ---- the escape tests, again as an unprivileged account -------------------------------------------------------


def _runs_as(runuser: str, user: str, python: str) -> bool:
    probe = subprocess.run(
        [runuser, "-u", user, "--", python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True, text=True, timeout=30, cwd="/",
    )  # fmt: skip
    return probe.returncode == 0 and probe.stdout.strip() == f"{sys.version_info.major}.{sys.version_info.minor}"


# What differs for a worker that is not root, besides the escapes: bwrap runs as the worker's own user, and
# the developer's unisolated opt-in is allowed there.
AS_NON_ROOT = (
    "test_runs_as_an_unprivileged_account",
    "test_without_bwrap_the_tool_is_not_available",
    "test_a_bwrap_that_fails_its_probe_is_not_used",
    "test_the_unisolated_mode_is_an_explicit_opt_in_refused_to_root",
    "test_a_forged_status_cannot_break_the_result",
)


@pytest.mark.skipif(not ROOT, reason="switching to the unprivileged account needs root (CI runs the suite as root)")
def test_escape_tests_pass_as_a_non_root_account() -> None:
    """The escape tests, and the tests of AS_NON_ROOT, again in a pytest run as an account that is not root and
    has no home (CI creates it): bwrap then runs as the worker's own user, with no account to switch to."""
    try:
        pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        message = f"no account {UNPRIVILEGED_USER!r} (.ci/run creates it)"
        if REQUIRE_SANDBOX:
            pytest.fail(message)
        pytest.skip(message)
    runuser = shutil.which("runuser")
    if not runuser:
        pytest.skip("needs runuser (util-linux)")
    readable = subprocess.run([runuser, "-u", UNPRIVILEGED_USER, "--", "test", "-r", str(REPO / "pyproject.toml")])
    assert readable.returncode == 0, f"{UNPRIVILEGED_USER} cannot read the checkout {REPO}: it must be world-readable"
    # The worker's interpreter may sit where that account cannot read it (pyenv under /root): use one of the
    # same version that it can, with the same site-packages on its path.
    candidates = [os.path.realpath(sys.executable), *SandboxSettings().python_fallbacks]
    usable = [p for p in dict.fromkeys(candidates) if os.path.exists(p) and _runs_as(runuser, UNPRIVILEGED_USER, p)]
    python = next(iter(usable), None)
    assert python is not None, f"no Python {sys.version_info[:2]} that {UNPRIVILEGED_USER} can run"
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        "PYTHONPATH": os.pathsep.join([*default_library_paths(), str(REPO)]),
        "PYTHONDONTWRITEBYTECODE": "1",
        **{k: v for k, v in os.environ.items() if k in ("AGENT_TOOLS_REQUIRE_SANDBOX", "AGENT_TOOLS_REQUIRE_POSTGRES")},
    }
    command = [
        runuser, "-u", UNPRIVILEGED_USER, "--", python, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs",
        "tests/test_sandbox_escapes.py", *(f"tests/test_sandbox.py::{name}" for name in AS_NON_ROOT),
    ]  # fmt: skip
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    # Every one of them ran and passed as that account: none skipped for want of a sandbox.
    summary = output.strip().splitlines()[-1]
    assert "skipped" not in summary and "deselected" not in summary, output[-3000:]
    module = (REPO / "tests/test_sandbox_escapes.py").read_text()
    escapes = sum(1 for line in module.splitlines() if line.startswith("async def test_"))
    assert summary.startswith(f"{escapes + len(AS_NON_ROOT)} passed"), summary


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("the sandbox uses Linux namespaces and rlimits")


def test_the_staging_directory_is_one_per_user_and_never_someone_elses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker process of a user stages under one directory, so processes that end without finalizing
    (commands leave through os._exit) leave none behind; a directory that is another's, a link or writable
    by others is never used."""
    from agent_tools.activities._sandbox import isolation

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    make = isolation._stage_dir.__wrapped__
    first, second = make(), make()
    assert first == second == str(tmp_path / f"exec_python-stage-{os.getuid()}")
    assert (os.stat(first).st_mode & 0o777) == 0o755 and os.listdir(first) == []
    assert len(list(tmp_path.iterdir())) == 1
    os.chmod(first, 0o777)  # writable by others: someone could swap what is mounted there
    private = make()
    assert private != first and os.path.dirname(private) == str(tmp_path)
    os.rmdir(private)
    os.rmdir(first)
    os.symlink(tmp_path / "elsewhere", first)  # a link planted where the directory goes
    assert make() != first
