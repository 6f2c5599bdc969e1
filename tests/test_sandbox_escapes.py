"""exec_python against an attacker: what model-written code (or a prompt injection that writes it) tries
against the worker, each escape next to a control showing that the target is really there for the worker,
so that a failure inside the sandbox means something.

These run as the test user (root in CI) and, from tests/test_sandbox.py, again as an unprivileged account.
"""

from __future__ import annotations

import ast
import asyncio
import os
import socket
import sqlite3
import stat
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from agent_tools._settings import Settings
from agent_tools.activities._sandbox.engine import SandboxEngine, isolation_config, protected_paths
from agent_tools.activities._sandbox.isolation import BASE_ENV
from agent_tools.contracts._sandbox import SandboxLimits
from tests.support.sandbox import REPO, attempts, processes_with, run, sandbox_engine, world_readable_dir

PG_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"
REQUIRE_POSTGRES = os.environ.get("AGENT_TOOLS_REQUIRE_POSTGRES") == "1"
# Where a refused attempt may end: the thing does not exist in the sandbox, is not reachable, is read-only.
REFUSED = ("FileNotFoundError", "ConnectionRefusedError", "PermissionError", "OSError", "socket.gaierror", "gaierror")


def refused(outcome: str) -> bool:
    return outcome.split(":", 1)[0] in REFUSED


@pytest_asyncio.fixture
async def engine() -> SandboxEngine:
    return await sandbox_engine()


@pytest.fixture
def open_dir() -> Iterator[Path]:
    yield from world_readable_dir()


def postgres_socket() -> str | None:
    if os.path.exists(PG_SOCKET):
        return PG_SOCKET
    if REQUIRE_POSTGRES:
        pytest.fail(f"PostgreSQL is required (AGENT_TOOLS_REQUIRE_POSTGRES=1) but {PG_SOCKET} does not exist")
    return None


def host_unix_sockets() -> tuple[list[str], list[str]]:
    """The bound Unix sockets of the host's network namespace: (paths, abstract names), from /proc/net/unix."""
    paths: list[str] = []
    abstract: list[str] = []
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8:
            name = fields[7]
            (abstract if name.startswith("@") else paths).append(name)
    return sorted(set(paths))[:300], sorted(set(abstract))[:300]


async def test_no_unix_socket_of_the_host_is_reachable(engine: SandboxEngine, open_dir: Path) -> None:
    # Listeners of our own, so that both kinds certainly exist; the socket file is connectable by anyone.
    path_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path_name = str(open_dir / "worker.sock")
    path_sock.bind(path_name)
    os.chmod(path_name, 0o777)
    path_sock.listen()
    abstract_name = f"agent-tools-escape-{uuid.uuid4().hex}"
    abstract_sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract_sock.bind("\0" + abstract_name)
    abstract_sock.listen()
    try:
        pg = postgres_socket()
        paths, abstract = host_unix_sockets()
        targets = sorted({*paths, path_name, *([pg] if pg else [])})
        names = sorted({*(a[1:] for a in abstract), abstract_name})
        assert path_name in paths and "@" + abstract_name in abstract  # the host lists what we bound
        # Control: from the worker, our sockets and PostgreSQL's accept a connection.
        for target in (path_name, "\0" + abstract_name, *([pg] if pg else [])):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
                c.connect(target)
        body = (
            f"for path in {targets!r}:\n"
            "    attempt(path, lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(path))\n"
            f"for name in {names!r}:\n"
            "    attempt('@' + name, lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect('\\0' + name))\n"
            "for d in ('/run', '/var/run', '/var', '/run/postgresql', '/var/run/postgresql'):\n"
            "    attempt('listdir ' + d, lambda: os.listdir(d))\n"
        )
        results, _ = await attempts(engine, body)
    finally:
        path_sock.close()
        abstract_sock.close()
    dirs = ("/run", "/var/run", "/var", "/run/postgresql", "/var/run/postgresql")
    assert set(results) == {*targets, *("@" + n for n in names), *(f"listdir {d}" for d in dirs)}
    if pg:
        assert results[pg].startswith("FileNotFoundError"), results[pg]
    assert results["@" + abstract_name].startswith("ConnectionRefusedError"), results["@" + abstract_name]
    reached = {label: outcome for label, outcome in results.items() if not refused(outcome)}
    assert reached == {}


@pytest_asyncio.fixture
async def tcp_server() -> AsyncIterator[int]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "0.0.0.0", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def host_addresses() -> list[str]:
    """The host's IPv4 addresses other than loopback (the routes a sandbox might try instead of 127.0.0.1)."""
    found = set()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
            found.add(probe.getsockname()[0])
        except OSError:
            pass
    try:
        found.update(str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET))
    except OSError:
        pass
    return sorted(a for a in found if not a.startswith("127."))


