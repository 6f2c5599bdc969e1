"""docker-compose.yml is real: valid against the Compose specification's JSON Schema, and everything it
names (services, build files, settings, commands, mounted folders) exists. No Docker engine runs here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
import yaml
from pydantic import BaseModel
from typer.main import get_command

from agent_tools._cli import app
from agent_tools._settings import Settings

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


def setting_exists(var: str) -> bool:
    """Whether ``AGENT_TOOLS_<FIELD>[__<SUBFIELD>]`` names a field of Settings (a legacy one-underscore
    section name such as ``AGENT_TOOLS_WEB_SEARXNG_URL`` does not)."""
    model: Any = Settings
    for part in var.removeprefix("AGENT_TOOLS_").lower().split("__"):
        field = model.model_fields.get(part) if isinstance(model, type) and issubclass(model, BaseModel) else None
        if field is None:
            return False
        model = field.annotation
    return True


def test_settings_and_commands_it_names_exist(compose: dict[str, Any]) -> None:
    assert setting_exists("AGENT_TOOLS_WEB__SEARXNG_URL") and setting_exists("AGENT_TOOLS_DATABASE_URL")
    assert not setting_exists("AGENT_TOOLS_WEB_SEARXNG_URL") and not setting_exists("AGENT_TOOLS_WEB__NOPE")
    group = get_command(app)
    commands = set(group.list_commands(typer.Context(group)))  # type: ignore[attr-defined]
    for name, svc in compose["services"].items():
        for var in svc.get("environment") or {}:
            if var.startswith("AGENT_TOOLS_"):
                assert setting_exists(var), f"{name}: {var} is not a setting"
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
