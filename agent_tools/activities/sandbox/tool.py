"""``exec_python``: run untrusted Python in a separate, limited process.

Isolation, layer by layer (each is reported in the result's ``isolation``; nothing is claimed that did
not happen):

* **Process**: ``<python> -I -c <launcher>``: isolated mode (no ``PYTHON*`` variables, no user site, the
  current directory not on ``sys.path``), a new session and process group (``start_new_session``), the code
  read from stdin, stdin then closed.
* **Environment**: a fixed, minimal environment; none of the worker's variables (API keys, database URLs)
  is passed on.
* **Network**: when the worker runs as root, the launcher calls ``unshare(CLONE_NEWNET | CLONE_NEWPID)``
  (through libc: ``os.unshare`` only exists from Python 3.12). The new network namespace has no interface
  but a loopback that is down, so every connection fails, even to 127.0.0.1. Without root (or where
  namespaces are forbidden, e.g. an unprivileged container) there is **no network isolation**; the result
  says ``network: "none"``, and ``SandboxSettings.require_network_isolation`` turns that into a refusal.
* **PID namespace**: the code runs as PID 1 of its own namespace, so when it dies (or the wall clock kills
  the launcher, which it follows through ``PR_SET_PDEATHSIG``) the kernel kills every process it started,
  including ones that left the process group with ``setsid``.
* **Mount namespace** (``CLONE_NEWNS``, private propagation): ``/proc`` remounted for the PID namespace (the
  code sees only its own processes); the deployment's SQLite store and ``.env`` (plus ``hide_paths``)
  replaced by empty ones; the working directory and ``/tmp`` on a private tmpfs of ``disk_mb``, ``/var/tmp``
  and ``/dev/shm`` on small ones. Inputs are copied in before the code runs and results copied back by the
  launcher after it ends (regular files only, within the byte budget), so a timeout returns no files.
* **User**: as root, the code runs as ``nobody`` (configurable). The interpreter must be readable by that
  user, which a probe run checks once per worker; when the worker's own is not (pyenv under ``/root``), a
  system interpreter of the same version is used with the worker's site-packages appended to ``sys.path``.
  When none works the code keeps the worker's user, and the result says so and why.
  The rest of the filesystem is shared: the code can read what that user can read. It is not a container.
* **Resources** (``resource.setrlimit``): address space, CPU seconds, file size, open files, no core files,
  and the number of processes when privileges are dropped (RLIMIT_NPROC does not bind root).
* **Wall clock**: the whole process group is killed with SIGKILL when ``timeout_seconds`` pass.
* **Output**: stdout keeps its first, stderr its last ``output_chars`` characters (a traceback ends there).

Each call gets a fresh temporary working directory, removed afterwards: calls are independent, so a
retried activity on another worker gives the same answer (no per-session state on one worker's disk).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import shutil
import signal
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url

from agent_tools.activities.tools.base import BuiltinContext, ToolImpl
from agent_tools.activity_io import ToolCallOutput
from agent_tools.settings import Settings
from agent_tools.tools.sandbox import (
    ExecPythonArgs,
    ExecPythonResult,
    Isolation,
    SandboxFile,
    SandboxLimits,
)

_ENGINE_KEY = "sandbox"
_KILL_GRACE_SECONDS = 2.0
# Environment of the sandboxed process: enough for Python and common libraries, nothing of the worker's.
_BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    # Numerical libraries start one thread per core otherwise, each reserving address space.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}


class SandboxSettings(BaseSettings):
    """Deployment settings of the sandbox (environment prefix ``AGENT_TOOLS_SANDBOX_``).

    Attributes:
        python: Interpreter for the code; the worker's own by default (so its installed packages import).
        python_fallbacks: Interpreters tried, in order, when ``user`` cannot run ``python`` (its files are
            unreadable to that user). One of the worker's Python version also gets the worker's
            site-packages on ``sys.path``, so the same packages import.
        user: Account the code runs as when the worker is root.
        isolate_network: Try the network and PID namespaces.
        require_network_isolation: Refuse to run code when the network namespace is not available.
        workdir_root: Where the per-call working directories are made (the system temp dir by default).
        private_tmp: As root, give the code its own size-limited tmpfs for the working directory and for
            /tmp, /var/tmp and /dev/shm (``limits.disk_mb``), instead of the worker's disks.
        hide_paths: Files and directories replaced by empty ones in the code's mount namespace (as root),
            in addition to the deployment's SQLite store and ``.env``, which are always hidden.
    """

    model_config = SettingsConfigDict(env_prefix="AGENT_TOOLS_SANDBOX_", extra="ignore")

    python: str = sys.executable
    python_fallbacks: list[str] = ["/usr/local/bin/python3", "/usr/bin/python3"]
    user: str | None = "nobody"
    isolate_network: bool = True
    require_network_isolation: bool = False
    workdir_root: str | None = None
    hide_paths: list[str] = []
    private_tmp: bool = True
    limits: SandboxLimits = SandboxLimits()


# Runs in the sandbox process before the code. Kept free of imports from this project: it is executed by
# ``python -I -c``. argv: [config JSON, status fd]. Status lines (JSON) go to the status fd.
_LAUNCHER = r"""
import builtins, ctypes, json, linecache, os, resource, shutil, signal, stat, sys, traceback
cfg = json.loads(sys.argv[1])
status_fd = int(sys.argv[2])
code = sys.stdin.buffer.read().decode("utf-8", "replace")
_null = os.open(os.devnull, os.O_RDONLY)
os.dup2(_null, 0)
os.close(_null)