async def test_no_tcp_or_udp_anywhere(engine: SandboxEngine, tcp_server: int) -> None:
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.setblocking(False)
    udp_port = udp.getsockname()[1]
    try:
        # Controls: the worker reaches our TCP server, PostgreSQL on 127.0.0.1:5432, and our UDP socket.
        reader, writer = await asyncio.open_connection("127.0.0.1", tcp_server)
        assert await reader.read(5) == b"hello"
        writer.close()
        if postgres_socket():
            socket.create_connection(("127.0.0.1", 5432), timeout=2).close()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"control", ("127.0.0.1", udp_port))
        await asyncio.sleep(0.1)
        assert udp.recv(100) == b"control"
        tcp_targets = [("127.0.0.1", 5432), ("127.0.0.1", tcp_server), ("1.1.1.1", 443), ("8.8.8.8", 53)]
        tcp_targets += [(a, tcp_server) for a in host_addresses()]
        body = (
            f"for host, port in {tcp_targets!r}:\n"
            "    attempt(f'tcp {host}:{port}', lambda: socket.create_connection((host, port), timeout=2).close())\n"
            "attempt('tcp [::1]:5432', lambda: socket.create_connection(('::1', 5432), timeout=2).close())\n"
            f"for host, port in [('127.0.0.1', {udp_port}), ('8.8.8.8', 53), ('255.255.255.255', {udp_port})]:\n"
            "    def send(host=host, port=port):\n"
            "        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "        s.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)\n"
            "        return s.sendto(b'escaped', (host, port))\n"
            "    attempt(f'udp {host}:{port}', send)\n"
            "attempt('dns', lambda: socket.getaddrinfo('example.com', 443))\n"
            "attempt('interfaces', lambda: socket.if_nameindex())\n"
        )
        results, _ = await attempts(engine, body)
        await asyncio.sleep(0.2)
        with pytest.raises(BlockingIOError):
            udp.recv(100)  # nothing arrived from the sandbox
    finally:
        udp.close()
    # One interface, the sandbox's own loopback (bwrap brings it up): 127.0.0.1 there is the sandbox itself,
    # where nothing listens, and a datagram sent to it stays there (the host's socket above got nothing).
    assert results.pop("interfaces") == "ok: [(1, 'lo')]"
    assert results["tcp 127.0.0.1:5432"].startswith("ConnectionRefusedError"), results["tcp 127.0.0.1:5432"]
    results.pop(f"udp 127.0.0.1:{udp_port}")
    for label, outcome in results.items():
        if label != "dns" and not label.startswith(("tcp 127.", "tcp [::1]")):
            assert "Network is unreachable" in outcome, (label, outcome)
    reached = {label: outcome for label, outcome in results.items() if not refused(outcome)}
    assert reached == {}


async def test_cannot_read_the_store_env_or_the_worker_tree(open_dir: Path) -> None:
    store = open_dir / "agent_tools.db"
    with sqlite3.connect(store) as db:
        db.execute("create table transcript (content text)")
        db.execute("insert into transcript values ('every transcript')")
    env_file = open_dir / ".env"
    env_file.write_text("AGENT_TOOLS_OPENAI_API_KEY=sk-live-secret\n")
    for f in (store, env_file):
        f.chmod(0o644)  # world-readable on purpose: only the sandbox stands between them and the code
        assert f.stat().st_mode & stat.S_IROTH
    settings = Settings(database_url=f"sqlite+aiosqlite:///{store}")
    engine = await sandbox_engine()
    engine.protected = protected_paths(settings)
    assert str(store) in engine.protected and str(Path.cwd().resolve() / ".env") in engine.protected
    targets = [
        str(store), str(env_file), str(REPO / "pyproject.toml"), str(REPO / "agent_tools" / "__init__.py"),
        str(REPO / ".git" / "config"), __file__, "/etc/passwd", "/etc/shadow", "/etc/hostname",
        "/var/lib/postgresql", "/root/.bashrc", "/proc/1/root/etc/passwd",
    ]  # fmt: skip
    body = (
        f"for path in {targets!r}:\n"
        "    attempt(path, lambda: open(path, 'rb').read(100))\n"
        "attempt('root', lambda: sorted(os.listdir('/')))\n"
        "attempt('etc', lambda: sorted(os.listdir('/etc')))\n"
        f"attempt('repo', lambda: sorted(os.listdir({str(REPO)!r})))\n"
        "attempt('sys', lambda: os.listdir('/sys'))\n"
        "attempt('home', lambda: os.listdir('/home'))\n"
    )
    results, _ = await attempts(engine, body)
    for path in targets:
        assert refused(results[path]), (path, results[path])
    # The root holds what bwrap made and the first directory of each bound path, nothing else of the host.
    sandbox = (await engine.availability()).sandbox
    assert sandbox is not None
    bound_tops = {Path(p).parts[1] for p in sandbox.binds}
    made = {".sandbox", "tmp", "dev", "proc", "etc", "usr", "lib", "lib64", "lib32", "libx32"}
    root = set(ast.literal_eval(results["root"].removeprefix("ok: ")))
    assert root <= made | bound_tops, root - made - bound_tops
    assert root.isdisjoint({"run", "var", "home", "srv", "opt", "mnt", "sys", "boot", "media"}), root
    assert results["etc"] == "ok: ['ld.so.cache']"
    # The worker's tree is absent: at most the directories leading to a bound site-packages exist there.
    repo = results["repo"]
    assert repo.startswith("FileNotFoundError") or repo == "ok: ['.venv']", repo
    assert refused(results["sys"]) and refused(results["home"])


