"""Whether this worker can isolate ``exec_python``, and the bubblewrap command that does.

The sandbox is bubblewrap (``bwrap``) in new user, mount, PID, network, IPC, UTS and cgroup namespaces,
which an unprivileged process may create: nothing here needs root or ``CAP_SYS_ADMIN``. Its root is an
empty tmpfs, remounted read-only once set up, holding only:

* the system library directories (``/usr/lib``, ``/lib64``... for the dynamic loader, libc, libssl) and
  ``/etc/ld.so.cache``, read-only;
* the interpreter: its executable, its standard library and its libpython, read-only;
* the libraries we offer (the worker's ``site-packages`` by default) and any configured extra paths,
  read-only;
* ``/tmp``, the workspace: a fresh tmpfs of ``disk_mb`` per call, the only place the code can write;
* a ``/dev`` of bwrap's own (null, zero, random, urandom, tty, a 16 MiB ``/dev/shm``), read-only;
* ``/proc`` of the sandbox's own PID namespace (unless ``mount_proc`` is off, for containers that mask
  parts of theirs), and the launcher, one file handed over through a memfd.

No ``/run``, ``/var``, ``/home``, ``/root``, ``/etc`` (but the loader cache), ``/sys``, no worker tree, no
store (the directories leading to a bound path exist, empty but for it: a venv's ``site-packages`` inside
the checkout shows as that one directory; one under ``/tmp``, which the workspace covers, is bound below
``/.sandbox/host`` instead). The network namespace has one interface, a loopback of its own: 127.0.0.1 is the sandbox itself,
where nothing listens; every other address is unreachable, abstract Unix sockets (which belong to a
network namespace) are the sandbox's own, and no path-bound Unix socket of the host exists in its mount
namespace. The environment is cleared. No capabilities, no further user namespaces (``--disable-userns``,
bubblewrap 0.8 or later). The launcher is PID 1, the code PID 2.

A worker that runs as root starts bwrap as an unprivileged account (``user``, ``nobody`` by default): a
process whose real uid is 0 is never bound by RLIMIT_NPROC, even inside a user namespace, so a fork bomb
would go unchecked; as that account, the limit counts the run's own processes (per user namespace). A
path to bind that the account cannot reach (a venv or pyenv under ``/root`` or a 0700 home) is first
mounted, by the helper ``stage.py`` as root in a private mount namespace, where the account can reach it;
the helper then drops to the account and starts bwrap.

Availability is probed once per worker process and configuration, by running a real job (see
:func:`availability`); when it fails, ``exec_python`` is not offered (fail closed), unless a developer set
``unsafe_run_without_isolation`` on a worker that is not root.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import dataclasses
import functools
import json
import os
import pwd
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_tools.activities._sandbox import launcher, stage
from agent_tools.activities._sandbox.launcher import Job
from agent_tools.activities._sandbox.runner import Command, Outcome, run_launcher
from agent_tools.contracts._sandbox import SandboxLimits

# Where things are inside the sandbox.
WORKSPACE = "/tmp"
SANDBOX_LAUNCHER = "/.sandbox/launcher.py"
# Host paths under the workspace's mount point (a checkout's venv in /tmp) would be hidden by the workspace's
# tmpfs, and listed as output files if bound inside it: they are bound below this instead.
RELOCATED = "/.sandbox/host"
SANDBOX_HOSTNAME = "sandbox"
SHM_BYTES = 16 * 1024 * 1024
# Bound (or recreated as the same symlinks) when they exist on the host: the loader and shared libraries.
SYSTEM_LIBRARY_DIRS = ("/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32")
LOADER_CACHE = "/etc/ld.so.cache"
# The code's whole environment: enough for Python and common libraries, nothing of the worker's.
BASE_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    # Numerical libraries start one thread per core otherwise, each reserving address space.
    "OPENBLAS_NUM_THREADS": "1",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MPLBACKEND": "Agg",
}
# What bwrap itself starts with (it clears the code's environment anyway): none of the worker's variables.
_BWRAP_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
WORKER_VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"

# The probe proves the whole path: bwrap starts, the namespaces and mounts are made, the interpreter and the
# launcher run as the sandbox account, and the network namespace has no interface but its own loopback.
PROBE_CODE = "import socket\nprint(sorted(name for _, name in socket.if_nameindex()))\n"
PROBE_OUTPUT = b"['lo']\n"
# Run by the probe first, as the sandbox account: a library directory it cannot read (a checkout in a
# private 0700 directory, a venv under /root) binds without complaint and only fails the code's imports, so
# the probe names it instead of offering a tool whose libraries are missing.
_PROBE_READABLE = (
    "import os, sys\n"
    "for seen, host in {paths!r}:\n"
    "    if not os.access(seen, os.R_OK | os.X_OK):\n"
    "        sys.exit(f'the sandbox account cannot read {{host}} (a library path): make it and the directories"
    " above it readable by that account (mode 0755), or set AGENT_TOOLS_SANDBOX__LIBRARY_PATHS')\n"
)


def probe_code(library_paths: tuple[str, ...]) -> str:
    """The probe job: every library path readable, then the network namespace's interfaces."""
    return _PROBE_READABLE.format(paths=tuple((inside(p), p) for p in library_paths)) + PROBE_CODE


