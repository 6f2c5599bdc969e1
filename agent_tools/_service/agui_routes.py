"""``POST /agui``: an AG-UI endpoint over sessions, a thin face over :meth:`SessionHandle.resumable_progress`.

The body is an AG-UI ``RunAgentInput``; its ``threadId`` is the session id. A new thread starts a session
with the last user message as the prompt (scope ``start``; ``forwardedProps.agent`` picks the agent). On a
thread whose session exists, a last ``tool`` message answers the frontend tool call it names (``askUser``
or ``approveToolCall``; scope ``answer``), and a last ``user`` message to an idle chat is sent to it. The
answer is an AG-UI event stream (:mod:`agent_tools._service.agui_events` says what maps to what) that
ends with ``RUN_FINISHED`` once the session ends or waits for a person, ``RUN_ERROR`` if it failed.

The run's state carries ``cursor``: the next run on the thread goes on from there (AG-UI clients send
their state back). Without it, a run reads the thread from its start.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Annotated, Any

from ag_ui.core import (
    PROTOCOL_VERSION,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateSnapshotEvent,
)
from ag_ui.encoder import EventEncoder
from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import ValidationError
from temporalio.client import WorkflowExecutionStatus

from agent_tools._boundaries import MESSAGE_CHARS, clean_json, describe_validation_error
from agent_tools._errors import InvalidInput
from agent_tools._progress_resume import CursorRefused, ProgressCursor
from agent_tools._service.agui_events import APPROVE_TOOL_CALL, ASK_USER, AguiMapper, initial_state
from agent_tools._service.events_routes import _json_object, _read_body
from agent_tools._service.follow import follow
from agent_tools._service.sessions_routes import _ERRORS, _bearer, _final_status, _session_id, _shared
from agent_tools._service.tree_pending import call_id, pending_of, target_of, tree_pending
from agent_tools._session import SessionOptions
from agent_tools._settings import Settings
from agent_tools.contracts._human import AnswerRejected, PendingQuestion, parse_answer_payload
from agent_tools.contracts._service import Scope, ServiceKey

__all__ = ["build_router"]

_APPROVE = frozenset({"approve", "approved", "yes", "allow", "ok"})
_DENY = frozenset({"deny", "denied", "no", "reject", "rejected"})


def build_router(settings: Settings, state: Any) -> APIRouter:
    """``POST /agui``; keys and the session client are the session routes' (registered before it)."""
    router = APIRouter(tags=["agui"], responses=_ERRORS)
    router.add_api_route(
        "/agui",
        run,
        methods=["POST"],
        summary="Run an AG-UI agent on a session thread",
        response_class=StreamingResponse,
        openapi_extra={
            "requestBody": {
                "required": True,
                "description": "An AG-UI RunAgentInput; threadId is the session id",
                "content": {"application/json": {"schema": {"$ref": _REF.format(model="RunAgentInput")}}},
            },
            "responses": {"200": {"description": "AG-UI events", "content": {"text/event-stream": {}}}},
        },
    )
    return router


_REF = "#/components/schemas/AgUi{model}"


def openapi_components() -> dict[str, Any]:
    """RunAgentInput's schema and its parts, named ``AgUi...`` apart from the session routes' models."""
    schema = RunAgentInput.model_json_schema(by_alias=True, ref_template=_REF)
    found = {f"AgUi{name}": value for name, value in schema.pop("$defs", {}).items()}
    found["AgUiRunAgentInput"] = schema
    return found