async def test_cannot_see_the_worker_environment_or_its_processes(
    engine: SandboxEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-escape-{uuid.uuid4().hex}"
    # In the worker's environment (what a careless sandbox would pass on) ...
    monkeypatch.setenv("AGENT_TOOLS_OPENAI_API_KEY", secret)
    monkeypatch.setenv("DATABASE_PASSWORD", secret)
    # ... and in the /proc/<pid>/environ of a process of the host, started with it as a worker is.
    neighbour = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import time; time.sleep(60)", env={**os.environ, "OPENAI_API_KEY": secret}
    )
    worker = os.getpid()
    try:
        await asyncio.sleep(0.2)
        assert secret.encode() in Path(f"/proc/{neighbour.pid}/environ").read_bytes()  # control: there to steal
        body = (
            "attempt('environ', lambda: dict(os.environ))\n"
            "pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
            "attempt('pids', lambda: pids)\n"
            "for pid in pids:\n"
            "    attempt(f'environ {pid}', lambda: open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    attempt(f'cmdline {pid}', lambda: open(f'/proc/{pid}/cmdline', 'rb').read())\n"
            f"for pid in ({worker}, {neighbour.pid}):\n"
            "    attempt(f'environ of {pid}', lambda: open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    attempt(f'kill {pid}', lambda: os.kill(pid, 0))\n"
            "attempt('kill all', lambda: os.kill(-1, 0))\n"
            "attempt('parent', lambda: os.getppid())\n"
        )
        results, r = await attempts(engine, body)
    finally:
        neighbour.kill()
        await neighbour.wait()
    assert secret not in r.stdout
    for pid in (worker, neighbour.pid):
        assert results[f"environ of {pid}"].startswith("FileNotFoundError"), results[f"environ of {pid}"]
        assert results[f"kill {pid}"].startswith("ProcessLookupError"), results[f"kill {pid}"]
    environ = ast.literal_eval(results["environ"].removeprefix("ok: "))
    # Ours, and PWD, which bwrap sets with --chdir.
    assert set(environ) <= {*BASE_ENV, "HOME", "TMPDIR", "PWD"}, environ
    # The sandbox's own two processes: the launcher (PID 1) and the code (2); nothing of the host.
    assert results["pids"] == "ok: [1, 2]"
    for pid in (1, 2):
        assert "launcher.py" in results[f"cmdline {pid}"]
    assert results["kill all"].startswith("ProcessLookupError")  # no process it could signal but itself
    assert results["parent"] == "ok: 1"  # its parent is the launcher, not the worker


async def test_cannot_write_outside_its_workspace(engine: SandboxEngine, open_dir: Path) -> None:
    token = uuid.uuid4().hex
    library = next(iter(isolation_config(engine.settings).library_paths), "/usr/lib")
    host_target = open_dir / "planted"
    open_dir.chmod(0o777)  # even a directory anyone may write to on the host is out of reach
    targets = [
        "/planted", "/usr/lib/planted", "/etc/planted", "/dev/planted", "/proc/planted", "/.sandbox/launcher.py",
        f"{library}/planted.pth", str(host_target),
    ]  # fmt: skip
    body = (
        f"for path in {targets!r}:\n"
        "    attempt(path, lambda: open(path, 'w').write('planted'))\n"
        "attempt('interpreter', lambda: open(sys.executable, 'ab'))\n"
        "attempt('mkdir', lambda: os.mkdir('/new'))\n"
        "attempt('hostname', lambda: open('/proc/sys/kernel/hostname', 'w').write('planted'))\n"
        f"attempt('workspace', lambda: open('/tmp/escape-{token}', 'w').write('mine'))\n"
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "def call(fn, *args):\n"
        "    if fn(*args) != 0:\n"
        "        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
        "attempt('remount', lambda: call(libc.mount, b'none', b'/', None, 0x20 | 0x1, None))\n"  # MS_REMOUNT|MS_RDONLY
        "attempt('tmpfs', lambda: call(libc.mount, b'tmpfs', b'/tmp', b'tmpfs', 0, None))\n"
        "attempt('new user namespace', lambda: call(libc.unshare, 0x10000000))\n"  # CLONE_NEWUSER
        "attempt('new mount namespace', lambda: call(libc.unshare, 0x00020000))\n"  # CLONE_NEWNS
    )
    results, r = await attempts(engine, body)
    assert results.pop("workspace") == "ok: 4"
    for label, outcome in results.items():
        assert refused(outcome), (label, outcome)
    assert "Read-only file system" in results["/usr/lib/planted"]
    assert not host_target.exists() and not Path(f"/tmp/escape-{token}").exists()
    assert not Path(library, "planted.pth").exists()
    # What the code wrote in its workspace comes back to the worker; nothing else does.
    assert [f.path for f in r.files] == [f"escape-{token}"]


