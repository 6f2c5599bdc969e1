"""Delegation look-ups that touch the world: model and agent resolution, walking the session tree with
queries, stopping a subtree leaf first, messaging a sub-agent, loading a transcript for a hand-off, and
waiting on a child's result after the parent continued-as-new.

Each activity is a thin shell over a plain async function (tests call those directly). Tree walks use
workflow queries rather than visibility: queries are answered by the sessions themselves, so a child started
a moment ago is never missing (visibility is eventually consistent).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from agent_tools.activities.heartbeat import with_heartbeat
from agent_tools.activities.services import Services, ServicesHolder
from agent_tools.catalog.spec import ToolLevel
from agent_tools.messages import Message
from agent_tools.session import (
    TERMINAL_STATUSES,
    LatestMessageView,
    SendMessage,
    SendMessageAccepted,
    SessionResult,
    StatusView,
    StopRequest,
)
from agent_tools.settings import Settings
from agent_tools.tools.delegation import (
    ACT_AWAIT_SESSION,
    ACT_CHECK_AGENT,
    ACT_HANDOFF_HISTORY,
    ACT_LATEST_MESSAGE,
    ACT_LIST_TREE,
    ACT_PLAN_SPAWN,
    ACT_SEND_MESSAGE,
    ACT_STOP_TREE,
    ROLES,
    STOP_WAIT_SECONDS,
    AwaitSessionInput,
    AwaitSessionOutput,
    Caller,
    CheckAgentInput,
    CheckAgentOutput,
    ChildRecord,
    HandoffHistoryInput,
    HandoffHistoryOutput,
    LatestMessageOutput,
    PlanSpawnInput,
    PlanSpawnOutput,
    SendMessageResult,
    SendOutput,
    StoppedSession,
    StopSubAgentResult,
    StopTreeOutput,
    SubAgentInfo,
    SubAgentMessage,
    TargetInput,
    TreeInput,
    TreeOutput,
)

_TERMINAL = {s.value for s in TERMINAL_STATUSES}

# ---- models --------------------------------------------------------------------------------------------


def allowed_models(settings: Settings, *extra: str) -> dict[str, str]:
    """Model ids a session may name -> model spec: tier names, configured specs (tiers, prices), extras."""
    out: dict[str, str] = {}
    for spec in [*settings.prices, *extra]:
        out[spec] = spec
    for name, spec in settings.model_tiers.items():
        out[name] = spec
        out[spec] = spec
    return out


def resolve_model(settings: Settings, model_id: str, *extra: str) -> str | None:
    return allowed_models(settings, *extra).get(model_id)


def tier_model(settings: Settings, tier: str, fallback: str) -> str:
    """A role's tier as configured in ``settings.model_tiers``; the parent's model when the tier is not set
    (codai: children run on the parent's alias)."""
    return settings.model_tiers.get(tier) or fallback


async def plan_spawn(services: Services, inp: PlanSpawnInput) -> PlanSpawnOutput:
    """Model and tools of a spawn_agent child: the role's tier, the parent's tools up to the role's level,
    never spawn_agent (children never spawn)."""
    role = ROLES[inp.role]
    tools: list[str] = []
    for name in inp.parent_tools:
        if name == "spawn_agent":
            continue
        spec = services.catalog.get(name)
        level = spec.level if spec is not None else ToolLevel.none
        if role.max_level is not None and not role.max_level.allows(level):
            continue
        tools.append(name)
    return PlanSpawnOutput(model=tier_model(services.settings, role.tier, inp.session.model), tools=tools)


async def check_agent(services: Services, inp: CheckAgentInput) -> CheckAgentOutput:
    """The target agent exists in the caller's project and is active; the model override is configured."""
    agent = services.agents.find(inp.agent_name, inp.project)
    if agent is None or agent.project not in (inp.project, "default"):
        return CheckAgentOutput(error=f"There is no agent named {inp.agent_name!r} in project {inp.project!r}.")
    if not agent.active:
        return CheckAgentOutput(error=f"Agent {inp.agent_name!r} is not active.")
    model = None
    if inp.llm_config_override_id:
        model = resolve_model(services.settings, inp.llm_config_override_id)
        if model is None:
            known = sorted(allowed_models(services.settings))
            return CheckAgentOutput(
                error=(f"Unknown llm_config_override_id {inp.llm_config_override_id!r}; configured models: {known}")
            )
    return CheckAgentOutput(model=model)


# ---- the tree, through queries ---------------------------------------------------------------------------


async def _status(client: Client, session_id: str) -> StatusView | None:
    try:
        view: StatusView = await client.get_workflow_handle(session_id).query("status", result_type=StatusView)
        return view
    except RPCError as exc:
        if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            return None
        raise


async def _children(client: Client, session_id: str) -> list[ChildRecord]:
    try:
        records: list[ChildRecord] = await client.get_workflow_handle(session_id).query(
            "subagents", result_type=list[ChildRecord]
        )
        return records
    except RPCError as exc:
        if exc.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            return []
        raise


async def list_tree(client: Client, inp: TreeInput) -> TreeOutput:
    """Every active session below the root of the caller's tree (neither the root nor the caller itself)."""
    out: list[SubAgentInfo] = []
    frontier = [inp.caller.root_id]
    seen: set[str] = set()
    while frontier:
        sid = frontier.pop(0)
        if sid in seen:
            continue
        seen.add(sid)
        for rec in await _children(client, sid):
            if rec.finished:
                continue
            status = await _status(client, rec.session_id)
            if status is None or status.status.value in _TERMINAL:
                continue
            frontier.append(rec.session_id)
            if rec.session_id == inp.caller.session_id:
                continue
            out.append(
                SubAgentInfo(
                    sub_session_id=rec.session_id,
                    title=status.title,
                    status=status.status.value,
                    created_at=status.created_at,
                    updated_at=status.updated_at,
                    parent_id=status.parent_id,
                    agent=status.agent,
                )
            )
    return TreeOutput(sessions=out)


async def _target_status(client: Client, caller: Caller, target: str) -> tuple[StatusView | None, str | None]:
    """The target's status, or why the caller may not touch it (same root, not itself)."""
    if target == caller.session_id:
        return None, "The target is the current session itself; name one of its sub-agents instead."
    status = await _status(client, target)
    if status is None:
        return (
            None,
            f"Unknown sub-session {target!r}. Use listSubAgent to get the ids of the current session tree.",
        )
    if status.root_id != caller.root_id:
        return None, f"Session {target!r} is not part of the current session tree."
    return status, None


async def latest_message(client: Client, inp: TargetInput) -> LatestMessageOutput:
    status, error = await _target_status(client, inp.caller, inp.target)
    if status is None:
        return LatestMessageOutput(error=error)
    latest = await client.get_workflow_handle(inp.target).query("latest_message", result_type=LatestMessageView)
    return LatestMessageOutput(
        message=SubAgentMessage(
            sub_session_id=inp.target,
            sub_session_title=status.title,
            sub_session_status=status.status.value,
            message_id=latest.message_id,
            role=latest.role,
            content=latest.content,
            created_at=latest.created_at,
        )
    )


async def stop_tree(client: Client, inp: TargetInput) -> StopTreeOutput:
    """Stop the target and every running descendant, leaf first; each is awaited before its parent."""
    status, error = await _target_status(client, inp.caller, inp.target)
    if status is None:
        return StopTreeOutput(error=error)
    if status.status.value in _TERMINAL:
        return StopTreeOutput(error=f"Sub-agent {inp.target!r} has already finished ({status.status.value}).")
    order: list[tuple[str, str]] = []

    async def visit(session_id: str, title: str) -> None:
        for rec in await _children(client, session_id):
            if not rec.finished:
                await visit(rec.session_id, rec.title)
        order.append((session_id, title))

    await visit(inp.target, status.title)
    if any(sid == inp.caller.session_id for sid, _ in order):
        return StopTreeOutput(
            error=f"Session {inp.target!r} contains the current session; it cannot stop its own ancestor."
        )
    stopped: list[StoppedSession] = []
    reason = inp.reason or f"stopped by {inp.caller.session_id}"
    for sid, title in order:
        handle = client.get_workflow_handle(sid, result_type=SessionResult)
        current = await _status(client, sid)
        if current is None or current.status.value in _TERMINAL:
            continue
        try:
            await handle.signal("stop", StopRequest(reason=reason))
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                continue  # it ended between the query and the signal
            raise
        try:
            await asyncio.wait_for(handle.result(), timeout=STOP_WAIT_SECONDS)
        except (WorkflowFailureError, TimeoutError):
            pass  # it ended anyway (cancelled, failed) or will: the stop signal is durable
        stopped.append(StoppedSession(sub_session_id=sid, title=current.title or title))
    return StopTreeOutput(result=StopSubAgentResult(stopped_sessions=stopped, total_stopped=len(stopped)))


async def send_message(client: Client, inp: TargetInput) -> SendOutput:
    """Queue a message on a running sub-agent through its ``send_message`` update, whose validator refuses
    a session that has ended (so the check and the delivery are one step, not a race)."""
    status, error = await _target_status(client, inp.caller, inp.target)
    if status is None:
        return SendOutput(error=error)
    if status.status.value in _TERMINAL:
        return SendOutput(
            error=(f"Sub-agent {inp.target!r} has already finished ({status.status.value}); it takes no more messages.")
        )
    handle = client.get_workflow_handle(inp.target)
    try:
        accepted = await handle.execute_update(
            "send_message",
            SendMessage(content=inp.message or "", kind="user", meta={"from_session": inp.caller.session_id}),
            id=inp.request_id,
            result_type=SendMessageAccepted,
        )
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        detail = getattr(cause, "message", None) or str(cause or exc)
        return SendOutput(error=f"Sub-agent {inp.target!r} refused the message: {detail}")
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return SendOutput(error=f"Sub-agent {inp.target!r} has already finished; it takes no more messages.")
        raise
    return SendOutput(result=SendMessageResult(sub_session_id=inp.target, queued_behind=accepted.queued_behind))


# ---- hand-off ------------------------------------------------------------------------------------------


def conversation_for_handoff(transcript: list[Message]) -> list[Message]:
    """The conversation a specialist inherits: everything but system prompts, with tool calls that have no
    result (the hand-off call itself and its siblings) dropped so providers accept the history."""
    answered = {m.tool_call_id for m in transcript if m.role == "tool" and m.tool_call_id}
    out: list[Message] = []
    for m in transcript:
        if m.role == "system":
            continue
        if m.role == "assistant" and m.tool_calls:
            calls = [c for c in m.tool_calls if c.id in answered]
            if not calls and not m.content:
                continue
            m = m.model_copy(update={"tool_calls": calls})
        out.append(m)
    return out


async def handoff_history(services: Services, inp: HandoffHistoryInput) -> HandoffHistoryOutput:
    checked = await check_agent(services, CheckAgentInput(project=inp.caller.project, agent_name=inp.agent_name))
    if checked.error:
        return HandoffHistoryOutput(error=checked.error)
    agent = services.agents.get(inp.agent_name, inp.caller.project)
    if agent.project != inp.caller.project:
        return HandoffHistoryOutput(
            error=(f"Agent {inp.agent_name!r} is not in project {inp.caller.project!r}; hand-offs stay in the project.")
        )
    transcript = await services.transcripts.load(inp.caller.session_id)
    return HandoffHistoryOutput(history=conversation_for_handoff(transcript))


# ---- waiting on a child the current run did not start ----------------------------------------------------


async def await_session(client: Client, inp: AwaitSessionInput) -> AwaitSessionOutput:
    """Wait for a session's result (a parent that continued-as-new lost its child handles)."""
    handle = client.get_workflow_handle(inp.session_id, result_type=SessionResult)
    try:
        result = await handle.result()
    except WorkflowFailureError as exc:
        cause = exc.cause
        if type(cause).__name__ == "CancelledError":
            return AwaitSessionOutput(status="stopped", error="cancelled")
        return AwaitSessionOutput(status="failed", error=getattr(cause, "message", None) or str(cause or exc))
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return AwaitSessionOutput(status="failed", error=f"session {inp.session_id} not found")
        raise
    return AwaitSessionOutput(
        status=result.status.value,
        final_message=result.final_message,
        error=result.error,
        usage=result.usage + result.tree_usage,
    )


def build_activities(holder: ServicesHolder) -> list[Callable[..., Any]]:
    @activity.defn(name=ACT_PLAN_SPAWN)
    async def plan_spawn_activity(inp: PlanSpawnInput) -> PlanSpawnOutput:
        return await plan_spawn(await holder.get(), inp)

    @activity.defn(name=ACT_CHECK_AGENT)
    async def check_agent_activity(inp: CheckAgentInput) -> CheckAgentOutput:
        return await check_agent(await holder.get(), inp)

    @activity.defn(name=ACT_LIST_TREE)
    async def list_tree_activity(inp: TreeInput) -> TreeOutput:
        return await list_tree(activity.client(), inp)

    @activity.defn(name=ACT_LATEST_MESSAGE)
    async def latest_message_activity(inp: TargetInput) -> LatestMessageOutput:
        return await latest_message(activity.client(), inp)

    @activity.defn(name=ACT_STOP_TREE)
    async def stop_tree_activity(inp: TargetInput) -> StopTreeOutput:
        # Heartbeats while it waits for each session to stop: a crashed worker's stop is retried promptly.
        return await with_heartbeat(stop_tree(activity.client(), inp))

    @activity.defn(name=ACT_SEND_MESSAGE)
    async def send_message_activity(inp: TargetInput) -> SendOutput:
        return await send_message(activity.client(), inp)

    @activity.defn(name=ACT_HANDOFF_HISTORY)
    async def handoff_history_activity(inp: HandoffHistoryInput) -> HandoffHistoryOutput:
        return await handoff_history(await holder.get(), inp)

    @activity.defn(name=ACT_AWAIT_SESSION)
    async def await_session_activity(inp: AwaitSessionInput) -> AwaitSessionOutput:
        return await with_heartbeat(await_session(activity.client(), inp))

    return [
        plan_spawn_activity,
        check_agent_activity,
        list_tree_activity,
        latest_message_activity,
        stop_tree_activity,
        send_message_activity,
        handoff_history_activity,
        await_session_activity,
    ]
