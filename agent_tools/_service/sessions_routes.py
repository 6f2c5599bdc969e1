"""Session routes: start, list, read, talk to, answer, approve, stop, and follow sessions over HTTP, each a
thin face over :class:`agent_tools._client.AgentToolsClient` and its session handles.

    POST /sessions                               start (scope ``start``)              201
    GET  /sessions                               list: state, agent, root; paged       (``read``)
    GET  /sessions/{id}                          status; its tree's questions, approvals (``read``)
    GET  /sessions/{id}/transcript               the stored transcript, paged          (``read``)
    GET  /sessions/{id}/events                   server-sent progress, resumable       (``read``)
    POST /sessions/{id}/messages                 queue a message                       (``answer``)
    POST /sessions/{id}/answers                  answer askUser questions              (``answer``)
    POST /sessions/{id}/approvals/{approval_id}  approve or deny a tool call           (``answer``)
    POST /sessions/{id}/stop                     stop the session and its sub-agents   (``start``)

Every route needs ``Authorization: Bearer <key>`` of ``settings.service.api_keys``: 401 without a known
key, 403 outside its scopes or agents. Errors are ``{"detail": "..."}``. The events stream's ids are the
cursors of :mod:`agent_tools._progress_resume`: a reconnect with ``Last-Event-ID`` goes on after the last
item it saw. App state a test may inject: ``agent_client`` (AgentToolsClient) or ``temporal`` (a client).
"""

from __future__ import annotations

import asyncio
import hmac
import importlib
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, TypeVar
from urllib.parse import quote

from fastapi import APIRouter, Depends, Header, HTTPException, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field, ValidationError
from temporalio.client import WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agent_tools._boundaries import (
    ID_CHARS,
    LABEL_CHARS,
    MESSAGE_CHARS,
    NOTE_CHARS,
    SCOPE_CHARS,
    clean_text,
    describe_validation_error,
    input_problems,
    model_schema,
)
from agent_tools._errors import ConfigurationError, InvalidInput, SessionError, StoreNotReady
from agent_tools._search_attributes import AGENT_NAME
from agent_tools._service.app_client import app_client
from agent_tools._service.events_routes import ErrorBody, _json_object, _read_body
from agent_tools._service.tree_pending import tree_pending
from agent_tools._session import SendMessage, SendMessageAccepted, SessionOptions, SessionStatus, StatusView
from agent_tools._settings import Settings
from agent_tools.contracts._approvals import ApprovalAccepted, ApprovalRejected, PendingApproval
from agent_tools.contracts._human import AnswerAccepted, AnswerRejected, PendingQuestion
from agent_tools.contracts._output import schema_refusal
from agent_tools.contracts._service import Scope, ServiceKey

if TYPE_CHECKING:
    from agent_tools._client import AgentToolsClient

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

_bearer = HTTPBearer(auto_error=False, description="A key of AGENT_TOOLS_SERVICE__API_KEYS")

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in {
        400: "Malformed JSON, id or cursor",
        401: "Missing or unknown bearer key",
        403: "The key's scopes or agents do not cover this",
        404: "No such session",
        409: "The session refused it (ended, not waiting, already decided)",
        413: "Body larger than the limit",
        422: "Body of the wrong shape or over a limit",
        503: "Temporal or the store cannot be reached",
    }.items()
}


# Requests and responses.


class StartSession(BaseModel):
    """Body of ``POST /sessions``. The memory scope (organisation, project, user) is the key's."""

    prompt: str | None = Field(default=None, max_length=MESSAGE_CHARS, description="The first user message")
    agent: str = Field(default="assistant", min_length=1, max_length=SCOPE_CHARS)
    session_id: str | None = Field(default=None, min_length=1, max_length=ID_CHARS, description="Else a new id")
    title: str | None = Field(default=None, max_length=LABEL_CHARS)
    model: str | None = Field(default=None, max_length=LABEL_CHARS, examples=["openai:gpt-4.1-mini"])
    tools: list[Annotated[str, Field(max_length=LABEL_CHARS)]] | None = Field(default=None, max_length=500)
    max_steps: int | None = Field(default=None, ge=1, le=500)
    keep_alive: bool = Field(default=False, description="A chat: wait for the next message after each answer")
    options: SessionOptions = Field(default_factory=SessionOptions)
    output_schema: dict[str, Any] | None = Field(default=None, description="JSON Schema of the structured result")


