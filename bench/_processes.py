"""What the command-line benches start: a dev server and workers as processes, stopped however the bench
ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CLI = str(Path(sys.executable).with_name("agent-tools"))


@contextmanager
def dev_server_and_workers(port: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``temporal server start-dev`` on ``port`` (and the three after it); yields the list the bench adds
    its workers to. Every process is stopped at the end."""
    temporal = str(Path(sys.executable).with_name("temporal"))
    server = subprocess.Popen(
        [temporal, "server", "start-dev", "--headless", "--port", str(port),
         "--http-port", str(port + 1), "--metrics-port", str(port + 2), "--log-level", "error"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    processes: list[subprocess.Popen[bytes]] = []
    try:
        time.sleep(3)
        yield processes
    finally:
        for proc in [*processes, server]:
            proc.terminate()
            proc.wait(timeout=30)


def start_worker(env: dict[str, str], cli: str = CLI) -> subprocess.Popen[bytes]:
    """``agent-tools worker`` of the install ``cli`` with ``env``, its output discarded."""
    return subprocess.Popen([cli, "worker"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User and system CPU seconds a process has used, from ``/proc``; with ``children``, also those of
    the children it has waited for. 0 for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(v) for v in fields[11 : 15 if children else 13]) / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of every core since boot, from ``/proc/stat``."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(ticks) - ticks[3] - ticks[4], sum(ticks)  # idle and iowait are not busy
