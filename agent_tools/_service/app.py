"""ASGI app factory: the events ingress, the web tools' endpoints, the session routes and AG-UI, each a router of its
capability. Cross-origin browsers may call only from ``settings.service.cors_origins`` (none by default).

uvicorn --factory agent_tools._service.app:create_app
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from agent_tools._boundaries import describe_validation_error
from agent_tools._service import agui_routes, events_routes, sessions_routes, tools_routes
from agent_tools._settings import Settings
from agent_tools._version import package_version

# Modules exporting ``build_router(settings, state) -> fastapi.APIRouter``.
ROUTER_MODULES = (events_routes, tools_routes, sessions_routes, agui_routes)


# What a 422's detail holds at most (one line per problem; a request can have many).
DETAIL_CHARS = 2_000


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """A query, path or header parameter FastAPI refused: one ``{"detail": "<where>: <why>"}`` line, the
    shape of the service's other errors (FastAPI's own is a list). The input itself is never echoed."""
    errors = exc.errors() if isinstance(exc, RequestValidationError) else []
    detail = describe_validation_error(errors, whole="(request)", skip=("body",)) or "invalid request"
    return JSONResponse({"detail": detail[:DETAIL_CHARS]}, status_code=422)


# app.state attributes that routers create on first use and the app must close at shutdown.
LAZY_ENGINES: tuple[str, ...] = ("web",)


class Readiness(BaseModel):
    ready: bool = Field(description="Every check holds")
    checks: dict[str, str] = Field(description='Each check ("temporal", "store"): "ok", or why not')


async def _readiness(app: FastAPI) -> JSONResponse:
    """200 once the service reaches Temporal (its health check) and the store (a query); 503 with each
    check's reason otherwise: a readiness probe's answer."""
    from agent_tools._health import Health
    from agent_tools._service.app_client import app_client

    client = None
    with contextlib.suppress(HTTPException):  # Temporal away: logged, and "not connected yet" below
        client = (await app_client(app.state, app.state.settings)).temporal
    ingress = app.state.event_ingress

    async def ping() -> None:
        await (await ingress.store()).ping()

    ready, checks = await Health(client=client, store_ping=ping, polls=False).readiness()
    return JSONResponse(Readiness(ready=ready, checks=checks).model_dump(), status_code=200 if ready else 503)


# Requests refused before any handler runs (no key, no such route), one into each router: FastAPI builds a
# route's state at its first match, which made a served app's first real request slower than the rest.
_WARM_PATHS = ("/sessions/warm/transcript", "/agui", "/v1/warm", "/warm")


async def _warm(app: FastAPI) -> None:
    """Build at start-up what the first requests would: the session routes' modules, schemas and Temporal
    connection, and FastAPI's route state (by the refused requests above, in-process)."""
    import httpx

    await app.state.session_routes.warm()
    from agent_tools._service.metrics import UNCOUNTED_CLIENT

    transport = httpx.ASGITransport(app=app, client=UNCOUNTED_CLIENT)
    async with httpx.AsyncClient(transport=transport, base_url="http://warm") as http:
        for path in _WARM_PATHS:
            await http.get(path)


def create_app(settings: Settings | None = None, *, warm: bool = False, **state: Any) -> FastAPI:
    """Build the service. ``warm`` connects and loads what the first request needs at start-up (as
    ``agent-tools serve`` does); ``state`` lets tests inject a Temporal client, a store, or clock."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        warming = asyncio.create_task(_warm(app)) if warm else None
        yield
        if warming is not None:
            warming.cancel()
        from agent_tools._service.app_client import close_app_client

        await close_app_client(app.state)
        # Routers create some engines lazily (the web service's HTTP client and store); close those.
        for name in LAZY_ENGINES:
            engine = getattr(app.state, name, None)
            if engine is not None and hasattr(engine, "aclose"):
                await engine.aclose()

    app = FastAPI(title="Durable Agent Tools service", version=package_version(), lifespan=lifespan)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.state.settings = settings
    for key, value in state.items():
        setattr(app.state, key, value)
    for module in ROUTER_MODULES:
        app.include_router(module.build_router(settings, app.state))
    if settings.service.metrics_bind:
        from agent_tools._service.metrics import RequestMetrics
        from agent_tools._worker import metrics_runtime

        # The runtime binds /metrics now, so that a port that cannot be bound stops the start-up.
        app.state.metrics_runtime = metrics_runtime(settings.service.metrics_bind)
        app.add_middleware(RequestMetrics, meter=app.state.metrics_runtime.metric_meter)
    if settings.service.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.service.cors_origins,
            allow_methods=["GET", "POST"],
            allow_headers=["Authorization", "Content-Type", "Last-Event-ID"],
            expose_headers=["Location"],
        )

    base_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's document, with the schemas of the bodies that routes read themselves."""
        schema = base_openapi()
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for module in ROUTER_MODULES:
            extra = getattr(module, "openapi_components", None)
            for name, value in (extra() if extra is not None else {}).items():
                components.setdefault(name, value)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]

    from agent_tools._service import console

    app.include_router(console.build_router())

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get(
        "/readyz",
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Not ready: each check says why"}},
        summary="Whether the service reaches Temporal and the store",
    )
    async def readyz() -> JSONResponse:
        return await _readiness(app)

    return app