def _need(key: ServiceKey, scope: Scope) -> None:
    if scope not in key.scopes:
        raise HTTPException(403, f"this key's scopes ({', '.join(key.scopes) or 'none'}) do not include {scope!r}")


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a multimodal one."""
    if isinstance(content, str):
        return content
    return "\n".join(str(getattr(part, "text", "")) for part in content or [] if getattr(part, "type", "") == "text")


async def run(request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> Any:
    shared = _shared(request)
    key = shared.key_for(credentials)
    _need(key, "read")
    raw = await _read_body(request, shared.cfg.max_body_bytes)
    try:
        body = RunAgentInput.model_validate(_json_object(raw))
    except ValidationError as exc:
        problem = describe_validation_error(exc, whole="(body)")
        raise HTTPException(422, f"not an AG-UI RunAgentInput: {problem}") from None
    sid = _session_id(body.thread_id)
    state = body.state if isinstance(body.state, dict) else {}
    cursor = state.get("cursor") if isinstance(state.get("cursor"), str) else None
    if cursor is not None:
        try:
            ProgressCursor.decode(sid, cursor)
        except CursorRefused as exc:
            raise HTTPException(400, f"state.cursor: {exc}") from None
    client = await shared.client()
    handle = client.session(sid)
    last = body.messages[-1] if body.messages else None
    pending: AguiMapper | None = None
    skip_to: str | None = None
    try:
        await shared.may_use(key, sid)
    except HTTPException as exc:
        if exc.status_code != 404:
            raise
        await _start(request, key, body, sid)
        cursor = None
    else:
        if last is not None and last.role == "tool":
            _need(key, "answer")
            skip_to = await _answer(request, key, sid, str(last.tool_call_id), _text(last.content))
        elif last is not None and last.role == "user" and (await shared.call(handle.status())).status == "idle":
            _need(key, "answer")
            text = _text(last.content)
            if not text.strip() or len(text) > MESSAGE_CHARS:
                raise HTTPException(422, f"the last user message must hold 1 to {MESSAGE_CHARS:,} characters")
            await shared.call(handle.send(text))
        else:
            pending = await _pending_calls(request, sid)
    start_state = {**initial_state(), **state, "cursor": cursor}
    return StreamingResponse(
        _run_stream(request, body, handle, start_state, cursor, skip_to if cursor is None else None, pending),
        media_type=EventEncoder().get_content_type(),
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _start(request: Request, key: ServiceKey, body: RunAgentInput, sid: str) -> None:
    _need(key, "start")
    props = body.forwarded_props if isinstance(body.forwarded_props, dict) else {}
    agent = props.get("agent", "assistant")
    if not isinstance(agent, str) or not agent:
        raise HTTPException(422, "forwardedProps.agent must be an agent's name")
    if not key.allows_agent(agent):
        raise HTTPException(403, f"this key may not start sessions of agent {agent!r}")
    users = [m for m in body.messages if m.role == "user"]
    prompt = _text(users[-1].content) if users else ""
    if not prompt.strip() or len(prompt) > MESSAGE_CHARS:
        raise HTTPException(422, f"a new thread needs a last user message of 1 to {MESSAGE_CHARS:,} characters")
    keep_alive = props.get("keepAlive") is True
    try:
        options = SessionOptions.model_validate(props.get("options") or {})
    except ValidationError as exc:
        raise HTTPException(422, describe_validation_error(exc, whole="forwardedProps.options")) from None
    client = await _shared(request).client()
    await _shared(request).call(
        client.start_session(
            prompt,
            session_id=sid,
            agent=agent,
            organisation=key.organisation,
            project=key.project,
            user=key.user,
            keep_alive=keep_alive,
            options=options,
        )
    )


async def _answer(request: Request, key: ServiceKey, sid: str, call: str, content: str) -> str:
    """Answer the pending askUser or approval ``call`` (the root's, or a sub-agent's: the call id names
    which) with the tool message's ``content``, on the handle of the session that asked."""
    shared = _shared(request)
    target, item = target_of(sid, call)
    nothing = HTTPException(
        409, f"no pending {ASK_USER} or {APPROVE_TOOL_CALL} call {call[:80]!r} on this session to answer"
    )
    try:
        pending = await pending_of(await shared.client(), [target], shared.call, strict=target)
    except HTTPException as exc:
        if target == sid or exc.status_code != 404:
            raise
        raise nothing from None  # no such sub-agent: the call names nothing of this thread
    handle = (await shared.client()).session(target)
    asked = pending.asked(target, item)
    if asked:
        payload = _answers(asked, content)
        try:
            parsed = parse_answer_payload(payload).model_copy(update={"answered_by": key.name})
        except AnswerRejected as exc:
            raise HTTPException(422, str(exc)) from None
        await shared.call(handle.answer_questions(parsed))
        return call
    approval = pending.approval(target, item)
    if approval is None:
        raise nothing
    approve, reason, digest = _decision(content)
    await shared.call(
        handle.decide_approval(
            item, approve=approve, digest=digest or approval.digest, reason=reason, decided_by=key.name
        )
    )
    return call