def status(**kw):
    try:
        os.write(status_fd, (json.dumps(kw) + "\n").encode())
    except OSError:
        pass

libc = ctypes.CDLL(None, use_errno=True)
net = pidns = False
if cfg["isolate"]:
    if libc.unshare(0x40000000 | 0x20000000) == 0:
        net = pidns = True
    elif libc.unshare(0x40000000) == 0:
        net = True
hidden = []
mntns = False
if cfg["isolate"] and libc.unshare(0x00020000) == 0:  # CLONE_NEWNS: a private view of the mounts
    # MS_REC | MS_PRIVATE on "/": nothing mounted here propagates back to the worker's namespace.
    mntns = libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None) == 0
    if mntns:
        for path in cfg["hide"]:
            if os.path.isdir(path):
                ok = libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0x1 | 0x2 | 0x4 | 0x8, b"size=4k,mode=555")
            elif os.path.exists(path):
                ok = libc.mount(b"/dev/null", path.encode(), None, 0x1000, None)  # MS_BIND
            else:
                continue
            if ok == 0:
                hidden.append(path)
status(network=net, pidns=pidns, hidden=hidden)
if cfg["require_net"] and not net:
    status(error="sandbox_error", message="network isolation is required but unshare(CLONE_NEWNET) failed")
    os._exit(70)
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

def copy_files(src, dst, budget, owner=None):
    # Regular files and directories only: symlinks, FIFOs and devices are never followed or copied, and the
    # byte budget stops a sparse "huge" file from being written out in full.
    seen = 0
    for root, dirs, files in os.walk(src, followlinks=False):
        rel = os.path.relpath(root, src)
        target_dir = dst if rel == "." else os.path.join(dst, rel)
        if os.path.islink(target_dir):
            dirs[:] = []
            continue
        os.makedirs(target_dir, exist_ok=True)
        if owner:
            os.chown(target_dir, *owner)
        for name in files:
            seen += 1
            if seen > 10000:
                return
            source, target = os.path.join(root, name), os.path.join(target_dir, name)
            st = os.lstat(source)
            if not stat.S_ISREG(st.st_mode) or st.st_size > budget or os.path.islink(target):
                continue
            budget -= st.st_size
            with open(source, "rb") as fi, open(target, "wb") as fo:
                shutil.copyfileobj(fi, fo)
            if owner:
                os.chown(target, *owner)

private_tmp = False
real_fd = None
if pidns and mntns and cfg["private_tmp"]:
    # The working directory and the shared scratch directories become size-limited tmpfs mounts of this
    # namespace: the code cannot fill the worker's disk, nor see or touch other runs' files in /tmp. The
    # inputs are copied in now and the results copied back when the code has ended.
    wd = cfg["workdir"]
    real_fd = os.open(wd, os.O_RDONLY | os.O_DIRECTORY)
    size = b"size=%dm,mode=1777" % cfg["disk_mb"]
    mounted = []
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(d) and not os.path.islink(d):
            if libc.mount(b"tmpfs", d.encode(), b"tmpfs", 0x2 | 0x4, size if d == "/tmp" else b"size=16m,mode=1777") == 0:
                mounted.append(d)
    if not any(wd.startswith(d + "/") for d in mounted):
        libc.mount(b"tmpfs", wd.encode(), b"tmpfs", 0x2 | 0x4, size)
    os.makedirs(wd, exist_ok=True)
    owner = (cfg["uid"], cfg["gid"]) if cfg["uid"] is not None else None
    copy_files("/proc/self/fd/%d" % real_fd, wd, cfg["disk_mb"] << 20, owner)
    os.chmod(wd, 0o700)
    private_tmp = True
    status(private_tmp=True)

