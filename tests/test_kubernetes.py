"""deploy/kubernetes is real: every manifest parses, every name it refers to (Secrets and their keys, the
ConfigMap, ports, settings, Temporal's variables, commands) exists, the probes and metrics port match the
worker's settings, and the worker's container runs as configured, against an mTLS and API-key endpoint
(nginx in front of the test server), answering its probes. No cluster runs here."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from temporalio.service import TLSConfig
from temporalio.testing import WorkflowEnvironment
from typer.main import get_command

from agent_tools._cli import app
from agent_tools._connection import resolve
from agent_tools._settings import Settings
from agent_tools._version import package_version
from tests.support.deploy import ROOT, answers, free_port, setting_exists, start, stop, temporal_reads
from tests.support.tls_proxy import SERVER_NAME, SecuredTemporal, secured_endpoint

KUBE = ROOT / "deploy" / "kubernetes"
TLS_MOUNT = "/etc/temporal-tls"


@pytest.fixture(scope="module")
def manifests() -> dict[tuple[str, str], dict[str, Any]]:
    kustomization = yaml.safe_load((KUBE / "kustomization.yaml").read_text())
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((KUBE / resource).read_text()):
            assert {"apiVersion", "kind", "metadata"} <= set(doc), resource
            found[(doc["kind"], doc["metadata"]["name"])] = doc
    assert set(kustomization["images"][0]) >= {"name", "newName", "newTag"}
    return found


def _container(manifests: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, Any]:
    [container] = manifests[("Deployment", name)]["spec"]["template"]["spec"]["containers"]
    found: dict[str, Any] = container
    return found


def _environment(manifests: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, str]:
    """The container's environment as Kubernetes would set it: the ConfigMap, then env, Secrets resolved."""
    container = _container(manifests, name)
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        env.update(manifests[("ConfigMap", source["configMapRef"]["name"])]["data"])
    for item in container.get("env", []):
        if "value" in item:
            env[item["name"]] = item["value"]
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            env[item["name"]] = manifests[("Secret", ref["name"])]["stringData"][ref["key"]]
    return env


def test_what_the_manifests_name_exists(manifests: dict[tuple[str, str], dict[str, Any]]) -> None:
    group = get_command(app)
    commands = set(group.list_commands(typer.Context(group)))  # type: ignore[attr-defined]
    for kind, name in [k for k in manifests if k[0] == "Deployment"]:
        spec = manifests[(kind, name)]["spec"]
        assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
        pod = spec["template"]["spec"]
        [container] = pod["containers"]
        assert container["args"][0] == "agent-tools" and container["args"][1] in commands, name
        for source in container.get("envFrom", []):
            assert ("ConfigMap", source["configMapRef"]["name"]) in manifests
        for item in container.get("env", []):
            ref = item.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None:
                assert ref["key"] in manifests[("Secret", ref["name"])]["stringData"], (name, ref)
        for volume in pod.get("volumes", []):
            secret = volume["secret"]
            keys = manifests[("Secret", secret["secretName"])]["stringData"]
            assert all(i["key"] in keys for i in secret["items"]), volume
        ports = {p["name"] for p in container["ports"]}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            if probe in container:
                assert container[probe]["httpGet"]["port"] in ports, (name, probe)
        for var, value in _environment(manifests, name).items():
            if var.startswith("AGENT_TOOLS_"):
                assert setting_exists(var), f"{name}: {var} is not a setting"
            elif var.startswith("TEMPORAL_"):
                assert temporal_reads(var, value), f"{name}: Temporal's configuration ignores {var}"
    served = _container(manifests, "agent-tools-service")
    served_ports = {p["name"]: p["containerPort"] for p in served["ports"]}
    assert _environment(manifests, "agent-tools-service")["AGENT_TOOLS_SERVICE__METRICS_BIND"] == (
        f"0.0.0.0:{served_ports['metrics']}"
    )
    served_pod = manifests[("Deployment", "agent-tools-service")]["spec"]["template"]
    assert served_pod["metadata"]["annotations"]["prometheus.io/port"] == str(served_ports["metrics"])
    assert (served["livenessProbe"]["httpGet"]["path"], served["readinessProbe"]["httpGet"]["path"]) == (
        "/healthz",
        "/readyz",
    )
    service = manifests[("Service", "agent-tools-service")]["spec"]
    assert service["selector"] == {"app.kubernetes.io/name": "agent-tools-service"}