def _json_or(content: str, default: Any) -> Any:
    """The tool message's content as JSON, or ``default`` when it is plain text."""
    try:
        data = json.loads(content)
    except ValueError:
        return default
    except RecursionError:
        raise HTTPException(422, "the tool message's content is JSON nested too deep to be an answer") from None
    try:  # as deep and as clean as a body may be, before a session sees it
        return clean_json(data, what="the tool message's content")
    except InvalidInput as exc:
        raise HTTPException(422, str(exc)) from None


def _answers(asked: list[PendingQuestion], content: str) -> Any:
    """JSON of all answers as given, or plain text: the one pending question's option label or free text."""
    data = _json_or(content, None)
    if isinstance(data, dict):
        return data
    if len(asked) != 1:
        raise HTTPException(
            422, f"{len(asked)} questions are pending on this call: answer with the JSON of all answers"
        )
    question = asked[0]
    text = content.strip()
    label = next((o.label for o in question.options if o.label.casefold() == text.casefold()), None)
    return {question.question: label if label is not None else {"other": text}}


def _decision(content: str) -> tuple[bool, str | None, str | None]:
    """A tool message's decision: ``{"approve": bool, "digest": ..., "reason": ...}`` or a word (approve /
    deny ...): whether to approve, why, and the digest the person was shown (if it says)."""
    data = _json_or(content, content)
    if isinstance(data, dict) and isinstance(data.get("approve"), bool):
        reason, digest = data.get("reason"), data.get("digest")
        return (
            data["approve"],
            reason[:2000] if isinstance(reason, str) else None,
            digest[:200] if isinstance(digest, str) else None,
        )
    word = data.strip().casefold() if isinstance(data, str) else ""
    if word in _APPROVE or word in _DENY:
        return word in _APPROVE, None, None
    raise HTTPException(422, 'an approveToolCall answer is {"approve": true|false, "reason": "..."} or approve / deny')


async def _pending_calls(request: Request, sid: str) -> AguiMapper:
    """The frontend tool calls the session tree waits on now, for a run that answers none of them."""
    shared = _shared(request)
    pending = await tree_pending(await shared.client(), sid, shared.call)
    mapper = AguiMapper(sid)
    by_ask: dict[tuple[str, str], list[PendingQuestion]] = {}
    for owner, q in pending.questions:
        by_ask.setdefault((owner, q.ask_id), []).append(q)
    for (owner, ask_id), asked in by_ask.items():
        shown = [q.model_dump(include={"question", "header", "options", "multiSelect"}) for q in asked]
        mapper.events.extend(mapper.frontend_call(call_id(sid, owner, ask_id), ASK_USER, {"questions": shown}))
    for owner, a in pending.approvals:
        args = {
            "approval_id": a.approval_id,
            "tool": a.tool,
            "arguments": a.arguments_preview,
            "digest": a.digest,
            "deadline": a.deadline,
            "session_id": owner,
        }
        mapper.events.extend(mapper.frontend_call(call_id(sid, owner, a.approval_id), APPROVE_TOOL_CALL, args))
    return mapper


