"""What the command-line benches start: a dev server and workers as processes, stopped however the bench
ends."""

from __future__ import annotations

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