if pidns:
    child = os.fork()
    if child:
        while True:
            try:
                _, st, ru = os.wait4(child, 0)
                break
            except InterruptedError:
                continue
        if real_fd is not None:
            try:
                # Not through /proc/self: /proc now belongs to the child's PID namespace, not to this process.
                os.fchdir(real_fd)
                copy_files(cfg["workdir"], ".", cfg["disk_mb"] << 20)
            except OSError as exc:
                status(copy_back_error=str(exc))
        if os.WIFSIGNALED(st):
            sig = os.WTERMSIG(st)
            status(signal=sig, cpu_seconds=ru.ru_utime + ru.ru_stime)
            if sig not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            os._exit(128 + sig)
        os._exit(os.waitstatus_to_exitcode(st))

proc = False
if pidns and mntns:
    # A /proc of the new PID namespace: the code sees its own processes only, not the worker's.
    proc = libc.mount(b"proc", b"/proc", b"proc", 0x2 | 0x4 | 0x8, None) == 0
    status(proc=proc)

def limit(res, value):
    resource.setrlimit(res, (value, value))

limit(resource.RLIMIT_AS, cfg["memory"])
resource.setrlimit(resource.RLIMIT_CPU, (cfg["cpu"], cfg["cpu"] + 1))
limit(resource.RLIMIT_FSIZE, cfg["fsize"])
limit(resource.RLIMIT_NOFILE, cfg["nofile"])
os.chdir(cfg["workdir"])
if cfg["uid"] is not None:
    limit(resource.RLIMIT_NPROC, cfg["nproc"])
    os.setgroups([])
    os.setgid(cfg["gid"])
    os.setuid(cfg["uid"])
if pidns:
    libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: die with the launcher (set after setuid, which clears it)
os.umask(0o022)
sys.stdout.reconfigure(encoding="utf-8", errors="backslashreplace")
sys.stderr.reconfigure(encoding="utf-8", errors="backslashreplace")
name = "<exec_python>"
linecache.cache[name] = (len(code), None, code.splitlines(True), name)
sys.argv = [name]
sys.path.insert(0, cfg["workdir"])
sys.path.extend(p for p in cfg["extra_paths"] if p not in sys.path)
try:
    compiled = compile(code, name, "exec")
except (SyntaxError, ValueError) as exc:
    status(error="syntax_error", message="".join(traceback.format_exception_only(type(exc), exc)).strip()[-500:])
    sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
    sys.exit(1)
del cfg, code
try:
    exec(compiled, {"__name__": "__main__", "__builtins__": builtins})
except SystemExit:
    raise