async def test_nothing_outlives_the_run(engine: SandboxEngine) -> None:
    token = f"outlive-{uuid.uuid4().hex}"
    # A child that leaves the session and process group, and a double-forked daemon, both told to live on.
    code = (
        "import os, subprocess, sys, time\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', {token!r}], start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', {token!r}])\n"
        "    os._exit(0)\n"
        "time.sleep(0.5)\n"
        "print('bye')\n"
    )
    r = await run(engine, code)
    assert r.ok and r.stdout == "bye\n", r.stderr
    assert processes_with(token) == []
    # The same when the wall clock ends the run.
    r = await run(engine, code.replace("print('bye')", "while True: pass"), timeout_seconds=2)
    assert r.error == "timeout"
    assert processes_with(token) == []


async def test_a_fork_bomb_ends_within_its_limits() -> None:
    engine = await sandbox_engine(limits=SandboxLimits(max_processes=24))
    token = f"forkbomb-{uuid.uuid4().hex}"
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    code = f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', {bomb!r}, {token!r}])\n"
    peak = 0
    stop = asyncio.Event()

    async def watch() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, len(await asyncio.to_thread(processes_with, token)))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    started = time.monotonic()
    try:
        r = await run(engine, code, timeout_seconds=2)
    finally:
        stop.set()
        await watcher
    elapsed = time.monotonic() - started
    assert r.error == "timeout" and not r.ok
    assert elapsed < 2 + 6, elapsed
    # It did fork (the bomb went off), but never past the run's process limit (the launcher is one of them).
    assert 2 <= peak <= 24, peak
    assert processes_with(token) == []


async def test_a_memory_bomb_ends_within_its_limits() -> None:
    engine = await sandbox_engine(limits=SandboxLimits(memory_mb=256))
    r = await run(engine, "b = bytearray(64 * 1024 ** 3)\nprint('allocated')")
    assert r.error == "memory_limit" and "allocated" not in r.stdout
    started = time.monotonic()
    r = await run(engine, "chunks = []\nwhile True:\n    chunks.append(bytearray(8 * 1024 * 1024))")
    assert r.error == "memory_limit", (r.error, r.error_message, r.stderr[-300:])
    assert time.monotonic() - started < 10
    # Forked children each get the limit too: none of them gets past it.
    code = (
        "import os\n"
        "for _ in range(3):\n"
        "    if os.fork() == 0:\n"
        "        try:\n"
        "            bytearray(1024 ** 3)\n"
        "            os._exit(0)\n"
        "        except MemoryError:\n"
        "            os._exit(42)\n"
        "print(sorted(os.waitstatus_to_exitcode(os.wait()[1]) for _ in range(3)))\n"
    )
    r = await run(engine, code)
    assert r.ok and r.stdout == "[42, 42, 42]\n", (r.stdout, r.stderr)


async def test_an_infinite_loop_ends_at_the_wall_clock(engine: SandboxEngine) -> None:
    r = await run(engine, "while True:\n    pass", timeout_seconds=1)
    assert r.error == "timeout" and r.error_message == "killed after the 1s wall-clock timeout"
    assert 1000 <= r.duration_ms < 4000, r.duration_ms
    # A script that ignores the signals it may catch ends all the same.
    code = "import signal\nfor s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n    signal.signal(s, signal.SIG_IGN)\nwhile True:\n    pass"
    r = await run(engine, code, timeout_seconds=1)
    assert r.error == "timeout" and r.duration_ms < 4000


if sys.platform != "linux":  # pragma: no cover
    pytestmark = pytest.mark.skip("the sandbox uses Linux namespaces")