_PROBE_SECONDS = 20
# Beyond the call's timeout: the launcher's start and its listing of the workspace.
BACKSTOP_EXTRA_SECONDS = 15.0
# Per file given back, room for its JSON escaping; the status also carries a few small fields.
_STATUS_BYTES_PER_CHAR = 6
_STATUS_OVERHEAD = 1 << 20
MAX_SCANNED = 10_000


@dataclass(frozen=True)
class IsolationConfig:
    """Everything the availability of the sandbox depends on (the key of the per-process cache)."""

    bwrap: str
    pythons: tuple[str, ...]
    user: str | None
    library_paths: tuple[str, ...]
    read_only_paths: tuple[str, ...]
    mount_proc: bool
    protected_paths: tuple[str, ...]
    unsafe_run_without_isolation: bool


@dataclass(frozen=True)
class Runtime:
    """An interpreter, as ``launcher.py --describe`` reports it."""

    executable: str
    version: str
    paths: tuple[str, ...]


@dataclass(frozen=True)
class Sandbox:
    """How this worker runs code under bwrap."""

    bwrap: str
    runtime: Runtime
    binds: tuple[str, ...]
    library_paths: tuple[str, ...]
    mount_proc: bool
    account: tuple[int, int] | None  # (uid, gid) bwrap runs as when the worker is root; None: the worker's
    user_name: str
    # Binds the account cannot reach (a private directory above them), and the empty directory the staging
    # helper mounts them under first (see stage.py); only with an account.
    staged: tuple[str, ...] = ()
    stage_dir: str | None = None

    def command(self, launcher_fd: int, disk_bytes: int) -> Command:
        """The bwrap command line; ``launcher_fd`` holds the launcher's source (read once, by bwrap)."""
        argv = [
            self.bwrap,
            "--unshare-all",
            "--unshare-user",  # explicit: --disable-userns needs it, and --unshare-all only tries
            "--disable-userns",
            "--die-with-parent",  # the worker dies, the sandbox dies
            "--new-session",  # no controlling terminal to push input into (TIOCSTI)
            "--as-pid-1",  # the launcher is init: kill(-1) ends everything, and the code cannot kill it
            "--cap-drop",
            "ALL",
            "--hostname",
            SANDBOX_HOSTNAME,
            "--clearenv",
        ]
        for name, value in {**BASE_ENV, "HOME": WORKSPACE, "TMPDIR": WORKSPACE}.items():
            argv += ["--setenv", name, value]
        for directory in SYSTEM_LIBRARY_DIRS:
            if os.path.islink(directory):
                argv += ["--symlink", os.readlink(directory), directory]
            elif os.path.isdir(directory):
                argv += ["--ro-bind", directory, directory]
        argv += ["--ro-bind-try", LOADER_CACHE, LOADER_CACHE]
        for path in self.binds:
            source = f"{self.stage_dir}/{self.staged.index(path)}" if path in self.staged else path
            argv += ["--ro-bind", source, inside(path)]
        if self.mount_proc:
            argv += ["--proc", "/proc"]
        argv += ["--dev", "/dev", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev"]
        argv += ["--size", str(disk_bytes), "--tmpfs", WORKSPACE]
        argv += ["--ro-bind-data", str(launcher_fd), SANDBOX_LAUNCHER]
        argv += ["--remount-ro", "/", "--chdir", WORKSPACE]
        argv += ["--", self.runtime.executable, "-I", SANDBOX_LAUNCHER]
        if self.staged and self.account is not None and self.stage_dir is not None:
            # The helper, as root, mounts the staged paths where the account can reach them, drops to it
            # and execs bwrap: the account is the same, the mounts are the helper's own namespace's.
            uid, gid = self.account
            helper = [sys.executable, "-I", "-S", stage_path(), str(uid), str(gid), self.stage_dir]
            argv = [*helper, str(len(self.staged)), *self.staged, "--", *argv]
            return Command(argv=tuple(argv), env=dict(_BWRAP_ENV), pass_fds=(launcher_fd,))
        return Command(argv=tuple(argv), env=dict(_BWRAP_ENV), user=self.account, pass_fds=(launcher_fd,))


@dataclass(frozen=True)
class Unisolated:
    """A developer's opt-in: the launcher runs as a plain child of the worker, with limits and nothing else."""

    python: str
    user_name: str
    library_paths: tuple[str, ...]

    def command(self, workspace: str) -> Command:
        env = {**BASE_ENV, "HOME": workspace, "TMPDIR": workspace}
        argv = (self.python, "-I", launcher_path())
        return Command(argv=argv, env=env, cwd=workspace, kill_child_group=True)


@dataclass(frozen=True)
class Availability:
    """What this worker can do: run code in ``sandbox``, or (opted in) ``unisolated``, or neither and why."""

    sandbox: Sandbox | None = None
    unisolated: Unisolated | None = None
    reason: str = ""

    @property
    def offered(self) -> bool:
        return self.sandbox is not None or self.unisolated is not None


def inside(path: str) -> str:
    """Where the sandbox sees the host's ``path``: the same place, unless the workspace would cover it."""
    return RELOCATED + path if _contains(WORKSPACE, path) else path


def launcher_path() -> str:
    return os.path.abspath(launcher.__file__)


def stage_path() -> str:
    return os.path.abspath(stage.__file__)


def reachable(path: str, account: tuple[int, int]) -> bool:
    """Whether ``account`` (uid, gid, no other groups) may search every directory above ``path``."""
    uid, gid = account
    for directory in Path(path).parents:
        st = os.stat(directory)
        shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
        if not (st.st_mode >> shift) & 0o1:
            return False
    return True


@functools.cache
def _stage_dir() -> str:
    """An empty directory every account can reach and only this user can change: the staging helper mounts a
    tmpfs of its own namespace on it, so the host's stays empty and every worker of this user shares one
    (a directory per process would outlive processes that leave without finalizing, as commands do)."""
    path = os.path.join(tempfile.gettempdir(), f"exec_python-stage-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o755)
    info = os.lstat(path)
    if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and not info.st_mode & 0o022:
        os.chmod(path, 0o755)
        return path
    # Someone else's, a link, or writable by others: a private one, removed at exit when the process finalizes.
    private = tempfile.mkdtemp(prefix="exec_python-stage-")
    os.chmod(private, 0o755)
    atexit.register(shutil.rmtree, private, True)
    return private


@functools.cache
def launcher_source() -> bytes:
    return Path(launcher_path()).read_bytes()


def default_library_paths() -> tuple[str, ...]:
    """The worker's ``site-packages`` (and Debian's ``dist-packages``) directories: the libraries we offer.

    Only directories of that name: ``sys.path`` may also hold the worker's own tree (``PYTHONPATH``, the
    current directory), which the sandbox must not see.
    """
    found = [
        os.path.realpath(p)
        for p in sys.path
        if p and os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages") and os.path.isdir(p)
    ]
    return tuple(dict.fromkeys(found))


def build_job(
    *, code: str, files: dict[str, str], workspace: str, timeout_seconds: float, limits: SandboxLimits,
    library_paths: tuple[str, ...], count_processes: bool,
) -> Job:  # fmt: skip
    return {
        "code": code,
        "files": files,
        "workspace": workspace,
        "timeout_seconds": timeout_seconds,
        "limits": {
            "memory_bytes": limits.memory_mb * 1024 * 1024,
            "cpu_seconds": max(1, int(timeout_seconds) + limits.cpu_seconds_extra),
            "file_bytes": limits.file_size_mb * 1024 * 1024,
            "open_files": limits.open_files,
            "processes": limits.max_processes if count_processes else 0,
        },
        "library_paths": list(library_paths),
        "status_fd": -1,  # filled in by run_launcher
        "collect": {
            "max_files": limits.returned_files,
            "file_chars": limits.returned_file_chars,
            "total_chars": limits.returned_file_chars * 4,
            "max_scanned": MAX_SCANNED,
        },
    }


async def execute(
    plan: Sandbox | Unisolated, *, code: str, files: dict[str, str], timeout_seconds: float, limits: SandboxLimits
) -> Outcome:
    """Run one job with ``plan``. Raises OSError when the command cannot be started at all."""
    output_cap = limits.output_chars * 4
    status_cap = limits.returned_file_chars * 4 * _STATUS_BYTES_PER_CHAR + _STATUS_OVERHEAD
    backstop = timeout_seconds + BACKSTOP_EXTRA_SECONDS
    if isinstance(plan, Sandbox):
        job = build_job(
            code=code, files=files, workspace=WORKSPACE, timeout_seconds=timeout_seconds, limits=limits,
            library_paths=tuple(map(inside, plan.library_paths)), count_processes=True,
        )  # fmt: skip
        fd = os.memfd_create("exec_python-launcher")
        try:
            data = memoryview(launcher_source())
            while data:
                data = data[os.write(fd, data) :]
            os.lseek(fd, 0, os.SEEK_SET)
            command = plan.command(fd, limits.disk_mb * 1024 * 1024)
            return await run_launcher(
                command, job, output_cap=output_cap, status_cap=status_cap, backstop_seconds=backstop
            )
        finally:
            os.close(fd)
    workspace = await asyncio.to_thread(tempfile.mkdtemp, prefix="exec_python-")
    try:
        # RLIMIT_NPROC would count every process of the developer's account here, not this run's.
        job = build_job(
            code=code, files=files, workspace=workspace, timeout_seconds=timeout_seconds, limits=limits,
            library_paths=plan.library_paths, count_processes=False,
        )  # fmt: skip
        return await run_launcher(
            plan.command(workspace), job, output_cap=output_cap, status_cap=status_cap, backstop_seconds=backstop
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, workspace, True)


# ---- the probe ------------------------------------------------------------------------------------------

_AVAILABILITY: dict[IsolationConfig, Availability] = {}
_PROBING: dict[tuple[IsolationConfig, asyncio.AbstractEventLoop], asyncio.Future[Availability]] = {}


async def availability(config: IsolationConfig) -> Availability:
    """This worker's sandbox for ``config``, probed on first use and then kept for the process's life.

    The protected paths are checked against the sandbox's binds on every call, outside the cache: they
    name the deployment's store, which differs between deployments (and tests) that share one sandbox.
    """
    key = dataclasses.replace(config, protected_paths=())
    found = _AVAILABILITY.get(key)
    if found is None:
        # Callers that come while the probe runs (the worker's start-up announcement, a first exec_python)
        # share it: one probe per process, whoever asks first.
        probing = _PROBING.get((key, asyncio.get_running_loop()))
        if probing is None:
            probing = _PROBING[(key, asyncio.get_running_loop())] = asyncio.ensure_future(_probe(key))
        try:
            found = _AVAILABILITY[key] = await asyncio.shield(probing)
        finally:
            if probing.done():
                _PROBING.pop((key, asyncio.get_running_loop()), None)
    if found.sandbox is not None:
        clash = _clash((*SYSTEM_LIBRARY_DIRS, LOADER_CACHE, *found.sandbox.binds), config.protected_paths)
        if clash:
            return Availability(reason=clash)
    return found


def _current_user() -> str:
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


async def _probe(config: IsolationConfig) -> Availability:
    found = await _find_sandbox(config)
    if isinstance(found, Sandbox):
        return Availability(sandbox=found, reason=f"bubblewrap {found.bwrap}, as {found.user_name}")
    reason = found
    if config.unsafe_run_without_isolation:
        if os.geteuid() == 0:
            reason += "; the unisolated mode is refused to a worker that runs as root"
        else:
            plan = Unisolated(python=config.pythons[0], user_name=_current_user(), library_paths=())
            return Availability(unisolated=plan, reason=reason)
    return Availability(reason=reason)


def _contains(outer: str, inner: str) -> bool:
    return inner == outer or Path(inner).is_relative_to(outer)


def _clash(binds: tuple[str, ...], protected: tuple[str, ...]) -> str | None:
    """Why binding ``binds`` would show the code something it must not read, if it would."""
    for bind in binds:
        for secret in protected:
            if _contains(os.path.realpath(bind), os.path.realpath(secret)):
                return f"{bind} would show {secret} to the code (the store, .env or the worker's own tree)"
    return None


@dataclass(frozen=True)
class _Ground:
    """What a sandbox is built from, before any interpreter is tried."""

    bwrap: str
    account: tuple[int, int] | None
    user_name: str
    extra: tuple[str, ...]
    library_paths: tuple[str, ...]


def _ground(config: IsolationConfig) -> _Ground | str:
    bwrap = config.bwrap if os.sep in config.bwrap else shutil.which(config.bwrap)
    if not bwrap or not _is_executable(bwrap):
        return f"bubblewrap is not installed: no executable {config.bwrap!r} (Debian/Ubuntu package 'bubblewrap')"
    account: tuple[int, int] | None = None
    user_name = _current_user()
    if os.geteuid() == 0:
        if not config.user:
            return "the worker runs as root and no sandbox user is set (AGENT_TOOLS_SANDBOX__USER)"
        try:
            entry = pwd.getpwnam(config.user)
        except KeyError:
            return f"the sandbox user {config.user!r} does not exist"
        if entry.pw_uid == 0:
            return f"the sandbox user {config.user!r} is root"
        account, user_name = (entry.pw_uid, entry.pw_gid), config.user
    extra = tuple(p for p in (*config.library_paths, *config.read_only_paths) if os.path.exists(p))
    libraries = tuple(p for p in config.library_paths if os.path.isdir(p))
    return _Ground(bwrap=bwrap, account=account, user_name=user_name, extra=extra, library_paths=libraries)


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


async def _find_sandbox(config: IsolationConfig) -> Sandbox | str:
    """A sandbox that passed the probe, or why there is none."""
    ground = _ground(config)
    if isinstance(ground, str):
        return ground
    failures: list[str] = []
    for python in dict.fromkeys(config.pythons):
        runtime = await _describe(python)
        if isinstance(runtime, str):
            failures.append(f"{python}: {runtime}")
            continue
        if config.library_paths and runtime.version != WORKER_VERSION:
            failures.append(f"{python}: Python {runtime.version}, not the worker's {WORKER_VERSION}")
            continue
        binds = _binds((runtime.executable, *runtime.paths, *ground.extra))
        account = ground.account
        staged = tuple(b for b in binds if account is not None and not reachable(b, account))
        sandbox = Sandbox(
            bwrap=ground.bwrap,
            runtime=runtime,
            binds=binds,
            library_paths=ground.library_paths,
            mount_proc=config.mount_proc,
            account=account,
            user_name=ground.user_name,
            staged=staged,
            stage_dir=_stage_dir() if staged else None,
        )
        problem = await _try(sandbox)
        if problem is None:
            return sandbox
        failures.append(f"{runtime.executable}: {problem}")
    return "bubblewrap cannot run the code here: " + ("; ".join(failures) or "no interpreter configured")


def _binds(paths: tuple[str, ...]) -> tuple[str, ...]:
    """Resolved, existing paths, without those a system library directory or an earlier path already covers."""
    covered = [os.path.realpath(d) for d in SYSTEM_LIBRARY_DIRS if os.path.isdir(d) and not os.path.islink(d)]
    kept: list[str] = []
    for path in sorted({os.path.realpath(p) for p in paths if os.path.exists(p)}):
        if not any(_contains(c, path) for c in (*covered, *kept)):
            kept.append(path)
    return tuple(kept)


async def _describe(python: str) -> Runtime | str:
    """The interpreter's paths (``launcher.py --describe``, run by the worker itself), or why not."""
    if not _is_executable(python):
        return "no such interpreter"
    try:
        proc = await asyncio.create_subprocess_exec(
            python, "-I", "-S", launcher_path(), "--describe",
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env=dict(_BWRAP_ENV), cwd="/",
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), timeout=_PROBE_SECONDS)
    except (OSError, TimeoutError) as exc:
        return f"cannot run it: {exc}"
    if proc.returncode != 0:
        return f"exit status {proc.returncode}: {err.decode('utf-8', 'replace').strip()[-300:]}"
    try:
        info: dict[str, Any] = json.loads(out)
        return Runtime(
            executable=str(info["executable"]), version=str(info["version"]), paths=tuple(map(str, info["paths"]))
        )
    except (ValueError, KeyError, TypeError) as exc:
        return f"unexpected description: {exc}"


async def _try(sandbox: Sandbox) -> str | None:
    """Run the probe job in ``sandbox``; None when it worked, else what went wrong."""
    try:
        outcome = await execute(
            sandbox,
            code=probe_code(sandbox.library_paths),
            files={},
            timeout_seconds=_PROBE_SECONDS,
            limits=SandboxLimits(),
        )
    except OSError as exc:
        return f"cannot start bwrap: {exc}"
    if outcome.status.get("done") is True and outcome.status.get("exit_code") == 0 and outcome.stdout == PROBE_OUTPUT:
        return None
    return failure_detail(outcome)


def failure_detail(outcome: Outcome) -> str:
    """The most telling line of a run that did not go as expected: bwrap's message, usually."""
    lines = [line.strip() for line in outcome.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    if lines:
        return lines[-1][-300:]
    message = outcome.status.get("message")
    if isinstance(message, str) and message:
        return message[:300]
    if outcome.stdout:
        return f"unexpected output {outcome.stdout[:100]!r}"
    return f"exit status {outcome.returncode}"