async def _still_waiting(client: Any, root: str, waiting: list[str]) -> list[str]:
    """Which of the calls (and "message": an idle chat) the run paused on the tree still waits for; each
    call is asked of the session it belongs to."""
    sessions = list(dict.fromkeys([root, *(target_of(root, w)[0] for w in waiting if w != "message")]))

    async def plain(call: Any) -> Any:
        return await call

    try:
        # Every session passes through idle on its way to its end: a run that has ended waits for nothing
        # (the server says so; a query would make the worker replay the closed run, and may fail).
        if (await client.session(root).workflow.describe()).status != WorkflowExecutionStatus.RUNNING:
            return []
    except Exception:
        return waiting
    try:
        pending, status = await asyncio.gather(
            pending_of(client, sessions, plain, strict=root), client.session(root).status()
        )
    except Exception:  # no answer now: end the run as waiting; the next run shows what still waits
        return waiting
    open_ids = pending.open_calls(root)
    if status.status == "idle":
        open_ids.add("message")
    return [w for w in waiting if w in open_ids]


async def _run_stream(
    request: Request,
    body: RunAgentInput,
    handle: Any,
    state: dict[str, Any],
    cursor: str | None,
    skip_to: str | None,
    pending: AguiMapper | None,
) -> AsyncIterator[str]:
    """The run's AG-UI events. ``skip_to``: a run without a cursor shows nothing up to that call."""
    encoder = EventEncoder()
    cfg = _shared(request).cfg
    thread, run_id = body.thread_id, body.run_id

    def finished(result: dict[str, Any], calls: list[str]) -> str:
        outcome = RunFinishedSuccessOutcome(pending_tool_call_ids=calls or None)
        return encoder.encode(RunFinishedEvent(thread_id=thread, run_id=run_id, result=result, outcome=outcome))

    yield encoder.encode(RunStartedEvent(thread_id=thread, run_id=run_id, protocol_version=PROTOCOL_VERSION))
    yield encoder.encode(StateSnapshotEvent(snapshot=state))
    mapper = AguiMapper(handle.id)
    if pending is not None and pending.waiting:
        for event in [*pending.events, *pending.finish(cursor)]:
            yield encoder.encode(event)
        yield finished({"status": "waiting", "cursor": cursor}, pending.pending_calls)
        return
    last_cursor = cursor
    try:
        async for items in follow(handle, cursor, poll=cfg.poll_seconds, keepalive=cfg.keepalive_seconds):
            if items is None:
                yield ": keep-alive\n\n"
                continue
            out: list[str] = []  # what the batch makes goes out in one write
            for item in items:
                events = mapper.feed(item.event, item.offset)
                last_cursor = item.cursor
                if skip_to is not None:
                    if skip_to in _calls_of(handle.id, item.event):
                        skip_to = None
                    mapper.waiting.clear()
                    continue
                out.extend(encoder.encode(event) for event in events)
                if mapper.waiting:
                    client = await _shared(request).client()
                    mapper.waiting = await _still_waiting(client, handle.id, mapper.waiting)
                if mapper.waiting:
                    calls = mapper.pending_calls
                    out.extend(encoder.encode(event) for event in mapper.finish(last_cursor))
                    yield "".join([*out, finished({"status": "waiting", "cursor": last_cursor}, calls)])
                    return
            if out:
                yield "".join(out)
    except Exception as exc:  # the run ends with it as RUN_ERROR
        yield encoder.encode(RunErrorEvent(message=f"the stream stopped: {type(exc).__name__}: {exc}", code="stream"))
        return
    status = await _final_status(handle)
    for event in mapper.finish(last_cursor):
        yield encoder.encode(event)
    if status in ("FAILED", "TERMINATED", "TIMED_OUT"):
        yield encoder.encode(RunErrorEvent(message=f"the session ended {status}", code=status))
    else:
        yield finished({"status": status, "cursor": last_cursor}, [])


def _calls_of(root: str, event: Any) -> set[str]:
    """The frontend call ids an item opens or settles."""
    ids = (event.data.get("ask_id"), event.data.get("approval_id"))
    return {call_id(root, event.session_id, str(i)) for i in ids if i}
