"""The session engine's own activities: prepare a session, run one model step."""

from __future__ import annotations

import contextlib
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError

from agent_tools._activity_io import (
    ACTIVITY_LLM_STEP,
    ACTIVITY_PREPARE,
    LlmStepInput,
    LlmStepOutput,
)
from agent_tools._agents import AgentDefinition
from agent_tools._errors import ConfigurationError, InvalidInput, ProviderRequestError, SessionError, error_type
from agent_tools._messages import Message
from agent_tools._policy import ExecutionPolicy
from agent_tools._prompt import build_context, memory_note
from agent_tools._session import PrepareInput, PrepareOutput, SessionConfig, SessionOptions, SessionRequest
from agent_tools._session_start import visible_title
from agent_tools._settings import Settings
from agent_tools._store.transcripts import SessionIdTaken
from agent_tools.activities._heartbeat import with_heartbeat
from agent_tools.activities._model_calls import check_budget, complete, non_retryable
from agent_tools.activities._offer import unavailable_tools
from agent_tools.activities._providers.base import ToolSchema
from agent_tools.activities._services import ActivityClass, Services
from agent_tools.activities._text_publisher import TextPublisher, stream_publisher
from agent_tools.contracts._approvals import resolve_approvals
from agent_tools.contracts._output import OutputContract, check_answer, contract_of, schema_refusal
from agent_tools.contracts._planning import session_schema


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


def spill_threshold(agent: AgentDefinition, req: SessionRequest, settings: Settings) -> int:
    """FYAI: results are saved above "the team's Tool Summary Max Characters"; "one-to-one chats have no
    team, so they always use the default". A team here is a delegation tree: a sub-agent's session
    (depth > 0) or the root session of an orchestrator (an agent granted sub-agents). Its setting is the
    tree root's agent's ``spill_threshold_chars``, which a sub-agent inherits
    (``options.delegation_spill_threshold_chars``), whatever its own agent sets; no setting, and every other
    session, uses the deployment's (2,000 by default)."""
    if req.depth > 0:
        return req.options.delegation_spill_threshold_chars or settings.spill_threshold_chars
    return (agent.spill_threshold_chars if agent.subagents else None) or settings.spill_threshold_chars


async def _engine_reachable(services: Services) -> bool:
    """Whether the worker's last probe (made now if it has none, or an old one) found a search engine."""
    probe = services.search_probe
    return probe.configured and (await probe.current()).any


def _has_codec() -> bool:
    """Whether this worker's client encodes payloads (a codec: encryption, say)."""
    try:
        return activity.client().data_converter.payload_codec is not None
    except RuntimeError:  # no client (an activity run outside a worker)
        return False


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
    model = req.model or agent.model or s.default_model()
    # One rule for who is offered what (ToolCatalog.offer): profile or request list, FYAI's automatic tools,
    # memory, level, organisation switches, and what this deployment can serve.
    try:
        tools = services.catalog.offer(
            profile=None if req.tools is not None else agent.profile,
            # The host's @tool functions come to every agent; a request's list is the whole offer, and an
            # agent narrows the host's tools with exclude_tools.
            tools=req.tools if req.tools is not None else [*agent.tools, *services.catalog.host_tools()],
            exclude=[*req.exclude_tools, *(agent.exclude_tools if req.tools is None else [])],
            level=agent.tool_level,
            disabled=s.disabled_for(req.organisation),
            memory=agent.memory and req.options.memory is not False,
            home_profile=agent.profile if req.tools is not None else None,
            unavailable=unavailable_tools(s, model, engine_reachable=await _engine_reachable(services))
            | ({"spawn_agent"} if services.catalog.carries_client_tools(req.tools) else set()),
        )
    except ConfigurationError as exc:
        raise ApplicationError(str(exc), type=error_type(ConfigurationError), non_retryable=True) from exc
    if "use_skill" in tools:
        # codai: use_skill is offered only when at least one skill is visible to the agent.
        from agent_tools.activities._skills import visible_skills

        if not await visible_skills(services.settings.skills.dir, agent.name):
            tools = [t for t in tools if t != "use_skill"]
    if "exec_python" in tools:
        # Fail closed: a worker that cannot isolate model-written code offers no code interpreter at all (it
        # said why when it started). A call that still lands on such a worker gets a tool error there.
        from agent_tools.activities._sandbox.tool import offered

        if not await offered(services):
            tools = [t for t in tools if t != "exec_python"]
    # The organisation's budget is the default; the agent's and the request's options win. A child's request
    # carries its parent's resolved budget (SessionOptions.delegation_only), so a tree has one ceiling.
    org_budget = s.budgets.for_organisation(req.organisation)
    options = (
        SessionOptions(
            search_attributes=s.search_attributes,
            memory=agent.memory,
            budget_cost_usd=org_budget.cost_usd,
            budget_tokens=org_budget.tokens,
        )
        .merged(agent.options)
        .merged(req.options)
    )
    if req.depth == 0:
        # A tree's root sets its team's threshold for its sub-agents (a hand-off's specialist starts its own).
        options = options.model_copy(update={"delegation_spill_threshold_chars": agent.spill_threshold_chars})
    try:
        # A spec no call could use fails the session here, before its first step, with the reason.
        services.providers.check(model)
    except ConfigurationError as exc:
        raise ApplicationError(str(exc), type=error_type(ConfigurationError), non_retryable=True) from exc
    title = req.title or (req.prompt or agent.name)[:60]
    if options.prompt_titles is None and _has_codec():
        # A raw start, or a client without a codec: this worker encodes payloads, so the prompt stays out of
        # the search attributes too (its children inherit the choice).
        options = options.merged({"prompt_titles": False})
    shown = visible_title(req.model_copy(update={"agent": agent.name}), options.prompt_titles is not False)
    config = SessionConfig(
        visible_title=shown if shown != title else None,
        output=_output_contract(req.output_schema, req.output_retries),
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
        spill_threshold=spill_threshold(agent, req, s),
        subagents=agent.subagents,
        options=options,
        policy=session_policy(s.policy, agent.policy, options),
        approvals=resolve_approvals(
            tools,
            {t: spec for t in tools if (spec := services.catalog.get(t)) is not None},
            agent.approval or agent.options.approval,
            req.options.approval,
        ),
    )
    system = req.system_prompt or agent.system_prompt
    try:
        position = await services.transcripts.open_session(
            config, [Message(role="system", content=system), *req.history], run_chain=inp.run_chain
        )
    except SessionIdTaken as exc:
        raise ApplicationError(str(exc), type=error_type(SessionError), non_retryable=True) from exc
    return PrepareOutput(config=config, transcript_len=position)