except MemoryError as exc:
    status(error="memory_limit", message="MemoryError: the code ran out of its memory limit")
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.exit(1)
except BaseException as exc:
    status(error="exception", message=("%s: %s" % (type(exc).__name__, exc))[:500])
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.exit(1)
"""

# Probe run as the sandbox user: can it start the interpreter and import from its standard library?
_PROBE = "import json, decimal, encodings.idna, sys; print('%d.%d' % sys.version_info[:2])"
_WORKER_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"


@dataclass(frozen=True)
class SandboxPlan:
    """How this worker runs code, decided once: interpreter, user, and extra import paths."""

    python: str
    user: tuple[int, int, str] | None  # (uid, gid, name) to drop to; None keeps the worker's user
    user_description: str
    extra_paths: tuple[str, ...] = ()


@dataclass
class SandboxEngine:
    """Runs code; holds the settings and the once-per-worker :class:`SandboxPlan`."""

    settings: SandboxSettings = field(default_factory=SandboxSettings)
    # Paths of the deployment the code must not read (the SQLite store, .env), on top of settings.hide_paths.
    hide_paths: list[str] = field(default_factory=list)
    _plan: SandboxPlan | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def plan(self) -> SandboxPlan:
        async with self._lock:
            if self._plan is None:
                self._plan = await self._decide()
        return self._plan

    async def _decide(self) -> SandboxPlan:
        s = self.settings
        current = pwd.getpwuid(os.geteuid()).pw_name

        def keep(reason: str) -> SandboxPlan:
            return SandboxPlan(python=s.python, user=None, user_description=f"{current} ({reason})")

        if os.geteuid() != 0:
            return keep("worker is not root: privileges cannot be dropped")
        if not s.user:
            return keep("no sandbox user configured")
        try:
            pw = pwd.getpwnam(s.user)
        except KeyError:
            return keep(f"user {s.user!r} does not exist")
        user = (pw.pw_uid, pw.pw_gid, s.user)
        # The worker's interpreter may live where that user cannot read (pyenv under /root, say): then a
        # system interpreter of the same Python version serves, with the worker's site-packages on its path.
        for python in dict.fromkeys([s.python, *s.python_fallbacks]):
            version = await _probe(python, pw.pw_uid, pw.pw_gid)
            if version is None:
                continue
            if python == s.python:
                return SandboxPlan(python=python, user=user, user_description=s.user)
            if version == _WORKER_VERSION:
                paths = tuple(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))
                return SandboxPlan(python=python, user=user, user_description=s.user, extra_paths=paths)
        return keep(f"no interpreter readable by {s.user!r}")

    async def run(self, args: ExecPythonArgs) -> ExecPythonResult:
        return await run_python(args, self)


async def _probe(python: str, uid: int, gid: int) -> str | None:
    """The interpreter's version if it starts and imports its stdlib as ``uid``; else None."""
    try:
        proc = await asyncio.create_subprocess_exec(
            python,
            "-I",
            "-c",
            _PROBE,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            env=dict(_BASE_ENV),
            cwd="/",
            user=uid,
            group=gid,
            extra_groups=[],
        )
        out, _ = await asyncio.wait_for(proc.communicate(), timeout=20)
    except (OSError, TimeoutError):
        return None
    return out.decode().strip() if proc.returncode == 0 else None


async def _read_capped(stream: asyncio.StreamReader, cap_bytes: int, keep: str) -> tuple[bytes, int]:
    """Drain a pipe (so the child never blocks on it), keeping the head or the tail; returns (kept, total)."""
    kept = bytearray()
    total = 0
    while True:
        chunk = await stream.read(65536)
        if not chunk:
            return bytes(kept), total
        total += len(chunk)
        if keep == "head":
            if len(kept) < cap_bytes:
                kept.extend(chunk[: cap_bytes - len(kept)])
        else:
            kept.extend(chunk)
            if len(kept) > cap_bytes:
                del kept[: len(kept) - cap_bytes]


def _decode(data: bytes, total: int, cap_chars: int, keep: str) -> tuple[str, bool]:
    text = data.decode("utf-8", "replace")
    truncated = total > len(data) or len(text) > cap_chars
    if len(text) > cap_chars:
        text = text[:cap_chars] if keep == "head" else text[-cap_chars:]
    return text, truncated


def _read_status(fd: int) -> dict[str, Any]:
    """Merge the launcher's JSON status lines (non-blocking: a leftover process may still hold the pipe)."""
    os.set_blocking(fd, False)
    buf = b""
    with contextlib.suppress(BlockingIOError, OSError):
        while chunk := os.read(fd, 65536):
            buf += chunk
    merged: dict[str, Any] = {}
    for line in buf.decode("utf-8", "replace").splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                merged.update(item)
    return merged


def _write_inputs(workdir: Path, files: dict[str, str]) -> None:
    for rel, content in files.items():
        target = (workdir / rel).resolve()
        if not target.is_relative_to(workdir):
            raise ValueError(f"file path {rel!r} leaves the working directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")


def _prepare_workdir(root: str | None, files: dict[str, str], user: tuple[int, int, str] | None) -> Path:
    """A fresh working directory with the input files, owned by the sandbox user when there is one."""
    workdir = Path(tempfile.mkdtemp(prefix="exec_python-", dir=root)).resolve()
    try:
        _write_inputs(workdir, files)
        if user is not None:
            for path in [workdir, *workdir.rglob("*")]:
                os.chown(path, user[0], user[1])
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return workdir


