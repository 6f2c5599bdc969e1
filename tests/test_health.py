"""The worker's probe endpoint: /healthz while the process is up, /readyz once it is connected, its store
answers and it polls; scraped over HTTP from a real `agent-tools worker` and from the server in process."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._errors import ConfigurationError
from agent_tools._health import Health, parse_bind, serving
from agent_tools.testing import write_script
from tests.support.polling import eventually


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_bind_addresses() -> None:
    assert parse_bind("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert parse_bind("[::]:9") == ("::", 9)
    for bad in ("8080", ":8080", "host:", "host:http", "host:70000"):
        with pytest.raises(ConfigurationError) as caught:
            parse_bind(bad)
        assert "is not HOST:PORT" in str(caught.value)


async def test_nothing_started_is_up_but_not_ready() -> None:
    async with serving("127.0.0.1:0", Health()) as (host, port), httpx.AsyncClient() as http:
        base = f"http://{host}:{port}"
        assert (await http.get(f"{base}/healthz")).json() == {"status": "ok"}
        ready = await http.get(f"{base}/readyz")
        assert ready.status_code == 503
        assert ready.json() == {
            "ready": False,
            "checks": {
                "temporal": "not connected yet",
                "store": "not open yet",
                "polling": "the worker is not running",
            },
        }


async def test_a_store_that_fails_is_named(temporal_env: WorkflowEnvironment) -> None:
    async def broken() -> None:
        raise OSError("connection refused by the database")

    health = Health(client=temporal_env.client, store_ping=broken)
    async with serving("127.0.0.1:0", health) as (host, port), httpx.AsyncClient() as http:
        checks = (await http.get(f"http://{host}:{port}/readyz")).json()["checks"]
    assert checks["temporal"] == "ok"
    assert checks["store"] == "connection refused by the database"


async def test_a_taken_port_is_one_line() -> None:
    async with serving("127.0.0.1:0", Health()) as (host, port):
        with pytest.raises(ConfigurationError) as caught:
            async with serving(f"{host}:{port}", Health()):
                pass
    assert f"cannot serve the health endpoint on {host}:{port}" in str(caught.value)


async def test_the_worker_is_ready_once_it_polls(temporal_env: WorkflowEnvironment, tmp_path: Path) -> None:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_TOOLS_", "TEMPORAL_"))}
    env.update(
        AGENT_TOOLS_TEMPORAL_ADDRESS=temporal_env.client.service_client.config.target_host,
        AGENT_TOOLS_TASK_QUEUE=f"health-{uuid.uuid4().hex[:8]}",
        AGENT_TOOLS_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        AGENT_TOOLS_MODEL=write_script(tmp_path / "script.json", [{"say": "hi"}]),
    )
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "agent_tools._cli", "worker", "--health", f"127.0.0.1:{port}"],
            env=env, cwd=tmp_path, stdout=out, stderr=out,
        )  # fmt: skip
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:

            async def answer(path: str) -> httpx.Response:
                assert worker.poll() is None, log.read_text()[-3000:]
                return await http.get(path)

            up = await eventually(
                lambda: answer("/healthz"), until=lambda r: r.status_code == 200, timeout=60,
                ignoring=(httpx.TransportError,), what="/healthz",
            )  # fmt: skip
            assert up.json() == {"status": "ok"}
            ready = await eventually(
                lambda: answer("/readyz"), until=lambda r: r.status_code == 200, timeout=60,
                ignoring=(httpx.TransportError,), what="/readyz",
            )  # fmt: skip
            assert ready.json() == {"ready": True, "checks": {"temporal": "ok", "store": "ok", "polling": "ok"}}
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)
    assert worker.returncode == 0, log.read_text()[-3000:]