class SessionLinks(BaseModel):
    self: str
    events: str
    transcript: str
    messages: str
    answers: str
    stop: str


def _links(session_id: str) -> SessionLinks:
    """The session's routes, its id percent-encoded (a header holds Latin-1 only; a sub-agent's ``/`` stays)."""
    base = f"/sessions/{quote(session_id, safe='/')}"
    return SessionLinks(
        self=base,
        events=f"{base}/events",
        transcript=f"{base}/transcript",
        messages=f"{base}/messages",
        answers=f"{base}/answers",
        stop=f"{base}/stop",
    )


class SessionStarted(BaseModel):
    session_id: str
    links: SessionLinks


class SessionListItem(BaseModel):
    session_id: str
    agent: str | None
    state: str | None
    title: str | None
    root_id: str | None
    parent_id: str | None
    depth: int | None
    status: str = Field(description="Temporal's execution status: RUNNING, COMPLETED, ...")
    start_time: str | None


class SessionPage(BaseModel):
    sessions: list[SessionListItem]
    next_offset: int | None = Field(description="Pass as offset for the next page; null on the last")


class TreeQuestion(PendingQuestion):
    session_id: str = Field(description="The session that asked: this one or a sub-agent; answer it there")


class TreeApproval(PendingApproval):
    session_id: str = Field(description="The session whose call waits: this one or a sub-agent; decide it there")


class SessionView(BaseModel):
    """A session now: its status (usage included), what it and its running sub-agents wait on, and where to
    go from here."""

    status: StatusView
    pending_questions: list[TreeQuestion]
    pending_approvals: list[TreeApproval]
    links: SessionLinks


class TranscriptItem(BaseModel):
    seq: int
    role: str
    content: str
    name: str | None
    tool_calls: list[dict[str, Any]]
    artifact_ref: str | None
    created_at: str


class TranscriptPage(BaseModel):
    entries: list[TranscriptItem]
    next_offset: int | None


class MessageIn(BaseModel):
    content: str = Field(min_length=1, max_length=MESSAGE_CHARS)


class AnswersIn(BaseModel):
    """The answers: ``{"answers": [{"question": ..., "selected": [...], "other": ...}]}`` or the friendly
    ``{"<question or header>": "<label>" | ["<label>", ...] | {"other": "<text>"}}``."""

    model_config = {"extra": "allow"}


class DecisionIn(BaseModel):
    approve: bool
    digest: str | None = Field(
        default=None, min_length=1, max_length=200, description="The digest you were shown; required to approve"
    )
    reason: str | None = Field(default=None, max_length=NOTE_CHARS)


class StopIn(BaseModel):
    reason: str = Field(default="stopped over HTTP", max_length=NOTE_CHARS)


class StopAccepted(BaseModel):
    session_id: str
    stopping: bool = True


class StreamItem(BaseModel):
    """The data of one server-sent event (its ``id`` is the cursor to resume after it)."""

    kind: str = Field(description="text_delta, tool_started, tool_finished, todos, question, approval, ...")
    session_id: str = Field(description="The root or one of its sub-agents")
    offset: int = Field(description="The item's offset in its session's progress stream")
    data: dict[str, Any]


class StreamEnd(BaseModel):
    """The data of the last event (``event: end``): the session has ended; do not reconnect."""

    session_id: str
    status: str


_REF = "#/components/schemas/{model}"
_BODIES: tuple[type[BaseModel], ...] = (StartSession, MessageIn, AnswersIn, DecisionIn, StopIn)


def openapi_components() -> dict[str, Any]:
    """The request bodies' schemas (the routes read their bodies themselves, within limits, so FastAPI does
    not see them): the app adds these to its OpenAPI components."""
    found: dict[str, Any] = {}
    for model in _BODIES:
        schema = model.model_json_schema(ref_template=_REF)
        found.update(schema.pop("$defs", {}))
        found[model.__name__] = schema
    return found


def _body_schema(model: type[BaseModel], description: str) -> dict[str, Any]:
    ref = {"$ref": _REF.format(model=model.__name__)}
    return {
        "requestBody": {"required": True, "description": description, "content": {"application/json": {"schema": ref}}}
    }


# The parts every route shares.


