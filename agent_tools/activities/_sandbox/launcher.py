"""The program the sandbox runs: it starts the model's code under its limits and reports what happened.

Standard library only, and nothing else of this project: the sandbox's interpreter may be another
installation of the worker's Python version (a system one that the sandbox user can read) without our
packages, and this file is the only one of the worker's tree the sandbox sees (read-only, handed to bwrap
through a memfd).

Three modes:

* ``launcher.py`` (the supervisor) reads one JSON :class:`Job` from stdin, writes the input files into the
  workspace, then forks and execs ``launcher.py --run`` under the limits. It waits with the wall clock,
  kills every process the code left, and only then lists the workspace, so that nothing changes while it
  reads it. Under bwrap it is PID 1 of the sandbox's PID namespace: ``kill(-1)`` reaches every other
  process there (whatever ``setsid`` or double forks the code did), and no process in the namespace can
  kill it. Its reports are JSON lines on ``job["status_fd"]``; the last one has ``"done": true``.
* ``launcher.py --run SPEC`` is the code's process: it reads the code from a pipe and runs it as
  ``__main__``, reporting a syntax error, an exception or a ``MemoryError`` on the status descriptor. It is
  a fresh interpreter rather than a fork of the supervisor: the job's data (up to 20 MB of input files)
  does not count against its memory limit, and the code's exit is an ordinary one (atexit handlers, threads
  and buffered output all finish).
* ``launcher.py --describe`` prints the interpreter's executable, version and the files it needs, as JSON,
  for the worker to bind into the sandbox (the worker runs this itself, outside any sandbox).

The status descriptor is the code's too (the process that reports its errors is the one that runs it), so
a status is the code's own account of its run: the worker bounds and validates it, and never takes the
isolation from it (it states that from what it asked bwrap for).
"""

from __future__ import annotations

import builtins
import json
import linecache
import os
import resource
import select
import signal
import site
import stat
import sys
import sysconfig
import time
import traceback
import types
from contextlib import suppress
from typing import Any, TypedDict

CODE_NAME = "<exec_python>"
# After the code ends: how long the supervisor waits for the processes it killed to be reaped.
_REAP_SECONDS = 2.0


class Limits(TypedDict):
    """Resource limits of the code's process (``setrlimit``); ``processes`` 0 leaves RLIMIT_NPROC alone."""

    memory_bytes: int
    cpu_seconds: int
    file_bytes: int
    open_files: int
    processes: int


class Collect(TypedDict):
    """How much of the workspace comes back."""

    max_files: int
    file_chars: int
    total_chars: int
    max_scanned: int


class Job(TypedDict):
    """What the worker sends the supervisor on stdin."""

    code: str
    files: dict[str, str]
    workspace: str
    timeout_seconds: float
    limits: Limits
    library_paths: list[str]
    status_fd: int
    collect: Collect


class RunSpec(TypedDict):
    """The ``--run`` process's argument: where its code comes from and where it runs."""

    code_fd: int
    status_fd: int
    workspace: str
    library_paths: list[str]


class FileReport(TypedDict, total=False):
    path: str
    size_bytes: int
    text: str
    text_truncated: bool


def report(fd: int, **fields: Any) -> None:
    """One status line; a closed descriptor is not the code's problem, so it is ignored."""
    data = memoryview((json.dumps(fields) + "\n").encode())
    with suppress(OSError):
        while data:
            data = data[os.write(fd, data) :]


def describe_error(exc: BaseException) -> str:
    """``Type: message``, even for an exception whose ``__str__`` fails (the code defines its own)."""
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# ---- the supervisor ----------------------------------------------------------------------------------


def write_inputs(workspace: str, files: dict[str, str]) -> None:
    """The input files, at their relative paths; a path that resolves outside the workspace is refused."""
    root = os.path.realpath(workspace)
    for rel, content in files.items():
        target = os.path.realpath(os.path.join(root, rel))
        if target == root or os.path.commonpath([root, target]) != root:
            raise ValueError(f"file path {rel!r} leaves the working directory")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w", encoding="utf-8", newline="") as out:
            out.write(content)


