"""Standalone web endpoints: ``POST /v1/tools/search``, ``POST /v1/tools/fetch``, ``POST /v1/research``,
``GET /v1/research/{id}``.

Bearer keys come from ``api_keys`` (see :mod:`agent_tools.contracts._web.config`) or ``state.api_keys``; with no key
configured every call is refused (401), so a fresh deployment is never an open proxy. Each key has
per-minute and per-hour request limits (``X-RateLimit-*`` headers on every answer, ``429
rate_limit_exceeded`` past them). Errors use one envelope::

    {"error": {"type": "invalid_request_error", "code": "bad_request", "message": "...", "details": {...}}}

State the app may carry (tests inject them): ``web`` (a WebService), ``agent_client`` (AgentToolsClient) or
``temporal`` (temporalio Client), ``api_keys``, ``web_rate_limiter``.
"""

from __future__ import annotations

import asyncio
import hmac
import math
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import Field
from starlette.exceptions import HTTPException

from agent_tools._boundaries import describe_validation_error
from agent_tools._errors import AgentToolsError, WebError
from agent_tools._service.auth import bearer_token
from agent_tools._settings import Settings
from agent_tools._web_client import ResearchClient, search_with
from agent_tools.contracts._web import models as web_models

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "server_error",
    503: "server_error",
}


