"""Event ingress: generic JSON events and signed webhooks, stored before they are acknowledged, then delivered
to the waiting sessions they match (found in the store's ``event_subscriptions`` and claimed there). With
``direct_delivery`` off, each event is also routed to the project's EventRouter with signal-with-start (the
path before the ingress delivered on its own: the router skips the waits claimed here).

    POST /v1/events                 bearer token per project; body {kind, payload, organisation, project, id}
    POST /v1/webhooks/{source}      a configured source: GitHub (X-Hub-Signature-256) or Standard Webhooks

Responses: 202 for a new event, 200 for a repeated delivery id (stored once; delivered again, which a session ignores); 400 malformed
JSON or headers, 401 a bad token or signature or a timestamp outside the window, 403 a token of another
project, 404 an unknown source, 413 a body over the limit, 422 a body of the wrong shape, 503 not delivered
(retry with the same delivery id).

The service is a composition root like ``worker.py``: it opens the SQL store (``agent_tools._store``) itself
unless the app state provides one (``create_app(settings, event_store=..., clock=...)``), and signals
through the app's one Temporal client (:mod:`agent_tools._service.app_client`); its settings are
``settings.events``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from agent_tools._boundaries import MAX_JSON_DEPTH, clean_json, clean_text, describe_validation_error
from agent_tools._errors import InvalidInput
from agent_tools._service.auth import bearer_token
from agent_tools._settings import Settings
from agent_tools.contracts._events.contract import (
    KIND_PATTERN,
    SIGNAL_EVENT,
    EventDelivery,
    EventOrigin,
    EventRecord,
    RouterEvent,
    SessionDelivery,
    github_kind,
    valid_kind,
)
from agent_tools.contracts._events.settings import EventSettings, EventSource
from agent_tools.contracts._events.signatures import SignatureError, verify_github, verify_standard_webhook


class EventIn(BaseModel):
    """Body of ``POST /v1/events``. Organisation and project default to the token's project."""

    kind: str = Field(min_length=1, max_length=200, pattern=KIND_PATTERN, examples=["ci.build.finished"])
    payload: dict[str, Any] = Field(default_factory=dict)
    organisation: str | None = Field(default=None, min_length=1, max_length=100)
    project: str | None = Field(default=None, min_length=1, max_length=100)
    id: str | None = Field(
        default=None, min_length=1, max_length=200, description="The sender's delivery id (idempotency key)"
    )


class EventAccepted(EventOrigin):
    """The answer to a delivery: the event's ids, and whether it was seen before."""

    duplicate: bool = Field(description="The delivery id was seen before: nothing was stored again")


class ErrorBody(BaseModel):
    detail: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in {
        400: "Malformed JSON or a missing header",
        401: "Missing or invalid token, bad signature, or a timestamp outside the window",
        403: "The token belongs to another project",
        404: "Unknown event source",
        413: "Body larger than the limit",
        422: "Body of the wrong shape",
        503: "Not delivered (perhaps stored); retry with the same delivery id",
    }.items()
}