_MAX_SCANNED = 10_000


def _collect_files(workdir: Path, limits: SandboxLimits, inputs: dict[str, str]) -> tuple[list[SandboxFile], bool]:
    """The files the code left: new or changed ones (unchanged input files are not echoed back).

    The walk is bounded (a script can create a million empty files) and never follows symlinks, which could
    point anywhere on the worker's disk; FIFOs and devices are skipped (reading one could block).
    """
    paths: list[Path] = []
    truncated = False
    for root, dirs, names in os.walk(workdir, followlinks=False):
        dirs.sort()
        for name in names:
            if len(paths) >= _MAX_SCANNED:
                truncated = True
                break
            paths.append(Path(root) / name)
        if truncated:
            break
    found: list[SandboxFile] = []
    budget = limits.returned_file_chars * 4
    for path in sorted(paths):
        if path.is_symlink() or not path.is_file():
            continue
        rel = str(path.relative_to(workdir))
        size = path.stat().st_size
        data: bytes | None = path.read_bytes() if size <= limits.returned_file_chars * 4 else None
        if rel in inputs and data is not None and data == inputs[rel].encode("utf-8"):
            continue
        if len(found) >= limits.returned_files:
            truncated = True
            break
        item = SandboxFile(path=rel, size_bytes=size)
        if data is not None and budget > 0:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None:
                cap = min(limits.returned_file_chars, budget)
                item.text, item.text_truncated = text[:cap], len(text) > cap
                budget -= len(item.text)
        found.append(item)
    return found, truncated


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def run_python(args: ExecPythonArgs, engine: SandboxEngine) -> ExecPythonResult:
    """Run ``args.code`` in the sandbox; every failure of the code comes back as a result, never raised."""
    s = engine.settings
    limits = s.limits
    plan = await engine.plan()
    user = plan.user
    started = time.monotonic()
    try:
        workdir = await asyncio.to_thread(_prepare_workdir, s.workdir_root, args.files, user)
    except (OSError, ValueError) as exc:
        return _failed(f"could not prepare the working directory: {exc}", started)
    status_r, status_w = os.pipe()
    proc: asyncio.subprocess.Process | None = None
    try:
        env = {**_BASE_ENV, "HOME": str(workdir), "TMPDIR": str(workdir)}
        cfg: dict[str, Any] = {
            "isolate": s.isolate_network and os.geteuid() == 0,
            "hide": [*engine.hide_paths, *s.hide_paths],
            "require_net": s.require_network_isolation,
            "memory": limits.memory_mb * 1024 * 1024,
            "cpu": args.timeout_seconds + limits.cpu_seconds_extra,
            "fsize": limits.file_size_mb * 1024 * 1024,
            "nofile": limits.open_files,
            "nproc": limits.max_processes,
            "workdir": str(workdir),
            "uid": user[0] if user else None,
            "gid": user[1] if user else None,
            "extra_paths": list(plan.extra_paths),
            "private_tmp": s.private_tmp,
            "disk_mb": limits.disk_mb,
        }
        try:
            proc = await asyncio.create_subprocess_exec(
                plan.python,
                "-I",
                "-c",
                _LAUNCHER,
                json.dumps(cfg),
                str(status_w),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=str(workdir),
                pass_fds=(status_w,),
                start_new_session=True,  # own process group: the wall clock kills all of it
            )
        except OSError as exc:
            return _failed(f"could not start the interpreter {plan.python!r}: {exc}", started)
        finally:
            os.close(status_w)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        cap_bytes = limits.output_chars * 4
        out_task = asyncio.create_task(_read_capped(proc.stdout, cap_bytes, "head"))
        err_task = asyncio.create_task(_read_capped(proc.stderr, cap_bytes, "tail"))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(args.code.encode("utf-8"))
            await proc.stdin.drain()
            proc.stdin.close()
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout=args.timeout_seconds)
        except TimeoutError:
            timed_out = True
            _kill_group(proc.pid)
            await proc.wait()
        # Processes the code left behind in its group go too (the PID namespace already took them, if any).
        _kill_group(proc.pid)
        done, pending = await asyncio.wait({out_task, err_task}, timeout=_KILL_GRACE_SECONDS)
        for task in pending:
            task.cancel()  # an escaped process still holds the pipe: give up on the rest of its output
        out_b, out_total = out_task.result() if out_task in done else (b"", 0)
        err_b, err_total = err_task.result() if err_task in done else (b"", 0)
        stdout, stdout_trunc = _decode(out_b, out_total, limits.output_chars, "head")
        stderr, stderr_trunc = _decode(err_b, err_total, limits.output_chars, "tail")
        status = _read_status(status_r)
        code = proc.returncode
        error, message = _classify(code, status, timed_out, args.timeout_seconds, cfg["cpu"], limits)
        files, files_trunc = await asyncio.to_thread(_collect_files, workdir, limits, args.files)
        return ExecPythonResult(
            ok=code == 0 and error is None,
            exit_code=code,
            error=error,
            error_message=message,
            stdout=stdout,
            stderr=stderr,
            stdout_truncated=stdout_trunc,
            stderr_truncated=stderr_trunc,
            duration_ms=int((time.monotonic() - started) * 1000),
            files=files,
            files_truncated=files_trunc,
            isolation=Isolation(
                network="namespace" if status.get("network") else "none",
                pid_namespace=bool(status.get("pidns")),
                private_proc=bool(status.get("proc")),
                private_tmp=bool(status.get("private_tmp")),
                hidden_paths=[str(p) for p in status.get("hidden") or []],
                user=plan.user_description,
            ),
        )
    finally:
        if proc is not None and proc.returncode is None:
            # Cancelled (activity cancellation, worker shutdown): never leave the code running.
            _kill_group(proc.pid)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), timeout=_KILL_GRACE_SECONDS)
        os.close(status_r)
        await asyncio.to_thread(shutil.rmtree, workdir, True)


