"""The HTTP service's metrics at AGENT_TOOLS_SERVICE__METRICS_BIND, against a real dev server: its requests
counted by route template, method and status, its open event streams, and the Temporal client's own; paths
and methods a client makes up never make new series."""

from __future__ import annotations

import asyncio
import socket

import pytest
from pydantic import ValidationError
from temporalio.testing import WorkflowEnvironment

from agent_tools._errors import ConfigurationError
from agent_tools._service import metrics
from agent_tools._service.app import create_app
from agent_tools._settings import Settings
from agent_tools.contracts._service import ServiceSettings
from tests.support.asgi import served
from tests.support.metrics import scrape, total
from tests.support.polling import eventually
from tests.support.session_api import FULL, KEYS, auth

EVENTS = "/sessions/{session_id}/events"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _app(settings: Settings, temporal_env: WorkflowEnvironment, port: int) -> object:
    service = ServiceSettings(api_keys=KEYS, metrics_bind=f"127.0.0.1:{port}", keepalive_seconds=0.5)
    address = temporal_env.client.service_client.config.target_host
    return create_app(settings.model_copy(update={"service": service, "temporal_address": address}), warm=True)


async def test_requests_streams_and_the_temporal_client_are_counted(
    settings: Settings, temporal_env: WorkflowEnvironment
) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    async with served(_app(settings, temporal_env, port), timeout=30) as http:
        assert (await http.get("/healthz")).status_code == 200
        started = await http.post("/sessions", json={"prompt": "hello"}, headers=auth(FULL))
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        assert (await http.get("/sessions", headers={"Authorization": "Bearer nope-nope-nope-nope"})).status_code == 401
        # No worker runs: the stream stays open, sending keep-alives, until the client goes.
        async with http.stream("GET", f"/sessions/{sid}/events", headers=auth(FULL)) as stream:
            assert stream.status_code == 200
            opened = await eventually(
                lambda: scrape(url), until=lambda s: total(s, metrics.HTTP_STREAMS_OPEN, route=EVENTS) == 1,
                timeout=20, what="the open stream counted",
            )  # fmt: skip
        closed = await eventually(
            lambda: scrape(url), until=lambda s: total(s, metrics.HTTP_STREAMS_OPEN, route=EVENTS) == 0,
            timeout=20, what="the closed stream uncounted",
        )  # fmt: skip
    requests = metrics.HTTP_REQUESTS
    assert total(opened, requests, route="/healthz", method="GET", status="200") == 1
    assert total(opened, requests, route="/sessions", method="POST", status="201") == 1
    assert total(opened, requests, route="/sessions", method="GET", status="401") == 1
    assert total(closed, requests, route=EVENTS, method="GET", status="200") == 1
    assert total(closed, f"{metrics.HTTP_REQUEST_SECONDS}_count", route="/sessions", method="POST") == 1
    assert total(closed, "temporal_request", operation="StartWorkflowExecution") >= 1


async def test_made_up_paths_and_methods_make_no_new_series(
    settings: Settings, temporal_env: WorkflowEnvironment
) -> None:
    port = _free_port()
    async with served(_app(settings, temporal_env, port), timeout=30) as http:
        made_up = [f"/{'x' * n}/{n}" for n in range(1, 60)] + ["/%00", "/%ED%A0%80", "/sessions/" + "s" * 5_000]
        for path in made_up:
            await http.get(path)
        for method in ("BREW", "PROPFIND", "M" * 200):
            await http.request(method, "/healthz")
        await asyncio.sleep(0.5)
        samples = await scrape(f"http://127.0.0.1:{port}/metrics")
    ours = [labels for name, labels, _ in samples if name.startswith(metrics.HTTP_REQUESTS)]
    routes = {labels["route"] for labels in ours}
    methods = {labels["method"] for labels in ours}
    assert routes == {"unmatched", "/healthz", "/sessions/{session_id}"}, routes
    assert "other" in methods and methods <= {"GET", "POST", "other"}, methods
    assert all(len(value) < 100 for labels in ours for value in labels.values())


def test_a_metrics_address_that_cannot_be_used_stops_the_start_up() -> None:
    for bad in ("nowhere", "127.0.0.1:99999999999999999999", "127.0.0.1:-1", ":9464", "\x00:1"):
        with pytest.raises(ConfigurationError, match="metrics"):
            create_app(Settings(service=ServiceSettings(metrics_bind=bad)))
    with pytest.raises(ValidationError):
        ServiceSettings(metrics_bind="h" * 10_000 + ":1")
    with pytest.raises(ValidationError):
        ServiceSettings.model_validate({"metrics_bind": ["127.0.0.1", 9464]})


def test_without_a_metrics_address_nothing_is_measured() -> None:
    app = create_app(Settings())
    assert not hasattr(app.state, "metrics_runtime")
    assert all(getattr(m.cls, "__name__", "") != "RequestMetrics" for m in app.user_middleware)