def test_the_worker_probes_and_metrics_match_its_settings(manifests: dict[tuple[str, str], dict[str, Any]]) -> None:
    container = _container(manifests, "agent-tools-worker")
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    env = _environment(manifests, "agent-tools-worker")
    assert env["AGENT_TOOLS_HEALTH_BIND"] == f"0.0.0.0:{ports['health']}"
    assert env["AGENT_TOOLS_METRICS_BIND"] == f"0.0.0.0:{ports['metrics']}"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    pod = manifests[("Deployment", "agent-tools-worker")]["spec"]["template"]
    assert pod["metadata"]["annotations"]["prometheus.io/port"] == str(ports["metrics"])
    # Longer than the worker's own graceful stop, or running calls are killed half-way.
    assert pod["spec"]["terminationGracePeriodSeconds"] > Settings().worker_shutdown_grace_seconds
    # The Temporal configuration is Temporal's: address, namespace and key, read by the SDK's rules.
    target = resolve(Settings(), environ=env)
    assert (target.address, target.namespace) == ("us-east-1.aws.api.temporal.io:7233", "agents.a1b2c")
    assert target.api_key and target.tls is True


@pytest.fixture
def secured(temporal_env: WorkflowEnvironment, tmp_path: Path) -> Iterator[SecuredTemporal]:
    with secured_endpoint(temporal_env, tmp_path) as endpoint:
        yield endpoint


async def test_the_worker_container_runs_against_a_secured_temporal(
    manifests: dict[tuple[str, str], dict[str, Any]], secured: SecuredTemporal, tmp_path: Path
) -> None:
    """The worker's container as configured, with the Secret's values and its mTLS variant: the certificate
    files where the Secret volume mounts them (here a folder), the commented variables switched on."""
    env = _environment(manifests, "agent-tools-worker")
    text = (KUBE / "worker.yaml").read_text()
    mount = tmp_path / "etc-temporal-tls"
    mount.mkdir()
    (mount / "tls.crt").write_bytes(secured.client_cert.read_bytes())
    (mount / "tls.key").write_bytes(secured.client_key.read_bytes())
    for var, file in (("TEMPORAL_TLS_CLIENT_CERT_PATH", "tls.crt"), ("TEMPORAL_TLS_CLIENT_KEY_PATH", "tls.key")):
        assert f"# - name: {var}\n            #   value: {TLS_MOUNT}/{file}" in text
        env[var] = str(mount / file)
    health, metrics = free_port(), free_port()
    env.update(
        TEMPORAL_ADDRESS=secured.address,
        TEMPORAL_NAMESPACE="default",
        TEMPORAL_API_KEY=secured.api_key,
        # The test CA, and the name in the certificate it signed: Temporal Cloud's are public ones.
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(secured.ca),
        TEMPORAL_TLS_SERVER_NAME=SERVER_NAME,
        AGENT_TOOLS_DATABASE_URL=f"sqlite+aiosqlite:///{tmp_path}/store.sqlite",
        AGENT_TOOLS_TASK_QUEUE=f"kube-{uuid.uuid4().hex[:8]}",
        AGENT_TOOLS_HEALTH_BIND=f"127.0.0.1:{health}",
        AGENT_TOOLS_METRICS_BIND=f"127.0.0.1:{metrics}",
        AGENT_TOOLS_DEPLOYMENT_NAME=f"agents-{uuid.uuid4().hex[:8]}",
    )
    assert isinstance(resolve(Settings(), environ=env).tls, TLSConfig)
    log = tmp_path / "worker.log"
    worker = start(_container(manifests, "agent-tools-worker")["args"], env, tmp_path, log)
    try:
        assert (await answers(worker, log, f"http://127.0.0.1:{health}/healthz")).json() == {"status": "ok"}
        ready = await answers(worker, log, f"http://127.0.0.1:{health}/readyz")
        assert ready.json()["checks"] == {"temporal": "ok", "store": "ok", "polling": "ok"}
        assert "temporal_" in (await answers(worker, log, f"http://127.0.0.1:{metrics}/metrics")).text
        build = env["AGENT_TOOLS_DEPLOYMENT_BUILD_ID"]  # the manifest's, the release's version
        assert build == package_version()
        assert f"worker deployment {env['AGENT_TOOLS_DEPLOYMENT_NAME']}, build {build}" in log.read_text()
    finally:
        assert await stop(worker) == 0, log.read_text()[-3000:]
    assert "PollWorkflowTaskQueue" in secured.log.read_text()