def error_response(
    status: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {"type": ERROR_TYPES.get(status, "server_error"), "code": code, "message": message}
    if details:
        body["details"] = details
    return JSONResponse({"error": body}, status_code=status, headers=headers)


class ResearchCreate(web_models.ResearchRequest):
    wait_s: float = Field(default=0, ge=0, le=55, description="Wait this long before answering 202 with a running job")


@dataclass
class _Window:
    start: float = 0.0
    count: int = 0


@dataclass
class RateLimiter:
    """Fixed windows per key: a minute and an hour. In-process; a multi-process deployment divides the
    limits by its process count or puts the limit in front (a gateway)."""

    per_minute: int = 60
    per_hour: int = 1000
    clock: Callable[[], float] = time.time
    _windows: dict[tuple[str, int], _Window] = field(default_factory=dict)

    def hit(self, key: str) -> tuple[bool, dict[str, str]]:
        now = self.clock()
        verdicts: list[tuple[bool, int, int, float, int]] = []
        for span, limit in ((60, self.per_minute), (3600, self.per_hour)):
            window = self._windows.setdefault((key, span), _Window(start=now))
            if now - window.start >= span:
                window.start, window.count = now, 0
            verdicts.append((window.count < limit, limit, window.count, window.start + span - now, span))
        allowed = all(v[0] for v in verdicts)
        if allowed:
            for span in (60, 3600):
                self._windows[(key, span)].count += 1
        (_, m_limit, m_count, m_reset, _), (_, h_limit, h_count, h_reset, _) = verdicts
        used = 1 if allowed else 0
        headers = {
            "X-RateLimit-Limit": str(m_limit),
            "X-RateLimit-Remaining": str(max(0, m_limit - m_count - used)),
            "X-RateLimit-Reset": str(math.ceil(m_reset)),
            "X-RateLimit-Limit-Hour": str(h_limit),
            "X-RateLimit-Remaining-Hour": str(max(0, h_limit - h_count - used)),
            "X-RateLimit-Reset-Hour": str(math.ceil(h_reset)),
        }
        if not allowed:
            blocked = [v for v in verdicts if not v[0]]
            headers["Retry-After"] = str(math.ceil(max(v[3] for v in blocked)))
        return allowed, headers


class Refusal(AgentToolsError):
    """An answer in this API's error envelope, raised from a dependency or a route."""

    def __init__(self, status: int, code: str, message: str, *, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _envelope_route(authorize: Callable[[Request], dict[str, str]]) -> type[APIRoute]:
    """A route class that authorises first (a body is read only for a known key within its limits) and puts
    every answer in this API's envelope with the caller's rate-limit headers: body validation failures are
    ``400 bad_request`` (FastAPI's default is 422), a :class:`Refusal` is its own status, a ``WebError`` the
    contract's code and status."""

    class EnvelopeRoute(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
            handler = super().get_route_handler()

            async def route(request: Request) -> Response:
                rate: dict[str, str] = {}
                try:
                    rate = authorize(request)
                    response = await handler(request)
                except RequestValidationError as exc:
                    problems = describe_validation_error(exc.errors(), whole="(body)", skip=("body",))
                    return error_response(400, "bad_request", f"invalid request: {problems}", headers=rate)
                except HTTPException as exc:  # Starlette's, as FastAPI raises it for a body it cannot parse
                    return error_response(
                        exc.status_code, "bad_request", f"invalid request: {exc.detail}", headers=rate
                    )
                except Refusal as exc:
                    return error_response(exc.status, exc.code, exc.message, headers={**rate, **exc.headers})
                except WebError as exc:
                    return error_response(exc.http_status, exc.code, exc.message, exc.details, headers=rate)
                response.headers.update(rate)
                return response

            return route

    return EnvelopeRoute


class _Shared:
    """What the routes share through the app's state, each made on first use: the rate limiter, the web
    engine and the research client (a test injects its own as ``web_rate_limiter``, ``web``, ``agent_client``
    or ``temporal``)."""

    def __init__(self, settings: Settings, state: Any) -> None:
        self.settings, self.config, self.state = settings, settings.web, state
        self.lock = asyncio.Lock()

    def limiter(self) -> RateLimiter:
        existing = getattr(self.state, "web_rate_limiter", None)
        if existing is None:
            existing = RateLimiter(per_minute=self.config.rate_per_minute, per_hour=self.config.rate_per_hour)
            self.state.web_rate_limiter = existing
        assert isinstance(existing, RateLimiter)
        return existing

    def authorize(self, request: Request) -> dict[str, str]:
        """A known bearer key within its rate limits: its rate-limit headers, or a Refusal."""
        keys = set(getattr(self.state, "api_keys", None) or self.config.api_keys)
        token = bearer_token(request.headers.get("authorization")) or ""
        if not keys:
            raise Refusal(401, "unauthorized", "no API keys are configured for this service")
        # Constant-time comparison, like the event ingress's project tokens: no timing hint about a key.
        if not any(hmac.compare_digest(token.encode(), key.encode()) for key in keys):
            raise Refusal(401, "unauthorized", "missing or unknown bearer key", headers={"WWW-Authenticate": "Bearer"})
        allowed, headers = self.limiter().hit(token)
        if not allowed:
            raise Refusal(
                429,
                "rate_limit_exceeded",
                f"rate limit exceeded for this key; retry after {headers['Retry-After']} s",
                headers=headers,
            )
        return headers

    async def web(self) -> Any:
        existing = getattr(self.state, "web", None)
        if existing is not None:
            return existing
        async with self.lock:
            if getattr(self.state, "web", None) is None:
                from agent_tools._service.app_client import app_store
                from agent_tools._web.service import WebService

                store = await app_store(self.state, self.settings).get()
                self.state.web = WebService(self.config, store)
        return self.state.web

    async def research_client(self) -> ResearchClient:
        from agent_tools._service.app_client import app_client

        return ResearchClient(await app_client(self.state, self.settings))


def build_router(settings: Settings, state: Any) -> APIRouter:
    """The ``/v1/tools`` and ``/v1/research`` routes over the app's ``state``."""
    shared = _Shared(settings, state)
    web, research_client = shared.web, shared.research_client
    router = APIRouter(prefix="/v1", tags=["web tools"], route_class=_envelope_route(shared.authorize))

    @router.post(
        "/tools/search",
        response_model=web_models.SearchResponse,
        summary="Verified web search",
        responses={400: {}, 401: {}, 429: {}, 503: {"description": "search_unavailable"}},
    )
    async def search(body: web_models.WebSearchArgs) -> Any:
        return await search_with(await web(), body)

    @router.post(
        "/tools/fetch",
        response_model=web_models.FetchResponse,
        summary="One page as clean Markdown",
        responses={400: {}, 401: {}, 429: {}, 502: {"description": "upstream_error"}},
    )
    async def fetch(body: web_models.WebFetchArgs) -> Any:
        return await (await web()).web_fetch(body)

    @router.post(
        "/research",
        response_model=web_models.ResearchJob,
        status_code=202,
        summary="Start a deep_research job",
        responses={200: {"model": web_models.ResearchJob}, 400: {}, 401: {}, 429: {}},
    )
    async def create_research(body: ResearchCreate, response: Response) -> Any:
        client = await research_client()
        try:
            job = await client.create(web_models.ResearchRequest.model_validate(body.model_dump(exclude={"wait_s"})))
        except ValueError as exc:
            raise Refusal(400, "bad_request", str(exc)) from exc
        if body.wait_s > 0:
            job = await client.wait(job.id, timeout_s=body.wait_s)
        if job.status != "running":
            response.status_code = 200
        return job

    @router.get(
        "/research/{job_id}",
        response_model=web_models.ResearchJob,
        summary="A deep_research job's state",
        responses={401: {}, 404: {}, 429: {}},
    )
    async def get_research(job_id: str) -> Any:
        from temporalio.service import RPCError, RPCStatusCode

        if not job_id.startswith("research-"):
            raise Refusal(404, "not_found", f"no research job {job_id!r}")
        client = await research_client()
        try:
            return await client.retrieve(job_id)
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                raise Refusal(404, "not_found", f"no research job {job_id!r}") from exc
            raise

    return router
