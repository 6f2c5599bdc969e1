"""The session engine's own activities: prepare a session, run one model step."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_tools.activities.heartbeat import with_heartbeat
from agent_tools.activities.model_calls import complete, non_retryable
from agent_tools.activities.providers.base import ToolSchema
from agent_tools.activities.providers.registry import check_spec
from agent_tools.activities.services import Services, ServicesHolder
from agent_tools.activities.text_publisher import TextPublisher, stream_publisher
from agent_tools.activity_io import (
    ACTIVITY_LLM_STEP,
    ACTIVITY_PREPARE,
    LlmStepInput,
    LlmStepOutput,
)
from agent_tools.errors import ConfigurationError, ProviderRequestError, error_type
from agent_tools.messages import Message
from agent_tools.policy import ExecutionPolicy
from agent_tools.prompt import build_context
from agent_tools.session import PrepareInput, PrepareOutput, SessionConfig, SessionOptions


def session_policy(base: ExecutionPolicy, agent_override: dict[str, Any], options: SessionOptions) -> ExecutionPolicy:
    """The deployment's policy with the agent's overrides and the legacy ``heartbeat_timeout_seconds`` option."""
    try:
        policy = base.merged(agent_override)
        heartbeat = options.heartbeat_timeout_seconds
        if heartbeat is not None:
            policy = policy.merged(
                {
                    "model_step": {"heartbeat_seconds": float(heartbeat)},
                    "tool_call": {"heartbeat_seconds": float(heartbeat)},
                }
            )
    except (ValueError, TypeError) as exc:
        raise ApplicationError(
            f"invalid session policy: {exc}", type=error_type(ConfigurationError), non_retryable=True
        ) from exc
    return policy


async def prepare_session(services: Services, inp: PrepareInput) -> PrepareOutput:
    """Resolve a request against agents, catalog and settings; open the transcript."""
    req = inp.request
    s = services.settings
    try:
        agent = services.agents.get(req.agent, req.project)
    except ConfigurationError as exc:
        raise ApplicationError(str(exc), type=error_type(ConfigurationError), non_retryable=True) from exc
    if not agent.active:
        raise ApplicationError(
            f"agent {agent.name!r} is not active", type=error_type(ConfigurationError), non_retryable=True
        )
    try:
        if req.tools is not None:
            tools = services.catalog.resolve(
                profile=None,
                tools=req.tools,
                exclude=req.exclude_tools,
                level=agent.tool_level,
                disabled=s.disabled_for(req.organisation),
            )
        else:
            tools = services.catalog.resolve(
                profile=agent.profile,
                tools=agent.tools,
                exclude=[*agent.exclude_tools, *req.exclude_tools],
                level=agent.tool_level,
                disabled=s.disabled_for(req.organisation),
            )
    except ConfigurationError as exc:
        raise ApplicationError(str(exc), type=error_type(ConfigurationError), non_retryable=True) from exc
    if not agent.memory or req.options.memory is False:
        # FYAI: memory tools exist only for agents with Memory ticked.
        tools = [t for t in tools if (spec := services.catalog.get(t)) is None or spec.capability != "memory"]
    if "use_skill" in tools:
        # codai: use_skill is offered only when at least one skill is visible to the agent.
        from agent_tools.activities.skills import visible_skills

        if not await visible_skills(services.settings.skills.dir, agent.name):
            tools = [t for t in tools if t != "use_skill"]
    if "exec_python" in tools:
        # Fail closed: a worker that cannot isolate model-written code offers no code interpreter at all (it
        # said why when it started). A call that still lands on such a worker gets a tool error there.
        from agent_tools.activities.sandbox import offered

        if not await offered(services):
            tools = [t for t in tools if t != "exec_python"]
    options = (
        SessionOptions(search_attributes=s.search_attributes, memory=agent.memory)
        .merged(agent.options)
        .merged(req.options)
    )
    model = req.model or agent.model or s.default_model()
    try:
        # A spec no call could use fails the session here, before its first step, with the reason.
        check_spec(model, s)
    except ConfigurationError as exc:
        raise ApplicationError(str(exc), type=error_type(ConfigurationError), non_retryable=True) from exc
    title = req.title or (req.prompt or agent.name)[:60]
    config = SessionConfig(
        session_id=inp.session_id,
        agent=agent.name,
        organisation=req.organisation,
        project=req.project,
        user=req.user,
        title=title,
        model=model,
        tools=tools,
        max_steps=req.max_steps or agent.max_steps or s.max_steps_per_turn,
        max_tokens=req.max_tokens or s.default_max_tokens,
        keep_alive=req.keep_alive,
        parent_id=req.parent_id,
        root_id=req.root_id or inp.session_id,
        depth=req.depth,
        chain=req.chain or [agent.name],
        role=req.role,
        spill_threshold=agent.spill_threshold_chars or s.spill_threshold_chars,
        subagents=agent.subagents,
        options=options,
        policy=session_policy(s.policy, agent.policy, options),
    )
    system = req.system_prompt or agent.system_prompt
    position = await services.transcripts.open_session(config, [Message(role="system", content=system), *req.history])
    return PrepareOutput(config=config, transcript_len=position)


async def llm_step(services: Services, inp: LlmStepInput) -> LlmStepOutput:
    """Build the context from the store and the new messages, call the model, store the step."""
    t = services.transcripts
    sid = inp.session.session_id
    # Read what came before (usually from this worker's cache); everything this step adds is written in one
    # transaction once the model has answered.
    transcript = [*await t.prefix(sid, inp.position, last_answer=inp.last_answer), *inp.new_messages]
    extra: list[str] = []
    for hook in services.context_hooks:
        block = await hook(services, inp.session, transcript)
        if block:
            extra.append(block)
    messages = build_context(transcript, budget_chars=services.settings.context_char_budget, extra_system=extra)
    specs = services.catalog.specs(inp.tools)
    attempt = activity.info().attempt if activity.in_activity() else 1
    # The text goes live to the session's progress stream while the model writes it (see text_publisher); the
    # step's result, which is all the workflow reads, is the same with or without it.
    live: TextPublisher | contextlib.AbstractAsyncContextManager[None] = contextlib.nullcontext()
    if inp.stream and activity.in_activity() and activity.info().workflow_id:
        live = TextPublisher(stream_publisher(), session_id=sid, position=inp.position, attempt=attempt)
    try:
        async with live:
            response, used = await complete(
                services,
                inp.model,
                messages,
                tools=[
                    ToolSchema(name=s.name, description=s.description, parameters=s.parameters_schema()) for s in specs
                ],
                max_tokens=inp.max_tokens,
                meta={
                    "agent": inp.session.agent,
                    "session_id": sid,
                    "title": inp.title,
                    "role": inp.role,
                    "attempt": attempt,
                    "assistant_count": sum(1 for m in transcript if m.role == "assistant"),
                },
                on_text=live if isinstance(live, TextPublisher) else None,
            )
    except (ProviderRequestError, ConfigurationError) as exc:
        raise non_retryable(exc) from exc
    message = response.message
    # A retried call overwrites the answer an earlier attempt may have stored: the transcript holds the
    # answer the workflow actually received.
    after = await t.commit_step(
        session_id=sid,
        position=inp.position,
        new_messages=inp.new_messages,
        answer=message,
        root_id=inp.session.root_id,
        model=inp.model,
        used=used,
        attempt=attempt,
    )
    return LlmStepOutput(message=message, position=after, usage=used)


def build_engine_activities(holder: ServicesHolder) -> list[Callable[..., Any]]:
    @activity.defn(name=ACTIVITY_PREPARE)
    async def prepare_session_activity(inp: PrepareInput) -> PrepareOutput:
        return await prepare_session(await holder.get(), inp)

    @activity.defn(name=ACTIVITY_LLM_STEP)
    async def llm_step_activity(inp: LlmStepInput) -> LlmStepOutput:
        async def step() -> LlmStepOutput:
            return await llm_step(await holder.get(), inp)

        # The whole step beats, store work included: with a heartbeat timeout of seconds, a transcript
        # write queued behind a busy store would otherwise pass for a dead worker and run the call again.
        return await with_heartbeat(step())

    return [prepare_session_activity, llm_step_activity]