def apply_limits(limits: Limits) -> None:
    """The code's rlimits, each capped at the hard limit the worker itself runs under."""

    def cap(res: int, soft: int, hard: int) -> None:
        _, current_hard = resource.getrlimit(res)
        if current_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, current_hard), min(hard, current_hard)
        resource.setrlimit(res, (soft, hard))

    cap(resource.RLIMIT_AS, limits["memory_bytes"], limits["memory_bytes"])
    # SIGXCPU at the soft limit (a clear cause in the result), SIGKILL one second later if it is caught.
    cap(resource.RLIMIT_CPU, limits["cpu_seconds"], limits["cpu_seconds"] + 1)
    cap(resource.RLIMIT_FSIZE, limits["file_bytes"], limits["file_bytes"])
    cap(resource.RLIMIT_NOFILE, limits["open_files"], limits["open_files"])
    cap(resource.RLIMIT_CORE, 0, 0)
    if limits["processes"] > 0:
        # Counted per user *namespace* (Linux 5.14+ ucounts): under bwrap, this run's processes only.
        cap(resource.RLIMIT_NPROC, limits["processes"], limits["processes"])


def wait_for(pid: int, timeout: float) -> tuple[int, resource.struct_rusage] | None:
    """The child's wait status and resource usage, or None when it still runs after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    poller: select.poll | None = None
    try:
        pidfd = os.pidfd_open(pid)
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
    except OSError:  # no pidfd_open (kernel before 5.3, or a seccomp filter): sleep between checks instead
        pidfd = -1
    try:
        while True:
            got, status, usage = os.wait4(pid, os.WNOHANG)
            if got == pid:
                return status, usage
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if poller is not None:
                poller.poll(left * 1000)
            else:
                time.sleep(min(left, 0.05))
    finally:
        if pidfd >= 0:
            os.close(pidfd)


def end_everything(child: int) -> None:
    """Kill every process the code started and reap them, so the workspace stays still while it is read."""
    with suppress(ProcessLookupError, PermissionError):
        if os.getpid() == 1:
            # PID 1 of the sandbox's namespace: -1 is every other process in it, and nothing outside.
            os.kill(-1, signal.SIGKILL)
        else:
            # Unisolated mode: the code's process group (a process that called setsid escapes it).
            os.killpg(child, signal.SIGKILL)
    deadline = time.monotonic() + _REAP_SECONDS
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def printable(name: str) -> str:
    """A file name the worker can put in JSON: bytes that are not UTF-8 become ``\\xNN`` escapes."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def walk_files(workspace: str, max_scanned: int) -> tuple[list[str], bool]:
    """Regular files under ``workspace`` (never through a symlink), at most ``max_scanned`` entries looked at:
    a script can create a million empty files, and a directory is read only as far as that count."""
    found: list[str] = []
    scanned = 0
    pending = [workspace]
    while pending:
        directory = pending.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        with entries:
            for entry in entries:
                scanned += 1
                if scanned > max_scanned:
                    return sorted(found), True
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    found.append(entry.path)
    return sorted(found), False


def collect_files(workspace: str, inputs: dict[str, str], collect: Collect) -> tuple[list[FileReport], bool]:
    """The files the code created or changed (unchanged inputs are not echoed), small UTF-8 ones with text."""
    paths, truncated = walk_files(workspace, collect["max_scanned"])
    reports: list[FileReport] = []
    budget = collect["total_chars"]
    read_cap = collect["file_chars"] * 4
    for path in paths:
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                continue
            data: bytes | None = None
            if st.st_size <= read_cap:
                with open(path, "rb") as f:
                    data = f.read(read_cap + 1)
        except OSError:
            continue
        rel = os.path.relpath(path, workspace)
        if rel in inputs and data is not None and data == inputs[rel].encode("utf-8"):
            continue
        if len(reports) >= collect["max_files"]:
            truncated = True
            break
        item: FileReport = {"path": printable(rel), "size_bytes": st.st_size}
        if data is not None and budget > 0:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = None
            if text is not None:
                cap = min(collect["file_chars"], budget)
                item["text"], item["text_truncated"] = text[:cap], len(text) > cap
                budget -= len(item["text"])
        reports.append(item)
    return reports, truncated


