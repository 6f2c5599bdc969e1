"""docker-compose.yml is real: valid against the Compose specification's JSON Schema, everything it names
(services, build files, settings, Temporal's variables, commands, mounted folders) exists, and its worker and
HTTP service start. No Docker engine runs here: their commands run as processes."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
import yaml
from temporalio.testing import WorkflowEnvironment
from typer.main import get_command

from agent_tools._cli import app
from tests.support.deploy import answers, compose_value, free_port, setting_exists, start, stop, temporal_reads

ROOT = Path(__file__).resolve().parents[1]
# compose_spec.json from the docker-compose 1.29.2 wheel on PyPI (Apache-2.0), kept here for offline tests.
SCHEMA = json.loads((ROOT / "tests/fixtures/compose_spec.json").read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_valid_against_compose_schema(compose: dict[str, Any]) -> None:
    # The top-level `name` key is newer than this schema revision; everything else must validate.
    body = {k: v for k, v in compose.items() if k != "name"}
    jsonschema.validate(body, SCHEMA, cls=jsonschema.Draft201909Validator)


def test_a_broken_file_is_caught() -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"services": {"x": {"ports": "8000"}}}, SCHEMA, cls=jsonschema.Draft201909Validator)


def test_scale_shape(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for needed in ("temporal", "temporal-db", "temporal-ui", "store-db", "worker", "service", "searxng"):
        assert needed in services, needed
    assert services["temporal"]["environment"]["DB"] == "postgres12"


def test_dependencies_and_mounts_exist(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name, svc in services.items():
        deps = svc.get("depends_on", [])
        for dep in deps if isinstance(deps, list) else deps.keys():
            assert dep in services, f"{name} depends on unknown service {dep}"
        for vol in svc.get("volumes", []):
            source = vol.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in compose.get("volumes", {}), f"{name} uses undeclared volume {source}"


def test_built_image_and_its_sources_exist(compose: dict[str, Any]) -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    for src in re.findall(r"^COPY\s+(.+?)\s+\S+$", dockerfile, flags=re.M):
        for part in src.split():
            assert (ROOT / part).exists(), f"Dockerfile copies missing {part}"
    assert any("build" in svc for svc in compose["services"].values())


def test_settings_and_commands_it_names_exist(compose: dict[str, Any]) -> None:
    """Every AGENT_TOOLS_* variable is a setting, every TEMPORAL_* one a name Temporal's configuration reads,
    every command exists."""
    assert setting_exists("AGENT_TOOLS_WEB__SEARXNG_URL") and setting_exists("AGENT_TOOLS_DATABASE_URL")
    assert not setting_exists("AGENT_TOOLS_WEB_SEARXNG_URL") and not setting_exists("AGENT_TOOLS_WEB__NOPE")
    group = get_command(app)
    commands = set(group.list_commands(typer.Context(group)))  # type: ignore[attr-defined]
    for name, svc in compose["services"].items():
        for var, value in (svc.get("environment") or {}).items():
            if var.startswith("AGENT_TOOLS_"):
                assert setting_exists(var), f"{name}: {var} is not a setting"
            if var.startswith("TEMPORAL_") and not str(svc.get("image", "")).startswith("temporalio/"):
                assert temporal_reads(var, compose_value(value)), f"{name}: Temporal's configuration ignores {var}"
        command = svc.get("command")
        if isinstance(command, list) and command[0] == "agent-tools":
            assert command[1] in commands, f"{name}: agent-tools {command[1]} does not exist"
        if isinstance(command, list) and command[0] == "python":
            assert (ROOT / command[1]).exists()


def test_the_worker_gets_no_capability_for_the_sandbox(compose: dict[str, Any]) -> None:
    """bubblewrap needs no capability: the worker's container has none added, the image installs bubblewrap,
    and the three Docker defaults it cannot work under are lifted (docs/codai-extras.md, "In Docker")."""
    worker = compose["services"]["worker"]
    assert "cap_add" not in worker and not worker.get("privileged")
    assert set(worker["security_opt"]) == {"seccomp=unconfined", "apparmor=unconfined"}
    assert worker["environment"]["AGENT_TOOLS_SANDBOX__MOUNT_PROC"] == "false"
    assert re.search(r"apt-get install [^\n]*\bbubblewrap\b", (ROOT / "Dockerfile").read_text())


def test_the_check_knows_temporal_variables() -> None:
    assert temporal_reads("TEMPORAL_ADDRESS", "x:7233") and temporal_reads("TEMPORAL_TLS_CLIENT_CERT_PATH", "/c.pem")
    assert not temporal_reads("TEMPORAL_ADRESS", "x:7233")


async def test_the_worker_and_service_start_as_composed(
    compose: dict[str, Any], temporal_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    """What this machine can start of the file: the worker's and the HTTP service's commands with their
    environment, as processes against the test server (the compose hosts replaced by it and by SQLite)."""
    services = compose["services"]
    health, metrics, http = free_port(), free_port(), free_port()
    local = {
        "TEMPORAL_ADDRESS": temporal_env.client.service_client.config.target_host,
        "AGENT_TOOLS_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        "AGENT_TOOLS_TASK_QUEUE": f"compose-{uuid.uuid4().hex[:8]}",
        "AGENT_TOOLS_HEALTH_BIND": f"127.0.0.1:{health}",
        "AGENT_TOOLS_METRICS_BIND": f"127.0.0.1:{metrics}",
    }
    worker_env = {k: compose_value(v) for k, v in services["worker"]["environment"].items()}
    assert worker_env["TEMPORAL_ADDRESS"] == "temporal:7233" and worker_env["AGENT_TOOLS_HEALTH_BIND"].endswith(":8080")
    probe = " ".join(services["worker"]["healthcheck"]["test"])
    assert worker_env["AGENT_TOOLS_HEALTH_BIND"].rpartition(":")[2] in probe and "/readyz" in probe
    log = tmp_path / "worker.log"
    worker = start(services["worker"]["command"], {**worker_env, **local}, tmp_path, log)
    try:
        ready = await answers(worker, log, f"http://127.0.0.1:{health}/readyz")
        assert ready.json()["ready"] is True
        assert "temporal_" in (await answers(worker, log, f"http://127.0.0.1:{metrics}/metrics")).text
        command = [*services["service"]["command"]]
        command[command.index("--port") + 1], command[command.index("--host") + 1] = str(http), "127.0.0.1"
        service_env = {**{k: compose_value(v) for k, v in services["service"]["environment"].items()}, **local}
        service_log = tmp_path / "service.log"
        service = start(command, service_env, tmp_path, service_log)
        try:
            assert (await answers(service, service_log, f"http://127.0.0.1:{http}/healthz")).status_code == 200
        finally:
            await stop(service)
    finally:
        assert await stop(worker) == 0, log.read_text()[-3000:]
