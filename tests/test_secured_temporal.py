"""Sessions through a secured Temporal endpoint: nginx terminating TLS with a client certificate required and
an API key checked, in front of the test dev server. The worker and `agent-tools run` are configured for it
by Temporal's own configuration alone (TEMPORAL_* variables, or a TOML profile); the AGENT_TOOLS_* variables
set here are the model, the task queue and the store, none of them about the connection."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import AgentToolsClient
from agent_tools._connection import connect
from agent_tools._settings import Settings
from agent_tools.testing import write_script
from tests.support.tls_proxy import SecuredTemporal, make_client_cert, secured_endpoint

ANSWER = "through the secured endpoint"


@pytest.fixture
def secured(temporal_env: WorkflowEnvironment, tmp_path: Path) -> Iterator[SecuredTemporal]:
    with secured_endpoint(temporal_env, tmp_path) as endpoint:
        yield endpoint


def _base_env(tmp_path: Path, queue: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AGENT_TOOLS_", "TEMPORAL_", "OPENAI_", "ANTHROPIC_"))
    }
    env.update(
        AGENT_TOOLS_MODEL=write_script(tmp_path / "script.json", [{"say": ANSWER}]),
        AGENT_TOOLS_TASK_QUEUE=queue,
        AGENT_TOOLS_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
    )
    return env


def _cli(*args: str, env: dict[str, str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agent_tools._cli", *args], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip


class _Worker:
    """`agent-tools worker` in a subprocess, until stopped with SIGTERM."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.log = cwd / f"worker-{uuid.uuid4().hex[:6]}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "agent_tools._cli", "worker"], env=env, cwd=cwd, stdout=out, stderr=out
            )

    async def started(self) -> None:
        deadline = time.monotonic() + 90
        while "worker on task queue" not in self.log.read_text():
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            await asyncio.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)


async def _session_through(
    secured: SecuredTemporal, tmp_path: Path, worker_env: dict[str, str], run_env: dict[str, str], *run_args: str
) -> None:
    worker = _Worker(worker_env, tmp_path)
    try:
        await worker.started()
        log = worker.log.read_text()
        assert f"at {secured.address}, namespace default" in log, log[-2000:]
        done = await asyncio.to_thread(_cli, *run_args, "run", "hello", "--yes", env=run_env, cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert ANSWER in done.stdout
    finally:
        worker.stop()
    assert worker.proc.returncode == 0, worker.log.read_text()[-2000:]
    # Every call went through the proxy, which saw the key (it refuses what lacks it).
    assert "WorkflowService/PollWorkflowTaskQueue" in secured.log.read_text()
    assert "WorkflowService/StartWorkflowExecution" in secured.log.read_text()


async def test_a_session_with_temporal_variables_alone(secured: SecuredTemporal, tmp_path: Path) -> None:
    env = {**_base_env(tmp_path, f"q-{uuid.uuid4().hex[:8]}"), **secured.env()}
    await _session_through(secured, tmp_path, env, env)


async def test_a_session_through_a_toml_profile(secured: SecuredTemporal, tmp_path: Path) -> None:
    config = tmp_path / "temporal.toml"
    config.write_text('[profile.default]\naddress = "127.0.0.1:1"\n' + secured.profile_toml("secure"))
    base = {**_base_env(tmp_path, f"q-{uuid.uuid4().hex[:8]}"), "TEMPORAL_CONFIG_FILE": str(config)}
    # The worker picks the profile with Temporal's variable, the CLI with --profile.
    await _session_through(secured, tmp_path, {**base, "TEMPORAL_PROFILE": "secure"}, base, "--profile", "secure")


async def test_the_client_connects_through_it(secured: SecuredTemporal, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in secured.env().items():
        monkeypatch.setenv(name, value)
    client = await AgentToolsClient.connect(Settings(task_queue=f"q-{uuid.uuid4().hex[:8]}"))
    try:
        assert await client.list_sessions(limit=1) is not None
        assert client.settings.temporal_address == secured.address
    finally:
        await client.close()


def _refusal(env: dict[str, str], cwd: Path, *args: str) -> str:
    done = _cli(*args, env=env, cwd=cwd, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_refusals_and_bad_files_are_one_line(secured: SecuredTemporal, tmp_path: Path) -> None:
    base = {**_base_env(tmp_path, "unused"), **secured.env()}
    wrong_key = _refusal({**base, "TEMPORAL_API_KEY": "wrong"}, tmp_path, "sessions")
    assert wrong_key.startswith(f"cannot reach Temporal (address {secured.address}, namespace default, TLS on")
    assert "Unauthenticated" in wrong_key and "missing or wrong API key" in wrong_key
    no_cert = {k: v for k, v in base.items() if not k.startswith("TEMPORAL_TLS_CLIENT_")}
    assert "TLS on, an API key" in _refusal(no_cert, tmp_path, "sessions")
    # A key that is not the certificate's: the TLS handshake cannot be made.
    _, other_key = make_client_cert(secured.ca.parent, "other")
    mismatched = _refusal({**base, "TEMPORAL_TLS_CLIENT_KEY_PATH": str(other_key)}, tmp_path, "sessions")
    assert mismatched.startswith("cannot reach Temporal"), mismatched
    missing = _refusal({**base, "TEMPORAL_TLS_CLIENT_CERT_PATH": str(tmp_path / "gone.pem")}, tmp_path, "worker")
    assert f"cannot read the TLS client certificate {tmp_path / 'gone.pem'}" in missing
    unknown = _refusal(base, tmp_path, "--profile", "nope", "sessions")
    assert "Profile 'nope' not found" in unknown


async def test_the_embedded_runner_ignores_the_deployment_configuration(
    temporal_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its own dev server, in plain text: a profile naming the deployment's server does not apply to it."""
    monkeypatch.setenv("TEMPORAL_PROFILE", "does-not-exist")
    monkeypatch.setenv("TEMPORAL_API_KEY", "for-the-real-cluster")
    target = temporal_env.client.service_client.config.target_host
    client = await connect(Settings(), local_address=target)
    assert client.service_client.config.target_host == target
    assert client.service_client.config.tls is None or client.service_client.config.tls is False