def supervise() -> int:
    job: Job = json.loads(sys.stdin.buffer.read())
    # The code gets no stdin (the worker has nothing more to say once the job is sent).
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    status_fd = job["status_fd"]
    workspace = job["workspace"]
    try:
        write_inputs(workspace, job["files"])
    except (OSError, ValueError) as exc:
        report(status_fd, done=True, error="sandbox_error", message=f"could not write the input files: {exc}")
        return 0
    code_r, code_w = os.pipe()
    spec: RunSpec = {
        "code_fd": code_r,
        "status_fd": status_fd,
        "workspace": workspace,
        "library_paths": job["library_paths"],
    }
    child = os.fork()
    if child == 0:  # pragma: no cover - replaced by exec at once; what it runs is tested through --run
        try:
            os.close(code_w)
            os.set_inheritable(code_r, True)
            os.setpgid(0, 0)
            apply_limits(job["limits"])
            here = os.path.abspath(__file__)
            os.execv(sys.executable, [sys.executable, "-I", here, "--run", json.dumps(spec)])
        except BaseException as exc:
            report(
                status_fd, error="sandbox_error", message=f"could not start the code's process: {describe_error(exc)}"
            )
        finally:
            os._exit(127)
    os.close(code_r)
    report(status_fd, child=child)
    with suppress(BrokenPipeError):
        # The --run process reads all of it before anything else, so this never waits on the code.
        data = memoryview(job["code"].encode("utf-8"))
        while data:
            data = data[os.write(code_w, data) :]
    os.close(code_w)
    job["code"] = ""
    waited = wait_for(child, job["timeout_seconds"])
    timed_out = waited is None
    end_everything(child)
    if waited is None:
        with suppress(ChildProcessError):
            _, wstatus, usage = os.wait4(child, 0)
            waited = (wstatus, usage)
    exit_code: int | None = None
    killed_by: int | None = None
    cpu = 0.0
    if waited is not None:
        wstatus, usage = waited
        cpu = usage.ru_utime + usage.ru_stime
        if os.WIFSIGNALED(wstatus):
            killed_by = os.WTERMSIG(wstatus)
        elif os.WIFEXITED(wstatus):
            exit_code = os.WEXITSTATUS(wstatus)
    files, files_truncated = collect_files(workspace, job["files"], job["collect"])
    report(
        status_fd,
        done=True,
        exit_code=exit_code,
        signal=killed_by,
        cpu_seconds=round(cpu, 3),
        timed_out=timed_out,
        files=files,
        files_truncated=files_truncated,
    )
    return 0


# ---- the code's process --------------------------------------------------------------------------------


def read_code(fd: int) -> str:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 1 << 16):
        chunks.append(chunk)
    os.close(fd)
    # The worker sent valid UTF-8 (lone surrogates are refused where the arguments enter).
    return b"".join(chunks).decode("utf-8")


def run_code(spec: RunSpec) -> int:
    status_fd = spec["status_fd"]
    code = read_code(spec["code_fd"])
    # Processes the code starts do not inherit the status descriptor.
    os.set_inheritable(status_fd, False)
    os.chdir(spec["workspace"])
    sys.path.insert(0, spec["workspace"])
    for path in spec["library_paths"]:
        site.addsitedir(path)
    sys.argv = [CODE_NAME]
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(encoding="utf-8", errors="backslashreplace")
    linecache.cache[CODE_NAME] = (len(code), None, code.splitlines(True), CODE_NAME)
    try:
        compiled = compile(code, CODE_NAME, "exec")
    except (SyntaxError, ValueError) as exc:
        text = "".join(traceback.format_exception_only(type(exc), exc))
        report(status_fd, error="syntax_error", message=text.strip()[-500:])
        sys.stderr.write(text)
        return 1
    del code
    # A real module, so that pickle (multiprocessing, concurrent.futures) finds what the code defines.
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    try:
        exec(compiled, main.__dict__)
    except SystemExit:
        raise
    except MemoryError as exc:
        report(status_fd, error="memory_limit", message="MemoryError: the code ran out of its memory limit")
        with suppress(MemoryError):
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        return 1
    except BaseException as exc:
        report(status_fd, error="exception", message=describe_error(exc)[:500])
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
        return 1
    return 0


# ---- the interpreter's description ------------------------------------------------------------------------


def describe() -> dict[str, Any]:
    """What the worker binds for this interpreter: the executable, the standard library, libpython."""
    paths = {sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")}
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir, soname = sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")
        if libdir and soname:
            paths.add(os.path.join(libdir, soname))
    return {
        "executable": os.path.realpath(sys.executable),
        "version": f"{sys.version_info.major}.{sys.version_info.minor}",
        "paths": sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)}),
    }


def main(argv: list[str]) -> int:
    if argv[1:2] == ["--describe"]:
        print(json.dumps(describe()))
        return 0
    if argv[1:2] == ["--run"]:
        run_spec: RunSpec = json.loads(argv[2])
        return run_code(run_spec)
    return supervise()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