class _Sessions:
    def __init__(self, settings: Settings, state: Any) -> None:
        self.settings, self.cfg, self.state = settings, settings.service, state

    async def client(self) -> AgentToolsClient:
        return await app_client(self.state, self.settings)

    async def warm(self) -> None:
        """Load and build what the first request would, and connect to Temporal, so that it answers as fast
        as the rest. A connection that fails is left for the requests to try again."""
        # The start path: the streams' modules load with the app's routers, the client's with the client.
        importlib.import_module("agent_tools._session_start")
        from agent_tools._session import SessionRequest
        from agent_tools.contracts._approvals import ApprovalDecision
        from agent_tools.contracts._human import AnswerQuestions

        for model in (
            StartSession,
            MessageIn,
            DecisionIn,
            SendMessage,
            SessionRequest,
            AnswerQuestions,
            ApprovalDecision,
        ):
            model_schema(model)  # the limits checked before anything is sent
        try:
            await self.client()
        except HTTPException:  # Temporal away: logged, and each request tries again
            pass

    def key_for(self, credentials: HTTPAuthorizationCredentials | None) -> ServiceKey:
        """The configured key of the bearer token, compared in constant time against every key."""
        keys = self.cfg.api_keys
        if not keys:
            raise HTTPException(401, "no API keys are configured for the session routes", headers=_CHALLENGE)
        if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
            raise HTTPException(401, "missing bearer key (Authorization: Bearer <key>)", headers=_CHALLENGE)
        token = credentials.credentials.encode("utf-8", "replace")
        found: ServiceKey | None = None
        for key in keys:
            if hmac.compare_digest(token, key.key.get_secret_value().encode()):
                found = key
        if found is None:
            raise HTTPException(401, "unknown bearer key", headers=_CHALLENGE)
        return found

    async def body(self, request: Request, model: type[M]) -> M:
        raw = await _read_body(request, self.cfg.max_body_bytes)
        try:
            parsed = model.model_validate(_json_object(raw))
        except ValidationError as exc:
            raise HTTPException(422, describe_validation_error(exc, whole="(body)")) from None
        problem = input_problems(parsed)
        if problem is not None:
            raise HTTPException(422, f"the body cannot be sent to a session: {problem}")
        return parsed

    async def call(self, call: Coroutine[Any, Any, T]) -> T:
        """A client call's result, or the HTTP answer its refusal is; 503 when no worker answers in time (a
        query or an update needs one)."""
        limit = self.cfg.call_timeout_seconds
        try:
            return await _answered(asyncio.wait_for(call, limit))
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):  # an update cut short says the latter
            raise HTTPException(
                503, f"the session did not answer within {limit:g} s: is a worker running on its task queue?"
            ) from None

    async def may_use(self, key: ServiceKey, session_id: str) -> None:
        """That the session exists and the key may see its agent (404, 403 otherwise), from the server alone:
        a status query would wait on the worker, behind every workflow task it has queued. The agent is
        the run's AgentName search attribute; a session started without it is asked by query."""
        client = await self.client()
        description = await self.call(client.session(session_id).workflow.describe())
        if key.agents == "all":
            return
        agent = description.typed_search_attributes.get(AGENT_NAME)
        if agent is None:
            await self.agent_of(key, session_id)
        elif not key.allows_agent(agent):
            raise HTTPException(403, f"this key may not use sessions of agent {agent!r}")

    async def agent_of(self, key: ServiceKey, session_id: str) -> StatusView:
        """The session's status, once the key may see its agent (403 otherwise, 404 for no session)."""
        client = await self.client()
        status: StatusView = await self.call(client.session(session_id).status())
        if not key.allows_agent(status.agent):
            raise HTTPException(403, f"this key may not use sessions of agent {status.agent!r}")
        return status


_CHALLENGE = {"WWW-Authenticate": "Bearer"}


def _session_id(session_id: str) -> str:
    if len(session_id) > ID_CHARS or clean_text(session_id) != session_id or not session_id.strip():
        raise HTTPException(400, f"a session id is 1 to {ID_CHARS} characters of text, got {session_id[:80]!r}")
    return session_id


async def _answered(call: Coroutine[Any, Any, T]) -> T:
    """A client call's result; its refusals as the HTTP answers they are."""
    try:
        return await call
    except (AnswerRejected, ApprovalRejected) as exc:
        raise HTTPException(422, str(exc)) from None
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
        raise HTTPException(409, f"the session refused it: {reason}") from None
    except SessionError as exc:
        text = str(exc)
        raise HTTPException(404 if "no session" in text or "not found" in text.lower() else 409, text) from None
    except StoreNotReady as exc:
        raise HTTPException(503, str(exc)) from None
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from None
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise HTTPException(404, f"no such session ({exc.message})") from None
        raise HTTPException(503, f"Temporal refused the call ({exc.status.name}): {exc.message}") from None


