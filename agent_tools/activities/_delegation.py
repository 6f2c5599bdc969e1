"""Delegation's side effects: ``delegate_to_model`` (an activity tool), and the look-ups that touch the world: model and agent resolution, walking the session tree with
queries, stopping a subtree leaf first, messaging a sub-agent, loading a transcript for a hand-off, and
waiting on a child's result after the parent continued-as-new.

Each activity is a thin shell over a plain async function (tests call those directly). Tree walks use
workflow queries rather than visibility: queries are answered by the sessions themselves, so a child started
a moment ago is never missing (visibility is eventually consistent).
"""

from __future__ import annotations

import asyncio
import os

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError, RPCStatusCode

from agent_tools import _search_attributes as sa
from agent_tools._activity_io import ToolCallOutput
from agent_tools._catalog.spec import ToolLevel
from agent_tools._errors import ConfigurationError, ProviderRequestError, ToolFailure
from agent_tools._messages import Message
from agent_tools._session import (
    TERMINAL_STATUSES,
    WORKFLOW_NAME,
    LatestMessageView,
    SendMessage,
    SendMessageAccepted,
    SessionResult,
    StatusView,
    StopRequest,
)
from agent_tools._settings import Settings
from agent_tools.activities._context import BuiltinContext, ToolImpl
from agent_tools.activities._heartbeat import with_heartbeat
from agent_tools.activities._model_calls import UsageAccount, complete
from agent_tools.activities._services import ActivityClass, Services
from agent_tools.contracts._delegation import (
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
    DelegateToModelArgs,
    DelegateToModelResult,
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
    message_target_refusal,
)

_TERMINAL = {s.value for s in TERMINAL_STATUSES}

# ---- models --------------------------------------------------------------------------------------------


def provider_configured(settings: Settings, spec: str) -> bool:
    """Whether the deployment can call ``spec``'s provider: a configured endpoint or key, or the scripted model.

    A row of the price table alone is no reason to offer a model: the default table names OpenAI's and
    Anthropic's models for every deployment, keys or not.
    """
    prefix = spec.partition(":")[0]
    if prefix == "scripted" or prefix in settings.providers:
        return True
    if prefix == "openai":
        return bool(settings.openai_api_key or os.environ.get("OPENAI_API_KEY"))
    if prefix == "anthropic":
        return bool(settings.anthropic_api_key or os.environ.get("ANTHROPIC_API_KEY"))
    return False


def allowed_models(settings: Settings, *extra: str) -> dict[str, str]:
    """Model ids a session may name -> model spec: tier names and their specs, the extras (the session's own
    model), and the price table's specs whose provider the deployment can call."""
    out: dict[str, str] = {}
    for spec in [*(p for p in settings.prices if provider_configured(settings, p)), *extra]:
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
    never spawn_agent (children never spawn); for a read-only role (explore) only the tools that only read
    (no memory writes, no model calls, no MCP or host tools not declared read-only, no planning)."""
    role = ROLES[inp.role]
    tools: list[str] = []
    for name in inp.parent_tools:
        if name == "spawn_agent":
            continue
        spec = services.catalog.get(name)
        level = spec.level if spec is not None else ToolLevel.none
        if role.max_level is not None and not role.max_level.allows(level):
            continue
        if role.read_only and (spec is None or not spec.read_only):
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
    """Every active session below the root of the caller's tree (neither the root nor the caller itself).

    One visibility query on ``SessionRootId`` finds them all; the caller's own running children come with
    the input, since visibility can lag a child started a moment ago.
    """
    root = inp.caller.root_id
    query = f"WorkflowType = '{WORKFLOW_NAME}' AND ExecutionStatus = 'Running' AND SessionRootId = {sa.quote(root)}"
    found: dict[str, SubAgentInfo] = {}
    async for wf in client.list_workflows(query, limit=500):
        attrs = wf.typed_search_attributes
        state = attrs.get(sa.SESSION_STATE) or "running"
        if wf.id in (root, inp.caller.session_id) or state in _TERMINAL:
            continue
        updated = attrs.get(sa.SESSION_UPDATED_AT)
        found[wf.id] = SubAgentInfo(
            sub_session_id=wf.id,
            title=attrs.get(sa.SESSION_TITLE) or wf.id,
            status=state,
            created_at=wf.start_time.isoformat() if wf.start_time else None,
            updated_at=updated.isoformat() if updated else None,
            parent_id=attrs.get(sa.SESSION_PARENT_ID),
            agent=attrs.get(sa.AGENT_NAME),
        )
    for child in inp.own_children:
        found.setdefault(child.sub_session_id, child)
    return TreeOutput(sessions=sorted(found.values(), key=lambda s: s.created_at or ""))


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
    """Stop the target and every running descendant.

    One stop mechanism serves the whole tree: the target gets the ``stop`` signal, and every session that is
    stopped stops its own children first and waits for them (``DelegationPart.on_stop``), so the subtree
    ends leaf first and no session in it runs a turn for a child that ended because of the stop. This
    activity checks the target, lists what is running under it, signals it and waits for it to end.
    """
    status, error = await _target_status(client, inp.caller, inp.target)
    if status is None:
        return StopTreeOutput(error=error)
    if status.status.value in _TERMINAL:
        return StopTreeOutput(error=f"Sub-agent {inp.target!r} has already finished ({status.status.value}).")
    running: list[tuple[str, str]] = []  # leaf first, as they stop

    async def visit(session_id: str, title: str) -> None:
        for rec in await _children(client, session_id):
            if not rec.finished:
                await visit(rec.session_id, rec.title)
        running.append((session_id, title))

    await visit(inp.target, status.title)
    if any(sid == inp.caller.session_id for sid, _ in running):
        return StopTreeOutput(
            error=f"Session {inp.target!r} contains the current session; it cannot stop its own ancestor."
        )
    handle = client.get_workflow_handle(inp.target, result_type=SessionResult)
    try:
        await handle.signal("stop", StopRequest(reason=inp.reason or f"stopped by {inp.caller.session_id}"))
    except RPCError as exc:
        if exc.status != RPCStatusCode.NOT_FOUND:
            raise  # NOT_FOUND: it ended between the query and the signal
    try:
        # The target answers once its whole subtree has stopped (each level waits STOP_WAIT_SECONDS at most).
        await asyncio.wait_for(handle.result(), timeout=STOP_WAIT_SECONDS * 2)
    except (WorkflowFailureError, TimeoutError):
        pass  # it ended anyway (cancelled, failed) or will: the stop signal is durable
    stopped = [StoppedSession(sub_session_id=sid, title=title) for sid, title in running]
    return StopTreeOutput(result=StopSubAgentResult(stopped_sessions=stopped, total_stopped=len(stopped)))


async def _child_record(client: Client, status: StatusView) -> ChildRecord | None:
    """The target as its parent knows it (face and mode), from the parent's ``subagents`` query."""
    if status.parent_id is None:
        return None
    children = await _children(client, status.parent_id)
    return next((c for c in children if c.session_id == status.session_id), None)


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
    refusal = message_target_refusal(inp.target, status.parent_id, await _child_record(client, status))
    if refusal is not None:
        return SendOutput(error=refusal)
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