class _Ingress:
    """Lazily opened store and Temporal client, shared by the routes."""

    def __init__(self, settings: Settings, cfg: EventSettings, state: Any) -> None:
        self.settings = settings
        self.cfg = cfg
        self.state = state

    def now(self) -> float:
        clock: Callable[[], float] | None = getattr(self.state, "clock", None)
        return clock() if clock is not None else time.time()

    async def store(self) -> Any:
        """The store the app state was given (tests), else the app's one store."""
        store = getattr(self.state, "event_store", None)
        if store is not None:
            return store
        from agent_tools._service.app_client import app_store

        return await app_store(self.state, self.settings).get()

    async def client(self) -> Any:
        """The Temporal client of the app's one client (:mod:`agent_tools._service.app_client`)."""
        from agent_tools._service.app_client import app_client

        return (await app_client(self.state, self.settings)).temporal

    async def accept(
        self,
        *,
        organisation: str,
        project: str,
        source: str,
        delivery_id: str,
        kind: str,
        payload: dict[str, Any],
        size: int,
        identity: str | None = None,
    ) -> JSONResponse:
        """Store (idempotently), then route; acknowledge only what is stored.

        ``identity`` is what makes two deliveries the same event (the delivery id when omitted).
        """
        from agent_tools._store.event_tables import event_id_for, store_and_claim

        record = EventRecord(
            event_id=event_id_for(organisation, project, source, identity or delivery_id),
            kind=kind,
            organisation=organisation,
            project=project,
            source=source,
            delivery_id=delivery_id,
            received_at=datetime.fromtimestamp(self.now(), UTC),
            payload=payload,
        )
        store = await self.store()
        now = datetime.fromtimestamp(self.now(), UTC)
        # Delivered on every delivery, a repeated one too: if the first attempt stored the event but failed
        # to claim or signal, the sender's retry finds the same claims and signals them; if it did signal, the
        # sessions ignore a repeated delivery (and the router, when it is signalled, a repeated event id).
        # The waits are claimed before any signal goes out, so the router (with direct_delivery off) skips
        # them whichever signal reaches its target first. Stored and claimed in one trip where the store
        # can keep both in one transaction safely (``store_and_claim``).
        try:
            stored, claimed = await store_and_claim(store, record, size=size, now=now)
        except Exception as exc:  # the store unreachable: the sender retries, same delivery id
            raise HTTPException(
                503, f"event not delivered ({type(exc).__name__}: {exc}); retry with the same delivery id"
            ) from exc
        record = stored.record
        try:
            signals = [self.signal_sessions(record, claimed)]
            if not self.cfg.direct_delivery:
                signals.append(self.route(record))
            await asyncio.gather(*signals)
        except Exception as exc:  # the store or Temporal unreachable: the sender retries, same delivery id
            raise HTTPException(
                503,
                f"event {record.event_id} stored but not delivered ({type(exc).__name__}: {exc}); "
                "retry with the same delivery id",
            ) from exc
        body = EventAccepted(
            event_id=record.event_id,
            kind=record.kind,
            organisation=organisation,
            project=project,
            source=source,
            delivery_id=delivery_id,
            duplicate=not stored.created,
        )
        return JSONResponse(body.model_dump(mode="json"), status_code=202 if stored.created else 200)

    async def signal_sessions(self, record: EventRecord, claimed: list[Any]) -> None:
        """Signal ``event_arrived`` to the sessions of the claimed waits, in parallel, as the router's
        delivery does (``signal_sessions``).

        A session that has ended, or whose signal the server refuses for good, is skipped; any other failure
        raises (503): the sender's retry finds the same claims and signals them again.
        """
        if not claimed:
            return
        from agent_tools.activities._events import signal_sessions

        client = await self.client()
        deliveries = EventDelivery.to_waits(record, [c.subscription_id for c in claimed])
        items = [SessionDelivery(session_id=c.session_id, delivery=d) for c, d in zip(claimed, deliveries, strict=True)]
        await signal_sessions(client, items)

    async def route(self, record: EventRecord) -> None:
        from agent_tools.activities._events import signal_router

        event = RouterEvent(
            event_id=record.event_id,
            kind=record.kind,
            source=record.source,
            received_at=record.received_at,
            payload=record.payload,
        )
        await signal_router(
            await self.client(),
            self.cfg,
            record.organisation,
            record.project,
            task_queue=self.settings.task_queue,
            signal=SIGNAL_EVENT,
            arg=event,
        )


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 as soon as it passes the limit (without reading the rest)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"body of {int(declared)} bytes is over the limit of {limit} bytes")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise HTTPException(413, f"body is over the limit of {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _json_object(body: bytes, what: str = "body") -> dict[str, Any]:
    """The body as a JSON object, normalised (NUL bytes and lone surrogates replaced) and never nested deeper
    than the session's decoders take: an event that could not be routed must not be stored at all."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPException(400, f"malformed JSON in the {what}: {exc}") from None
    except RecursionError:
        raise HTTPException(400, f"the {what} is nested deeper than {MAX_JSON_DEPTH} levels") from None
    if not isinstance(data, dict):
        raise HTTPException(400, f"the {what} must be a JSON object, got {type(data).__name__}")
    try:
        cleaned: dict[str, Any] = clean_json(data, what=f"the {what}")
    except InvalidInput as exc:
        raise HTTPException(400, str(exc)) from None
    return cleaned


def _body_schema(model: type[BaseModel] | None, description: str) -> dict[str, Any]:
    schema: dict[str, Any] = model.model_json_schema() if model else {"type": "object"}
    return {
        "requestBody": {
            "required": True,
            "description": description,
            "content": {"application/json": {"schema": schema}},
        }
    }


def build_router(settings: Settings, state: Any) -> APIRouter:
    """The ingress routes. ``state`` is the app state (tests inject ``temporal`` or ``agent_client``,
    ``event_store``, and ``clock`` there); the ingress's own settings are ``settings.events``."""
    cfg = settings.events
    ingress = _Ingress(settings, cfg, state)
    state.event_ingress = ingress  # its store is the one /readyz checks

    router = APIRouter(tags=["events"])

    @router.post(
        "/v1/events",
        status_code=202,
        response_model=EventAccepted,
        responses={200: {"model": EventAccepted, "description": "Repeated delivery id"}, **_ERRORS},
        openapi_extra=_body_schema(EventIn, "A generic JSON event"),
        summary="Publish an event",
    )
    async def post_event(
        request: Request,
        authorization: Annotated[str | None, Header(description="Bearer <project token>")] = None,
        idempotency_key: Annotated[str | None, Header(description="Delivery id, if the body has none")] = None,
    ) -> JSONResponse:
        scope = _authenticate(cfg, authorization)
        raw = await _read_body(request, cfg.max_body_bytes)
        try:
            event = EventIn.model_validate(_json_object(raw))
        except ValidationError as exc:
            raise HTTPException(422, describe_validation_error(exc, whole="(body)")) from None
        organisation = event.organisation or (scope[0] if scope else "default")
        project = event.project or (scope[1] if scope else "default")
        if scope is not None and scope != (organisation, project):
            raise HTTPException(403, f"the token is not valid for {organisation}/{project}")
        return await ingress.accept(
            organisation=organisation,
            project=project,
            source="api",
            delivery_id=clean_text(event.id or idempotency_key or f"auto-{uuid.uuid4()}")[:200],
            kind=event.kind,
            payload=event.payload,
            size=len(raw),
        )

    @router.post(
        "/v1/webhooks/{source}",
        status_code=202,
        response_model=EventAccepted,
        responses={200: {"model": EventAccepted, "description": "Repeated delivery id"}, **_ERRORS},
        openapi_extra=_body_schema(None, "The source's own JSON payload"),
        summary="Receive a signed webhook",
    )
    async def webhook(
        source: str,
        request: Request,
        x_github_event: Annotated[str | None, Header(description="GitHub: the event name")] = None,
        x_github_delivery: Annotated[str | None, Header(description="GitHub: the delivery id")] = None,
        x_hub_signature_256: Annotated[str | None, Header(description="GitHub: sha256=<hmac>")] = None,
        webhook_id: Annotated[str | None, Header(description="HMAC source: the delivery id")] = None,
        webhook_timestamp: Annotated[str | None, Header(description="HMAC source: unix seconds")] = None,
        webhook_signature: Annotated[str | None, Header(description="HMAC source: v1,<base64 hmac>")] = None,
    ) -> JSONResponse:
        src = cfg.sources.get(source)
        if src is None:
            raise HTTPException(404, f"unknown event source {source!r}")
        raw = await _read_body(request, cfg.max_body_bytes)
        if src.type == "github":
            try:
                verify_github(src.secret, raw, x_hub_signature_256)
            except SignatureError as exc:
                raise HTTPException(401, str(exc)) from None
            if not x_github_event or not valid_kind(f"github.{x_github_event}"):
                raise HTTPException(400, "missing or invalid X-GitHub-Event header")
            payload = _github_payload(raw, request.headers.get("content-type", ""))
            kind = github_kind(x_github_event, payload)
            if not valid_kind(kind):
                raise HTTPException(400, f"invalid event kind {kind!r}")
            # GitHub signs the body only (no timestamp, no delivery id): a replay with a new X-GitHub-Delivery
            # header is the same signed body, so the body's digest is the event's identity. GitHub's own
            # redelivery of a lost event still gets through (it was never stored).
            delivery = x_github_delivery or f"sig-{x_hub_signature_256}"
            identity = "sha256:" + hashlib.sha256(raw).hexdigest()
        else:
            try:
                verify_standard_webhook(
                    src.secret,
                    raw,
                    msg_id=webhook_id,
                    timestamp=webhook_timestamp,
                    signature=webhook_signature,
                    now=ingress.now(),
                    tolerance_seconds=cfg.timestamp_tolerance_seconds,
                )
            except SignatureError as exc:
                raise HTTPException(401, str(exc)) from None
            kind, payload = _hmac_event(src, _json_object(raw))
            # Standard Webhooks sign the id with the body and the timestamp: a replay needs the same id (a
            # duplicate) within the tolerance window, and a changed id breaks the signature.
            delivery = str(webhook_id)
            identity = None
        return await ingress.accept(
            organisation=src.organisation,
            project=src.project,
            source=source,
            delivery_id=delivery[:200],
            kind=kind,
            payload=payload,
            size=len(raw),
            identity=identity,
        )

    return router


def _authenticate(cfg: EventSettings, authorization: str | None) -> tuple[str, str] | None:
    """The token's (organisation, project); None only when unauthenticated publishing is switched on."""
    token = bearer_token(authorization)
    if token is None:
        if cfg.allow_unauthenticated:
            return None
        raise HTTPException(
            401,
            "missing bearer token (Authorization: Bearer <project token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    scope = cfg.project_for_token(token)
    if scope is None:
        raise HTTPException(401, "invalid bearer token", headers={"WWW-Authenticate": "Bearer"})
    return scope


def _github_payload(raw: bytes, content_type: str) -> dict[str, Any]:
    if content_type.startswith("application/x-www-form-urlencoded"):
        # GitHub's "form" content type sends the JSON in a `payload` field.
        fields = parse_qs(raw.decode("utf-8", "replace"))
        if "payload" not in fields:
            raise HTTPException(400, "form-encoded GitHub webhook without a payload field")
        return _json_object(fields["payload"][0].encode(), "payload field")
    return _json_object(raw)


def _hmac_event(src: EventSource, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Standard Webhooks body: ``{"type": kind, "data": {...}}`` (``kind``/``payload`` accepted too)."""
    kind = body.get("type", body.get("kind"))
    payload = body.get("data", body.get("payload", {}))
    if not isinstance(kind, str) or not kind:
        raise HTTPException(422, 'the body needs a "type" (or "kind") string')
    if not isinstance(payload, dict):
        raise HTTPException(422, 'the body\'s "data" (or "payload") must be a JSON object')
    if src.kind_prefix:
        kind = f"{src.kind_prefix}.{kind}"
    if not valid_kind(kind):
        raise HTTPException(422, f"invalid event kind {kind!r}: dot-separated letters, digits, _ and -")
    return kind, payload
