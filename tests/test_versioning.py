"""Worker Deployment versioning from settings, and the rollout trade-off it documents: with a new current
version, a pinned session stays on the version it started on, an auto-upgrade one moves at its next task."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Literal

import pytest
from temporalio.api.enums.v1 import RoutingConfigUpdateState
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from agent_tools._client import AgentToolsClient, SessionHandle
from agent_tools._connection import connect
from agent_tools._plugin import AgentToolsPlugin
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools._version import package_version
from agent_tools._worker import build_worker, deployment_config
from tests.support.fixture_types import Script
from tests.support.polling import eventually


def test_no_deployment_name_is_unversioned() -> None:
    assert deployment_config(Settings()) is None


def test_the_version_comes_from_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOLS_DEPLOYMENT_NAME", "agents")
    config = deployment_config(Settings())
    assert config is not None and config.use_worker_versioning
    assert (config.version.deployment_name, config.version.build_id) == ("agents", package_version())
    assert config.default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE
    monkeypatch.setenv("AGENT_TOOLS_DEPLOYMENT_BUILD_ID", "2026-12-03.1")
    monkeypatch.setenv("AGENT_TOOLS_SESSION_VERSIONING", "pinned")
    pinned = deployment_config(Settings())
    assert pinned is not None and pinned.version.build_id == "2026-12-03.1"
    assert pinned.default_versioning_behavior == VersioningBehavior.PINNED


@asynccontextmanager
async def _version(settings: Settings, build_id: str) -> AsyncIterator[Client]:
    """A worker of ``build_id``, made the deployment's current version once the server has seen it poll."""
    settings = settings.model_copy(update={"deployment_build_id": build_id})
    plugin = AgentToolsPlugin(settings)
    client = await connect(settings, plugins=[plugin])
    versioning = deployment_config(settings)
    assert versioning is not None
    name = versioning.version.deployment_name
    async with build_worker(client, plugin, deployment_config=versioning):

        async def made_current() -> bool:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace, deployment_name=name, build_id=build_id
                )
            )
            return True

        await eventually(made_current, timeout=60, ignoring=(RPCError,), what=f"version {build_id} current")

        async def routed() -> bool:
            # The new routing reaches the task queues a moment after the call returns.
            found = await client.workflow_service.describe_worker_deployment(
                DescribeWorkerDeploymentRequest(namespace=client.namespace, deployment_name=name)
            )
            info = found.worker_deployment_info
            done = info.routing_config_update_state == RoutingConfigUpdateState.ROUTING_CONFIG_UPDATE_STATE_COMPLETED
            return done and info.routing_config.current_deployment_version.build_id == build_id

        await eventually(routed, timeout=60, what=f"version {build_id} routed")
        yield client


async def _version_of(handle: SessionHandle) -> tuple[str, int]:
    info = (await handle.workflow.describe()).raw_description.workflow_execution_info.versioning_info
    return info.deployment_version.build_id, int(info.behavior)


@pytest.mark.parametrize("behavior", ["pinned", "auto_upgrade"])
async def test_a_session_waiting_across_a_rollout(
    temporal_env: WorkflowEnvironment, settings: Settings, script: Script, behavior: Literal["pinned", "auto_upgrade"]
) -> None:
    settings = settings.model_copy(
        update={
            "model": script([{"say": "first"}, {"say": "second"}]),
            "temporal_address": temporal_env.client.service_client.config.target_host,
            "deployment_name": f"agents-{uuid.uuid4().hex[:8]}",
            "session_versioning": behavior,
        }
    )
    expected = VersioningBehavior.PINNED if behavior == "pinned" else VersioningBehavior.AUTO_UPGRADE
    async with _version(settings, "v1") as v1:
        client = AgentToolsClient(v1, settings)
        handle = await client.start_session("hello", keep_alive=True)
        await eventually(handle.status, until=lambda s: s.status == SessionStatus.idle, timeout=60, what="idle")
        assert await _version_of(handle) == ("v1", int(expected))
        async with _version(settings, "v2"):
            await handle.send("again")
            await eventually(
                handle.latest_message, until=lambda m: m.content == "second", timeout=60, what="the second turn"
            )
            # Pinned: v1's workers took the turn and must run until the session ends. Auto-upgrade: v2 did.
            assert await _version_of(handle) == ("v1" if behavior == "pinned" else "v2", int(expected))
            await handle.stop("done")
            await handle.result()