# ---- delegate_to_model (codai): one completion on another allowed model, an activity tool ------------


async def delegate_to_model(args: DelegateToModelArgs, ctx: BuiltinContext) -> ToolCallOutput:
    """One completion, no tools, on a model the deployment allows (a tier name or a configured spec).

    Provider rate limits and server errors propagate and Temporal retries the activity; a refused request
    comes back to the model as an error result.
    """
    services = ctx.services
    spec = resolve_model(services.settings, args.model, ctx.session.model)
    if spec is None:
        known = sorted(allowed_models(services.settings, ctx.session.model))
        raise ToolFailure(f"Model {args.model!r} is not one you may call; allowed: {known}")
    messages = [Message(role="system", content=args.system)] if args.system else []
    messages.append(Message(role="user", content=args.prompt))
    try:
        response, used = await complete(
            services,
            spec,
            messages,
            max_tokens=args.max_tokens or services.settings.default_max_tokens,
            meta={
                "agent": ctx.session.agent,
                "session_id": ctx.session.session_id,
                "title": "delegate_to_model",
                "role": "delegate",
                "assistant_count": 0,
            },
            # One usage row per completion, like the session's own calls; activity ids are stable across
            # retries, so a retry overwrites its row.
            budget=ctx.session.budget,
            account=UsageAccount(
                f"{ctx.session.session_id}:{ctx.session.run_id}:{_activity_id(ctx)}:delegate",
                ctx.session.session_id,
                ctx.session.root_id,
            ),
        )
    except ConfigurationError as exc:
        raise ToolFailure(f"Model {args.model!r} is not usable: {exc}") from exc
    except ProviderRequestError as exc:
        raise ToolFailure(f"delegate_to_model: {exc}") from exc
    result = DelegateToModelResult(model=spec, content=response.message.content, usage=used)
    # ``usage`` on the output: the session adds it to its tree usage (spend visible on the session).
    return ToolCallOutput(content=result.model_dump_json(), usage=used)


def _activity_id(ctx: BuiltinContext) -> str:
    return activity.info().activity_id if activity.in_activity() else ctx.call_id


IMPLEMENTATIONS: dict[str, ToolImpl] = {"delegate_to_model": delegate_to_model}


class DelegationActivities(ActivityClass):
    """Spawn checks, the session tree (list, read, stop, message, await) and hand-off history."""

    @activity.defn(name=ACT_PLAN_SPAWN)
    async def plan_spawn(self, inp: PlanSpawnInput) -> PlanSpawnOutput:
        return await plan_spawn(await self._services.get(), inp)

    @activity.defn(name=ACT_CHECK_AGENT)
    async def check_agent(self, inp: CheckAgentInput) -> CheckAgentOutput:
        return await check_agent(await self._services.get(), inp)

    @activity.defn(name=ACT_LIST_TREE)
    async def list_tree(self, inp: TreeInput) -> TreeOutput:
        return await list_tree(activity.client(), inp)

    @activity.defn(name=ACT_LATEST_MESSAGE)
    async def latest_message(self, inp: TargetInput) -> LatestMessageOutput:
        return await latest_message(activity.client(), inp)

    @activity.defn(name=ACT_STOP_TREE)
    async def stop_tree(self, inp: TargetInput) -> StopTreeOutput:
        # Heartbeats while it waits for each session to stop: a crashed worker's stop is retried promptly.
        return await with_heartbeat(stop_tree(activity.client(), inp))

    @activity.defn(name=ACT_SEND_MESSAGE)
    async def send_message(self, inp: TargetInput) -> SendOutput:
        return await send_message(activity.client(), inp)

    @activity.defn(name=ACT_HANDOFF_HISTORY)
    async def handoff_history(self, inp: HandoffHistoryInput) -> HandoffHistoryOutput:
        return await handoff_history(await self._services.get(), inp)

    @activity.defn(name=ACT_AWAIT_SESSION)
    async def await_session(self, inp: AwaitSessionInput) -> AwaitSessionOutput:
        return await with_heartbeat(await_session(activity.client(), inp))