def _output_contract(schema: dict[str, Any] | None, retries: int | None) -> OutputContract | None:
    """The session's output contract; a schema that cannot be one fails the session before its first step."""
    if schema is None:
        return None
    refusal = schema_refusal(schema)
    if refusal is not None:
        raise ApplicationError(f"refused to start: {refusal}", type=error_type(InvalidInput), non_retryable=True)
    return contract_of(schema, retries)


async def llm_step(services: Services, inp: LlmStepInput) -> LlmStepOutput:
    """Build the context from the store and the new messages, call the model, store the step."""
    t = services.transcripts
    sid = inp.session.session_id
    # Read what came before (usually from this worker's cache); everything this step adds is written in one
    # transaction once the model has answered.
    transcript = [*await t.prefix(sid, inp.position, last_answer=inp.last_answer), *inp.new_messages]
    specs = services.catalog.specs(inp.tools)
    note = memory_note([spec.name for spec in specs if spec.capability == "memory"])
    extra: list[str] = [note] if note else []
    for hook in services.context_hooks:
        block = await hook(services, inp.session, transcript)
        if block:
            extra.append(block)
    messages = build_context(transcript, budget_chars=services.settings.context_char_budget, extra_system=extra)
    attempt = activity.info().attempt if activity.in_activity() else 1
    # The text goes live to the session's progress stream while the model writes it (see text_publisher); the
    # step's result, which is all the workflow reads, is the same with or without it.
    live: TextPublisher | contextlib.AbstractAsyncContextManager[None] = contextlib.nullcontext()
    if inp.stream and activity.in_activity() and activity.info().workflow_id:
        live = TextPublisher(stream_publisher(), session_id=sid, position=inp.position, attempt=attempt)
    try:
        # The tree's spend so far (from the store, running children included); refused once a ceiling is reached.
        spent = await check_budget(services, inp.session.budget)
        async with live:
            response, used = await complete(
                services,
                inp.model,
                messages,
                tools=[
                    ToolSchema(
                        name=s.name,
                        description=s.description,
                        parameters=session_schema(s.parameters_schema(), inp.schema_minimums.get(s.name, {})),
                    )
                    for s in specs
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
                output=inp.output,
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
    # A final answer of a session with an output schema is checked here, not in the workflow: validation is
    # the schema's (its patterns are bounded by a timeout), and a replay must never run it again.
    verdict = check_answer(inp.output, message.content) if inp.output is not None and not message.tool_calls else None
    return LlmStepOutput(
        message=message,
        position=after,
        usage=used,
        output=verdict,
        tree_spent=spent + used if spent is not None else None,
    )


class EngineActivities(ActivityClass):
    """The session engine's own activities: prepare a session, run one model step."""

    @activity.defn(name=ACTIVITY_PREPARE)
    async def prepare_session(self, inp: PrepareInput) -> PrepareOutput:
        return await prepare_session(await self._services.get(), inp)

    @activity.defn(name=ACTIVITY_LLM_STEP)
    async def llm_step(self, inp: LlmStepInput) -> LlmStepOutput:
        async def step() -> LlmStepOutput:
            return await llm_step(await self._services.get(), inp)

        # The whole step beats, store work included: with a heartbeat timeout of seconds, a transcript
        # write queued behind a busy store would otherwise pass for a dead worker and run the call again.
        return await with_heartbeat(step())
