"""Starting the launcher (under bwrap or, when a developer allowed it, directly) and collecting its output.

Everything that comes back from the sandbox is bounded here: stdout keeps its head, stderr its tail (a
traceback ends there), the status descriptor at most ``status_cap`` bytes; the pipes are drained to the
end so the code never blocks on a full pipe. The wall clock is the launcher's own (it then lists the
workspace); the worker's backstop, a little later, kills the process group of what it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from dataclasses import dataclass, field
from typing import Any

from agent_tools.activities._sandbox.launcher import Job

# How long output readers may still take once the launcher has exited: only a process that escaped the
# unisolated mode's process group can hold a pipe open that long.
_READ_GRACE_SECONDS = 2.0


@dataclass(frozen=True)
class Command:
    """One way of starting the launcher: its argv, the account it runs as, the descriptors it inherits."""

    argv: tuple[str, ...]
    env: dict[str, str]
    user: tuple[int, int] | None = None  # (uid, gid), with no supplementary groups; None: the worker's own
    pass_fds: tuple[int, ...] = ()
    cwd: str = "/"
    # Unisolated, the code runs in a process group of its own on the host (the launcher reports its pid),
    # which the backstop must kill too. Under bwrap that pid is the sandbox's own numbering: never used.
    kill_child_group: bool = False


@dataclass
class Outcome:
    """What came back from one run, bounded."""

    returncode: int | None
    stdout: bytes
    stdout_total: int
    stderr: bytes
    stderr_total: int
    status: dict[str, Any] = field(default_factory=dict)
    backstop: bool = False  # the worker had to kill it: the launcher did not end in time


@dataclass
class _Capture:
    """A pipe drained to the end, keeping its head or its tail; readable while it is still being filled."""

    cap: int
    keep: str
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.total += len(chunk)
            if self.keep == "head":
                if len(self.kept) < self.cap:
                    self.kept.extend(chunk[: self.cap - len(self.kept)])
            else:
                self.kept.extend(chunk)
                if len(self.kept) > self.cap:
                    del self.kept[: len(self.kept) - self.cap]


async def _pipe_reader(fd: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport]:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", buffering=0)
    )
    return reader, transport


def _text_only(value: Any) -> Any:
    """``value`` with every string made encodable: JSON's ``\\udXXX`` escapes decode to lone surrogates,
    which the result's own JSON encoding would then fail on (the status comes from the code's side)."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, list):
        return [_text_only(v) for v in value]
    if isinstance(value, dict):
        return {_text_only(k): _text_only(v) for k, v in value.items()}
    return value


def parse_status(data: bytes) -> dict[str, Any]:
    """The launcher's status lines merged, later keys winning; lines that are not JSON objects are skipped."""
    merged: dict[str, Any] = {}
    for line in data.splitlines():
        with contextlib.suppress(ValueError, RecursionError):
            item = json.loads(line)
            if isinstance(item, dict):
                merged.update(_text_only(item))
    return merged


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def run_launcher(
    command: Command, job: Job, *, output_cap: int, status_cap: int, backstop_seconds: float
) -> Outcome:
    """Run the launcher with ``job`` (its ``status_fd`` is filled in here); never leaves a process behind.

    Raises:
        OSError: the command could not be started (no such file, permission denied).
    """
    status_r, status_w = os.pipe()
    status_transport: asyncio.BaseTransport | None = None
    proc: asyncio.subprocess.Process | None = None
    tasks: set[asyncio.Task[None]] = set()
    try:
        job = job.copy()
        job["status_fd"] = status_w
        kwargs: dict[str, Any] = {}
        if command.user is not None:
            kwargs.update(user=command.user[0], group=command.user[1], extra_groups=[])
        try:
            proc = await asyncio.create_subprocess_exec(
                *command.argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=command.env,
                cwd=command.cwd,
                pass_fds=(*command.pass_fds, status_w),
                start_new_session=True,  # its own process group: the backstop kills all of it
                **kwargs,
            )
        finally:
            os.close(status_w)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        fd, status_r = status_r, -1  # owned by the transport from here on
        status_reader, status_transport = await _pipe_reader(fd)
        out, err, status = _Capture(output_cap, "head"), _Capture(output_cap, "tail"), _Capture(status_cap, "head")
        tasks = {
            asyncio.create_task(out.drain(proc.stdout)),
            asyncio.create_task(err.drain(proc.stderr)),
            asyncio.create_task(status.drain(status_reader)),
        }
        stdin = proc.stdin

        async def feed_and_wait() -> None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                stdin.write(json.dumps(job).encode("utf-8"))
                await stdin.drain()
                stdin.close()
            await proc.wait()

        backstop = False
        try:
            await asyncio.wait_for(feed_and_wait(), timeout=backstop_seconds)
        except TimeoutError:
            backstop = True
        _, pending = await asyncio.wait(tasks, timeout=0 if backstop else _READ_GRACE_SECONDS)
        if pending:
            _kill(proc, command, parse_status(bytes(status.kept)))
            await proc.wait()
            _, pending = await asyncio.wait(tasks, timeout=_READ_GRACE_SECONDS)
            for task in pending:
                task.cancel()  # an escaped process still holds the pipe: give up on the rest of its output
        return Outcome(
            returncode=proc.returncode,
            stdout=bytes(out.kept),
            stdout_total=out.total,
            stderr=bytes(err.kept),
            stderr_total=err.total,
            status=parse_status(bytes(status.kept)),
            backstop=backstop,
        )
    finally:
        if proc is not None and proc.returncode is None:
            # Cancelled (activity cancellation, worker shutdown): never leave the code running.
            _kill(proc, command, {})
            with contextlib.suppress(Exception):
                await asyncio.wait_for(proc.wait(), timeout=_READ_GRACE_SECONDS)
        for task in tasks:
            task.cancel()
        if status_transport is not None:
            status_transport.close()
        if status_r >= 0:
            os.close(status_r)


def _kill(proc: asyncio.subprocess.Process, command: Command, status: dict[str, Any]) -> None:
    """SIGKILL to what the worker started; under bwrap the sandbox dies with it (``--die-with-parent``, and
    the end of its PID 1)."""
    _kill_group(proc.pid)
    child = status.get("child")
    if command.kill_child_group and isinstance(child, int) and child > 1:
        _kill_group(child)