def _sse(event: str | None, data: str, event_id: str | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    kind = f"event: {event}\n" if event is not None else ""
    return f"{head}{kind}data: {data}\n\n"


def _require(scope: Scope) -> Callable[..., ServiceKey]:
    """A dependency: the request's key, once it is known and holds ``scope``."""

    def dependency(
        request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
    ) -> ServiceKey:
        key = _shared(request).key_for(credentials)
        if scope not in key.scopes:
            raise HTTPException(403, f"this key's scopes ({', '.join(key.scopes) or 'none'}) do not include {scope!r}")
        return key

    return dependency


def _shared(request: Request) -> _Sessions:
    shared: _Sessions = request.app.state.session_routes
    return shared


Reader = Annotated[ServiceKey, Depends(_require("read"))]
Answerer = Annotated[ServiceKey, Depends(_require("answer"))]
Starter = Annotated[ServiceKey, Depends(_require("start"))]
SessionId = Annotated[str, Path(description="A session id (a sub-agent's holds a /)")]

# The routes in the order they are matched: a path with a suffix before the bare ``/{session_id}``, whose
# id may hold a ``/`` (a sub-agent's).
_ROUTES: list[tuple[str, str, Callable[..., Any], dict[str, Any]]] = []


def _route(method: str, path: str, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _ROUTES.append((method, path, fn, options))
        return fn

    return register


def build_router(settings: Settings, state: Any) -> APIRouter:
    """The ``/sessions`` routes over the app's ``state``; their settings are ``settings.service``."""
    problem = settings.service.key_problems()
    if problem is not None:
        raise ConfigurationError(f"AGENT_TOOLS_SERVICE__API_KEYS: {problem}")
    state.session_routes = _Sessions(settings, state)
    router = APIRouter(prefix="/sessions", tags=["sessions"], responses=_ERRORS)
    for method, path, fn, options in _ROUTES:
        router.add_api_route(path, fn, methods=[method], **options)
    return router


@_route(
    "POST",
    "",
    status_code=201,
    response_model=SessionStarted,
    openapi_extra=_body_schema(StartSession, "What to run"),
    summary="Start a session",
)
async def start(request: Request, response: Response, key: Starter) -> SessionStarted:
    body = await _shared(request).body(request, StartSession)
    if not key.allows_agent(body.agent):
        raise HTTPException(403, f"this key may not start sessions of agent {body.agent!r}")
    refusal = schema_refusal(body.output_schema) if body.output_schema is not None else None
    if refusal is not None:
        raise HTTPException(422, refusal)
    client = await _shared(request).client()
    try:
        handle = await _shared(request).call(
            client.start_session(
                body.prompt,
                session_id=body.session_id,
                agent=body.agent,
                organisation=key.organisation,
                project=key.project,
                user=key.user,
                title=body.title,
                model=body.model,
                tools=body.tools,
                max_steps=body.max_steps,
                keep_alive=body.keep_alive,
                options=body.options,
                output_schema=body.output_schema,
            )
        )
    except ValidationError as exc:
        raise HTTPException(422, describe_validation_error(exc, whole="(body)")) from None
    links = _links(handle.id)
    response.headers["Location"] = links.self
    return SessionStarted(session_id=handle.id, links=links)


@_route("GET", "", response_model=SessionPage, summary="List sessions")
async def list_sessions(
    request: Request,
    key: Reader,
    state: Annotated[SessionStatus | None, Query(description="The session's state")] = None,
    agent: Annotated[str | None, Query(min_length=1, max_length=SCOPE_CHARS)] = None,
    root: Annotated[str | None, Query(min_length=1, max_length=ID_CHARS, description="The tree's root id")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=10_000)] = 0,
) -> SessionPage:
    if key.agents != "all":
        if agent is None and len(key.agents) == 1:
            agent = key.agents[0]
        elif agent is None:
            raise HTTPException(403, "this key may list only its agents' sessions: pass agent=<one of them>")
    if not key.allows_agent(agent):
        raise HTTPException(403, f"this key may not read sessions of agent {agent!r}")
    for value in (agent, root):
        if value is not None and clean_text(value) != value:
            raise HTTPException(400, f"a filter holds characters no session id or agent has: {value[:80]!r}")
    client = await _shared(request).client()
    found = await _shared(request).call(
        client.list_sessions(agent=agent, root_id=root, state=state.value if state else None, limit=offset + limit + 1)
    )
    page = found[offset : offset + limit]
    return SessionPage(
        sessions=[
            SessionListItem(
                session_id=s.session_id,
                agent=s.agent,
                state=s.state,
                title=s.title,
                root_id=s.root_id,
                parent_id=s.parent_id,
                depth=s.depth,
                status=s.status,
                start_time=s.start_time.isoformat() if s.start_time else None,
            )
            for s in page
        ],
        next_offset=offset + limit if len(found) > offset + limit else None,
    )


@_route("GET", "/{session_id:path}/transcript", response_model=TranscriptPage, summary="The stored transcript")
async def transcript(
    request: Request,
    session_id: SessionId,
    key: Reader,
    offset: Annotated[int, Query(ge=0, le=10**9)] = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
) -> TranscriptPage:
    sid = _session_id(session_id)
    await _shared(request).may_use(key, sid)
    client = await _shared(request).client()
    entries = await _shared(request).call(client.session(sid).transcript(offset, limit + 1))
    return TranscriptPage(
        entries=[
            TranscriptItem(
                seq=e.seq,
                role=e.role,
                content=e.content,
                name=e.name,
                tool_calls=e.tool_calls,
                artifact_ref=e.artifact_ref,
                created_at=e.created_at.isoformat(),
            )
            for e in entries[:limit]
        ],
        next_offset=offset + limit if len(entries) > limit else None,
    )


@_route(
    "GET",
    "/{session_id:path}/events",
    response_class=StreamingResponse,
    summary="Follow the session's progress (server-sent events)",
    responses={
        200: {
            "model": StreamItem,
            "description": "text/event-stream: each event's data a StreamItem and its id the cursor to resume "
            "after it; a last `event: end` (StreamEnd) when the session has ended; `: keep-alive` "
            "comments while idle",
            "content": {"text/event-stream": {"schema": {"$ref": "#/components/schemas/StreamItem"}}},
        },
        "default": {"model": StreamEnd, "description": "The data of the last event, `end`"},
    },
)
async def events(
    request: Request,
    session_id: SessionId,
    key: Reader,
    last_event_id: Annotated[
        str | None, Header(alias="Last-Event-ID", description="The id of the last event seen: go on after it")
    ] = None,
    cursor: Annotated[
        str | None, Query(max_length=8192, description="As Last-Event-ID, for clients that cannot set it")
    ] = None,
) -> StreamingResponse:
    from agent_tools._progress_resume import CursorRefused, ProgressCursor

    sid = _session_id(session_id)
    resume = last_event_id or cursor
    if resume is not None:
        try:
            ProgressCursor.decode(sid, resume)
        except CursorRefused as exc:
            raise HTTPException(400, f"Last-Event-ID refused: {exc}") from None
    await _shared(request).may_use(key, sid)
    client = await _shared(request).client()
    handle = client.session(sid)
    stream = _event_stream(handle, resume, _shared(request).cfg.keepalive_seconds, _shared(request).cfg.poll_seconds)
    return StreamingResponse(
        stream,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


@_route(
    "POST",
    "/{session_id:path}/messages",
    response_model=SendMessageAccepted,
    openapi_extra=_body_schema(MessageIn, "A user message"),
    summary="Send a message",
)
async def message(session_id: SessionId, request: Request, key: Answerer) -> SendMessageAccepted:
    sid = _session_id(session_id)
    body = await _shared(request).body(request, MessageIn)
    if input_problems(SendMessage(content=body.content)) is not None:
        raise HTTPException(422, "the message is over the limit of what one message may hold")
    await _shared(request).may_use(key, sid)
    client = await _shared(request).client()
    accepted: SendMessageAccepted = await _shared(request).call(client.session(sid).send(body.content))
    return accepted


@_route(
    "POST",
    "/{session_id:path}/answers",
    response_model=AnswerAccepted,
    openapi_extra=_body_schema(AnswersIn, "Answers to the pending askUser questions"),
    summary="Answer the session's questions",
)
async def answers(session_id: SessionId, request: Request, key: Answerer) -> AnswerAccepted:
    sid = _session_id(session_id)
    raw = await _read_body(request, _shared(request).cfg.max_body_bytes)
    payload = _json_object(raw)
    await _shared(request).may_use(key, sid)
    client = await _shared(request).client()
    from agent_tools.contracts._human import parse_answer_payload

    try:
        parsed = parse_answer_payload(payload)
    except AnswerRejected as exc:
        raise HTTPException(422, str(exc)) from None
    parsed = parsed.model_copy(update={"answered_by": key.name})
    accepted = await _shared(request).call(client.session(sid).answer_questions(parsed))
    assert accepted is not None
    return accepted


@_route(
    "POST",
    "/{session_id:path}/approvals/{approval_id}",
    response_model=ApprovalAccepted,
    openapi_extra=_body_schema(DecisionIn, "Approve (with the digest shown) or deny"),
    summary="Decide a pending tool call",
)
async def decide(session_id: SessionId, approval_id: str, request: Request, key: Answerer) -> ApprovalAccepted:
    sid = _session_id(session_id)
    if len(approval_id) > LABEL_CHARS or clean_text(approval_id) != approval_id:
        raise HTTPException(400, f"malformed approval id {approval_id[:80]!r}")
    body = await _shared(request).body(request, DecisionIn)
    await _shared(request).may_use(key, sid)
    client = await _shared(request).client()
    accepted = await _shared(request).call(
        client.session(sid).decide_approval(
            approval_id, approve=body.approve, digest=body.digest, reason=body.reason, decided_by=key.name
        )
    )
    assert accepted is not None
    return accepted


@_route(
    "POST",
    "/{session_id:path}/stop",
    status_code=202,
    response_model=StopAccepted,
    openapi_extra=_body_schema(StopIn, "Why (optional)"),
    summary="Stop the session and its sub-agents",
)
async def stop(session_id: SessionId, request: Request, key: Starter) -> StopAccepted:
    sid = _session_id(session_id)
    raw = await _read_body(request, _shared(request).cfg.max_body_bytes)
    try:
        body = StopIn.model_validate(_json_object(raw)) if raw.strip() else StopIn()
    except ValidationError as exc:
        raise HTTPException(422, describe_validation_error(exc, whole="(body)")) from None
    await _shared(request).may_use(key, sid)
    client = await _shared(request).client()
    await _shared(request).call(client.session(sid).stop(body.reason))
    return StopAccepted(session_id=sid)


@_route("GET", "/{session_id:path}", response_model=SessionView, summary="A session's status and what it waits on")
async def get_session(request: Request, session_id: SessionId, key: Reader) -> SessionView:
    sid = _session_id(session_id)
    status = await _shared(request).agent_of(key, sid)
    client = await _shared(request).client()
    pending = await tree_pending(client, sid, _shared(request).call)
    return SessionView(
        status=status,
        pending_questions=[TreeQuestion(**q.model_dump(), session_id=owner) for owner, q in pending.questions],
        pending_approvals=[TreeApproval(**a.model_dump(), session_id=owner) for owner, a in pending.approvals],
        links=_links(sid),
    )


async def _event_stream(handle: Any, resume: str | None, keepalive: float, poll: float) -> AsyncIterator[str]:
    """The SSE text of the session's tree from ``resume`` on: an event per item, a comment while idle, and
    ``end`` once the root's stream has ended."""
    from agent_tools._service.follow import follow

    yield "retry: 1000\n\n"
    try:
        async for items in follow(handle, resume, poll=poll, keepalive=keepalive):
            if items is None:
                yield ": keep-alive\n\n"
                continue
            yield "".join(
                _sse(
                    None,
                    StreamItem(
                        kind=i.event.kind, session_id=i.event.session_id, offset=i.offset, data=i.event.data
                    ).model_dump_json(),
                    i.cursor,
                )
                for i in items
            )
    except Exception as exc:  # the reader gets it as the stream's last event
        yield _sse("error", json.dumps({"detail": f"the stream stopped: {type(exc).__name__}: {exc}"}))
        return
    status = await _final_status(handle)
    yield _sse("end", StreamEnd(session_id=handle.id, status=status).model_dump_json())


async def _final_status(handle: Any) -> str:
    try:
        description = await handle.workflow.describe()
        return str(description.status.name) if description.status else "UNKNOWN"
    except RPCError:
        return "UNKNOWN"