def _classify(
    code: int | None,
    status: dict[str, Any],
    timed_out: bool,
    timeout: int,
    cpu_limit: int,
    limits: SandboxLimits,
) -> tuple[str | None, str | None]:
    if timed_out:
        return "timeout", f"killed after the {timeout}s wall-clock timeout"
    reported = status.get("error")
    if isinstance(reported, str) and reported in {"syntax_error", "exception", "memory_limit", "sandbox_error"}:
        return reported, str(status.get("message") or reported)
    if code is not None and code < 0:
        sig = -code
        used = status.get("cpu_seconds")
        if sig == signal.SIGXCPU or (isinstance(used, float) and used >= cpu_limit - 0.5):
            return "cpu_limit", "killed: CPU time limit reached"
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        hint = f" (the memory limit is {limits.memory_mb} MB)" if sig in (signal.SIGSEGV, signal.SIGABRT) else ""
        return "killed", f"terminated by {name}{hint}"
    return None, None


def _failed(message: str, started: float) -> ExecPythonResult:
    return ExecPythonResult(
        ok=False,
        exit_code=None,
        error="sandbox_error",
        error_message=message,
        stdout="",
        stderr="",
        duration_ms=int((time.monotonic() - started) * 1000),
    )


def deployment_secrets(settings: Settings) -> list[str]:
    """Files of this deployment that the code must not read: a SQLite store (every session's transcript) and
    ``.env`` (API keys), both world-readable by default."""
    paths: list[str] = []
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        db = Path(url.database).resolve()
        paths += [str(db), *(f"{db}{suffix}" for suffix in ("-wal", "-shm", "-journal"))]
    paths.append(str(Path(".env").resolve()))
    return paths


def engine_of(ctx: BuiltinContext) -> SandboxEngine:
    """The worker's sandbox engine (created on first use, shared by every call)."""
    engine = ctx.services.engines.get(_ENGINE_KEY)
    if engine is None:
        engine = ctx.services.engines[_ENGINE_KEY] = SandboxEngine(hide_paths=deployment_secrets(ctx.services.settings))
    assert isinstance(engine, SandboxEngine)
    return engine


async def exec_python(args: ExecPythonArgs, ctx: BuiltinContext) -> ToolCallOutput:
    result = await engine_of(ctx).run(args)
    # A failing script is an error result for the model (and is never spilled: its traceback matters).
    return ToolCallOutput(content=result.model_dump_json(exclude_none=True), is_error=not result.ok)


IMPLEMENTATIONS: dict[str, ToolImpl] = {"exec_python": exec_python}
