"""The delegation engine inside the session: start a child ``AgentSession`` with a config derived from the
parent, then wait for it fully (sync subAgent, spawn_agent), in the background (async subAgent: the parent's
inbox gets a ``subagent`` trigger when it ends) or for a bounded time (invoke_sub_agent races a timer).

One rule decides who hears about a child's end: a tool call waiting on it receives it as its result;
otherwise, unless this session asked it to stop, the end arrives as a notification in the inbox. Running
children are pending work, so a session never finishes before it has been told.

Children are started with ``ParentClosePolicy.ABANDON`` because Temporal applies the close policy when a
parent *continues-as-new* too, which would kill every child at each continue-as-new. Stopping is explicit
instead: ``_on_stop`` signals each running child to stop and waits; each child stops its own children first,
so a tree stops leaf first. A child the current run did not start (after continue-as-new) is awaited through
an activity.
"""

import asyncio
import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel
from temporalio.exceptions import ActivityError, CancelledError, ChildWorkflowError

from agent_tools._activity_io import ToolCallOutput
from agent_tools._budget import tree_spend
from agent_tools._messages import Message, ToolCall, Usage
from agent_tools._session import (
    ParkedCall,
    SessionInput,
    SessionResult,
    SessionStatus,
    StopRequest,
    Trigger,
)
from agent_tools._session_names import QUERY_HANDOFF, QUERY_SUBAGENTS, SIGNAL_STOP
from agent_tools._session_start import child_start, handoff_start
from agent_tools.contracts import _delegation as contract
from agent_tools.contracts._delegation import (
    ASYNC_RUNNING_NOTE,
    COST_CEILING_USD,
    INVOKE_RUNNING_NOTE,
    INVOKE_WAIT_SECONDS,
    MAX_SUBAGENT_DEPTH,
    RESULT_KEEP_CHARS,
    ROLES,
    SPAWN_FANOUT_CAP,
    SPAWN_MAX_TOKENS,
    STOP_WAIT_SECONDS,
    AwaitSessionInput,
    AwaitSessionOutput,
    Caller,
    CheckAgentInput,
    CheckAgentOutput,
    ChildRecord,
    Face,
    HandOffArgs,
    HandoffHistoryInput,
    HandoffHistoryOutput,
    HandoffRecord,
    HandOffResult,
    InvokeSubAgentArgs,
    InvokeSubAgentResult,
    LatestMessageOutput,
    NoArgs,
    PlanSpawnInput,
    PlanSpawnOutput,
    PriorMessage,
    SendMessageArgs,
    SendOutput,
    SpawnAgentArgs,
    StopTreeOutput,
    SubAgentArgs,
    SubAgentInfo,
    SubAgentResult,
    SubSessionArgs,
    TargetInput,
    TreeInput,
    TreeOutput,
    WaitMode,
    clamp_steps,
    error_json,
    handoff_refusal,
    invoke_refusal,
    notification_text,
    spawn_result_text,
)
from agent_tools.workflows._base import call_options, failure_detail, tool_error
from agent_tools.workflows._native import NativeHandler, ResumeHandler
from agent_tools.workflows._port import CapabilityPart, ChildHandle, SessionPort, query

R = TypeVar("R")


class _Answer(Protocol):
    """A delegation activity's result that may carry its refusal."""

    @property
    def error(self) -> str | None: ...


A = TypeVar("A", bound=_Answer)


class DelegationPart(CapabilityPart):
    """subAgent, listSubAgent, getSubAgentMessage, stopSubAgent, sendMessageToSubAgent, invoke_sub_agent,
    spawn_agent and hand_off_to_agent: faces of one child-session engine."""

    def __init__(self, port: SessionPort) -> None:
        super().__init__(port)
        # Per-run, not state: handles of the children this run started (a continue-as-new run has none).
        self._child_handles: dict[str, ChildHandle] = {}
        # Watcher tasks, referenced so they are not garbage-collected while they wait.
        self._watchers: list[asyncio.Task[None]] = []

    def native_tools(self) -> dict[str, NativeHandler]:
        return {
            "subAgent": self._tool_sub_agent,
            "listSubAgent": self._tool_list_sub_agent,
            "getSubAgentMessage": self._tool_get_sub_agent_message,
            "stopSubAgent": self._tool_stop_sub_agent,
            "sendMessageToSubAgent": self._tool_send_message_to_sub_agent,
            "invoke_sub_agent": self._tool_invoke_sub_agent,
            "hand_off_to_agent": self._tool_hand_off,
            "spawn_agent": self._tool_spawn_agent,
        }

    def resume_handlers(self) -> dict[str, ResumeHandler]:
        return {"subagent": self._resume_subagent}

    # ---- hooks --------------------------------------------------------------------------------------

    def on_start(self) -> None:
        # Children still running when the previous run continued-as-new: wait for them through an activity.
        for rec in self.state.delegation.running():
            self._watchers.append(asyncio.create_task(self._watch_by_activity(rec.session_id)))

    def pending_work(self) -> list[str]:
        reasons: list[str] = []
        reasons += [f"sub-agent {rec.session_id} is running" for rec in self.state.delegation.running()]
        return reasons

    async def on_stop(self, reason: str) -> None:
        running = self.state.delegation.running()
        if not running:
            return
        for rec in running:
            rec.stop_requested = True
        # Every child stops its own children before it ends, so waiting for the children is bottom-up.
        await asyncio.gather(*(self._signal_stop(rec.session_id, reason) for rec in running))
        try:
            await self.port.wait_condition(lambda: not self.state.delegation.running(), timeout=STOP_WAIT_SECONDS)
        except TimeoutError:
            self.port.logger.warning(
                "sub-agents did not confirm their stop in time: %s",
                [r.session_id for r in self.state.delegation.running()],
            )

    def details_sections(self) -> list[str]:
        sections: list[str] = []
        d = self.state.delegation
        if d.children:
            lines = [f"- `{c.session_id}` {c.title} · {c.face} · **{c.status}**" for c in d.children[-20:]]
            sections.append("**Sub-agents**\n" + "\n".join(lines))
        if d.handoff:
            sections.append(f"**Handed off** to `{d.handoff.agent_name}` in `{d.handoff.session_id}`")
        return sections

    # ---- queries ------------------------------------------------------------------------------------

    def query_subagents(self) -> list[ChildRecord]:
        return self.state.delegation.children

    def query_handoff(self) -> HandoffRecord | None:
        return self.state.delegation.handoff

    # ---- the engine ---------------------------------------------------------------------------------

    def _caller(self) -> Caller:
        c = self.config
        return Caller(session_id=c.session_id, root_id=c.root_id, agent=c.agent, project=c.project, model=c.model)

    async def _start_child(
        self,
        *,
        face: Face,
        agent: str,
        title: str,
        prompt: str,
        mode: WaitMode,
        role: str | None = None,
        model: str | None = None,
        tools: list[str] | None = None,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        system_prompt: str | None = None,
        prior: list[PriorMessage] | None = None,
        child_id: str | None = None,
    ) -> ChildRecord:
        """Start one child session and its watcher; returns its record (already finished if the start
        failed)."""
        c = self.config
        d = self.state.delegation
        child_id = child_id or self._next_child_id()
        prior = prior or []
        request = c.child_request(
            agent,
            prompt,
            title=title,
            model=model,
            tools=tools,
            system_prompt=system_prompt,
            max_steps=max_steps,
            max_tokens=max_tokens,
            keep_alive=False,
            role=role,
            history=[Message(role=m.role, content=m.content) for m in prior],
        )
        now = self.now_iso()
        rec = ChildRecord(
            session_id=child_id,
            face=face,
            agent=agent,
            title=title,
            role=role,
            mode=mode,
            task=prompt[:RESULT_KEEP_CHARS],
            prior=prior,
            created_at=now,
            updated_at=now,
        )
        d.children.append(rec)
        start = child_start(request, child_id, search_attributes=c.options.search_attributes is not False)
        try:
            handle = await self.port.start_child(SessionInput(request=request), start)
        except Exception as exc:  # e.g. the id is taken: the model gets a clear error, the session goes on
            rec.finished, rec.delivered, rec.status, rec.error = (
                True,
                True,
                "failed",
                f"could not start: {exc}",
            )
            return rec
        self._child_handles[child_id] = handle
        self._watchers.append(asyncio.create_task(self._watch_handle(child_id, handle)))
        self.port.publish("subagent_started", id=child_id, role=role or face, task=prompt[:200], title=title)
        self.port.refresh_details()
        return rec

    def _next_child_id(self) -> str:
        """Deterministic child ids, numbered in call order (taken before any await, so that parallel calls
        of one step are numbered like the calls, not like the order their look-ups finish)."""
        d = self.state.delegation
        d.counter += 1
        return f"{self.config.session_id}/sub-{d.counter}"

    async def _watch_handle(self, child_id: str, handle: ChildHandle) -> None:
        # Wait for the handle without awaiting it: cancelling an await on a child handle cancels the child.
        await self.port.wait_condition(handle.done)
        try:
            result: SessionResult = handle.result()
        except ChildWorkflowError as exc:
            cause = exc.cause
            if isinstance(cause, CancelledError):
                self._child_ended(child_id, "stopped", None, "cancelled", Usage())
            else:
                self._child_ended(child_id, "failed", None, failure_detail(exc), Usage())
            return
        except asyncio.CancelledError:
            self._child_ended(child_id, "stopped", None, "cancelled", Usage())
            return
        self._child_ended(
            child_id,
            result.status.value,
            result.final_message,
            result.error,
            result.usage + result.tree_usage,
        )

    async def _watch_by_activity(self, child_id: str) -> None:
        out = await self.port.execute_activity(
            contract.ACT_AWAIT_SESSION,
            AwaitSessionInput(session_id=child_id),
            result_type=AwaitSessionOutput,
            summary=f"await sub-agent {child_id}",
            options=call_options(self.config.policy.child_session.await_call),
        )
        self._child_ended(child_id, out.status, out.final_message, out.error, out.usage)

    def _child_ended(self, child_id: str, status: str, final: str | None, error: str | None, usage: Usage) -> None:
        rec = self.state.delegation.get(child_id)
        if rec is None or rec.finished:
            return
        rec.finished = True
        rec.status = status
        rec.final_message = final[:RESULT_KEEP_CHARS] if final is not None else None
        rec.error = error if status != "completed" else None
        rec.usage = usage
        rec.updated_at = self.now_iso()
        self._child_handles.pop(child_id, None)
        # Usage flows up the tree: the child's own spend plus its descendants'.
        self.state.tree_usage = self.state.tree_usage + usage
        self.port.publish(
            "subagent_done",
            id=child_id,
            role=rec.role or rec.face,
            ok=status == "completed",
            status=status,
            preview=(final or error or "")[:200],
        )
        if rec.waiters == 0 and not rec.delivered and not rec.stop_requested and not self.port.stopping:
            rec.delivered = True
            self.enqueue(
                Trigger(
                    kind="subagent",
                    content=notification_text(rec),
                    meta={"sub_session_id": child_id, "title": rec.title, "status": status},
                )
            )
        self.touch()
        self.port.refresh_details()

    async def _wait_child(
        self, rec: ChildRecord, timeout: float | None = None, *, parked: ParkedCall | None = None
    ) -> bool:
        """Wait for the child's end (at most ``timeout`` seconds); True when it ended. With ``parked`` the run
        may continue-as-new while it waits (the new run resumes the wait)."""
        if not rec.finished:
            rec.waiters += 1
            if parked is not None and timeout is not None and parked.deadline is None:
                parked.deadline = self.port.now() + timedelta(seconds=timeout)
            try:
                if timeout is not None and timeout <= 0:
                    pass  # a resumed bounded wait whose time ran out during the hand-over
                else:
                    await self.port.parked_wait(
                        parked, lambda: rec.finished, timeout=timeout, summary=f"wait for sub-agent {rec.agent}"
                    )
            except TimeoutError:
                pass
            finally:
                rec.waiters -= 1
        if rec.finished:
            rec.delivered = True
        return rec.finished

    async def _signal_stop(self, child_id: str, reason: str) -> None:
        try:
            await self.port.signal_external(child_id, SIGNAL_STOP, StopRequest(reason=f"parent stopped: {reason}"))
        except Exception as exc:  # already closed: nothing to stop
            self.port.logger.info("stop signal to %s not delivered: %s", child_id, exc)

    async def _lookup(
        self,
        tool: str,
        name: str,
        arg: Any,
        result_type: type[R],
        summary: str,
        *,
        long: bool = False,
        failed: Callable[[ActivityError], ToolCallOutput] | None = None,
    ) -> R | ToolCallOutput:
        """Run a delegation activity for ``tool``; its result, or the tool error the model gets when the
        activity failed for good (``failed`` words it for faces with their own error shape)."""
        options = call_options(self.config.policy.engine)
        if long:
            # Stopping a subtree waits for every session in it to stop.
            options["start_to_close_timeout"] = timedelta(seconds=STOP_WAIT_SECONDS * 10)
            options["heartbeat_timeout"] = timedelta(seconds=30)
        try:
            out: R = await self.port.execute_activity(
                name, arg, result_type=result_type, summary=summary, options=options
            )
        except ActivityError as exc:
            return failed(exc) if failed is not None else tool_error(f"{tool} failed: {failure_detail(exc)}")
        return out

    async def _checked(self, tool: str, name: str, arg: Any, result_type: type[A], summary: str) -> A | ToolCallOutput:
        """:meth:`_lookup`, with the activity's own refusal (its ``error``) as the tool error too."""
        out = await self._lookup(tool, name, arg, result_type, summary)
        if isinstance(out, ToolCallOutput) or not out.error:
            return out
        return tool_error(out.error)

    async def _relay(
        self,
        tool: str,
        name: str,
        target: TargetInput,
        result_type: type[A],
        answer: Callable[[A], BaseModel | None],
        default: str,
        *,
        long: bool = False,
    ) -> ToolCallOutput:
        """A look-up about another session for ``tool``: ``answer`` of its result as JSON, or the refusal."""
        out = await self._lookup(tool, name, target, result_type, f"{tool}: {target.target}", long=long)
        if isinstance(out, ToolCallOutput):
            return out
        return self._reply(answer(out), out.error, default)

    @staticmethod
    def _reply(result: BaseModel | None, error: str | None, default: str) -> ToolCallOutput:
        """A look-up's answer as the tool's result: its JSON, or its refusal as a tool error."""
        if result is None:
            return tool_error(error or default)
        return ToolCallOutput(content=result.model_dump_json())

    # ---- RTC faces ----------------------------------------------------------------------------------

    async def _tool_sub_agent(self, args: SubAgentArgs, call: ToolCall) -> ToolCallOutput:
        c = self.config
        if c.depth + 1 > MAX_SUBAGENT_DEPTH:
            return tool_error(f"Sub-agents may nest at most {MAX_SUBAGENT_DEPTH} levels deep; do this task yourself.")
        rec = await self._start_child(
            face="subAgent",
            agent=c.agent,
            title=args.title,
            prompt=args.instruction,
            mode=args.mode,
            model=c.model,
            tools=list(c.tools),
        )
        if args.mode == "async" and not rec.finished:
            out = SubAgentResult(
                sub_session_id=rec.session_id, title=rec.title, mode="async", status="running", note=ASYNC_RUNNING_NOTE
            )
            return ToolCallOutput(content=out.model_dump_json(exclude_none=True))
        await self._wait_child(rec, parked=self.port.parked_call(call, "subagent", rec.session_id))
        return self._sub_agent_result(rec)

    @staticmethod
    def _sub_agent_result(rec: ChildRecord) -> ToolCallOutput:
        out = SubAgentResult(
            sub_session_id=rec.session_id,
            title=rec.title,
            mode=rec.mode,  # type: ignore[arg-type]
            status=rec.status,
            result=rec.final_message,
            error=rec.error,
        )
        return ToolCallOutput(content=out.model_dump_json(exclude_none=True), is_error=rec.status != "completed")

    async def _resume_subagent(self, parked: ParkedCall, call: ToolCall) -> ToolCallOutput:
        """A sub-agent wait of a step the previous run continued-as-new in. The child runs on (it is
        abandoned, not closed, by continue-as-new); this run's watcher (an activity) records its end, and the
        wait goes on with its own deadline (invoke_sub_agent's bounded wait)."""
        rec = self.state.delegation.get(parked.ref)
        if rec is None:
            return tool_error(f"{call.name}: the sub-agent was lost across continue-as-new")
        timeout = None
        if parked.deadline is not None:
            timeout = max(0.0, (parked.deadline - self.port.now()).total_seconds())
        # The waiter count was carried: the resumed wait is the same waiter, not one more.
        rec.waiters -= 1
        finished = await self._wait_child(rec, timeout, parked=parked)
        if rec.face == "invoke_sub_agent":
            return self._invoke_result(rec, finished)
        if rec.face == "spawn_agent":
            return self._spawn_result(rec)
        return self._sub_agent_result(rec)

    async def _tool_list_sub_agent(self, args: NoArgs, call: ToolCall) -> ToolCallOutput:
        out = await self._lookup(
            "listSubAgent",
            contract.ACT_LIST_TREE,
            TreeInput(
                caller=self._caller(),
                # This session's own running children are known here, fresher than visibility may be.
                own_children=[
                    SubAgentInfo(
                        sub_session_id=rec.session_id,
                        title=rec.title,
                        status="running",
                        created_at=rec.created_at,
                        updated_at=rec.updated_at,
                        parent_id=self.config.session_id,
                        agent=rec.agent,
                    )
                    for rec in self.state.delegation.running()
                ],
            ),
            TreeOutput,
            "listSubAgent",
        )
        if isinstance(out, ToolCallOutput):
            return out
        return ToolCallOutput(content=json.dumps([s.model_dump() for s in out.sessions], ensure_ascii=False))

    async def _tool_get_sub_agent_message(self, args: SubSessionArgs, call: ToolCall) -> ToolCallOutput:
        target = TargetInput(caller=self._caller(), target=args.sub_session_id)
        return await self._relay(
            "getSubAgentMessage",
            contract.ACT_LATEST_MESSAGE,
            target,
            LatestMessageOutput,
            lambda o: o.message,
            "no message",
        )

    async def _tool_stop_sub_agent(self, args: SubSessionArgs, call: ToolCall) -> ToolCallOutput:
        own = self.state.delegation.get(args.sub_session_id)
        was_requested = own.stop_requested if own else False
        if own is not None:
            own.stop_requested = True  # the model asked for it: its end is not news to the model
        target = TargetInput(
            caller=self._caller(), target=args.sub_session_id, reason=f"stopped by {self.config.session_id}"
        )
        reply = await self._relay(
            "stopSubAgent", contract.ACT_STOP_TREE, target, StopTreeOutput, lambda o: o.result, "not stopped", long=True
        )
        if reply.is_error and own is not None:
            own.stop_requested = was_requested
        return reply

    async def _tool_send_message_to_sub_agent(self, args: SendMessageArgs, call: ToolCall) -> ToolCallOutput:
        target = TargetInput(
            caller=self._caller(),
            target=args.sub_session_id,
            message=args.message,
            # The update id makes a retried activity deliver the message once.
            request_id=f"{self.config.session_id}/step-{self.state.steps}/{call.id}",
        )
        return await self._relay(
            "sendMessageToSubAgent", contract.ACT_SEND_MESSAGE, target, SendOutput, lambda o: o.result, "not delivered"
        )

    # ---- FYAI: invoke_sub_agent, hand_off_to_agent ----------------------------------------------------

    async def _tool_invoke_sub_agent(self, args: InvokeSubAgentArgs, call: ToolCall) -> ToolCallOutput:
        c = self.config
        if args.resume_execution_id:
            rec = self.state.delegation.get(args.resume_execution_id)
            if rec is None or rec.face != "invoke_sub_agent":
                return tool_error(
                    f"Unknown execution id {args.resume_execution_id!r}: resume_execution_id must be an id that "
                    "invoke_sub_agent returned in this session."
                )
        else:
            refusal = invoke_refusal(caller=c.agent, target=args.agent_name, grants=c.subagents, chain=c.chain)
            if refusal:
                return tool_error(refusal)
            child_id = self._next_child_id()
            checked = await self._checked(
                "invoke_sub_agent",
                contract.ACT_CHECK_AGENT,
                CheckAgentInput(
                    project=c.project,
                    agent_name=args.agent_name,
                    llm_config_override_id=args.llm_config_override_id,
                ),
                CheckAgentOutput,
                f"check agent {args.agent_name}",
            )
            if isinstance(checked, ToolCallOutput):
                return checked
            rec = await self._start_child(
                face="invoke_sub_agent",
                agent=args.agent_name,
                title=f"{args.agent_name}: {args.task_input[:60]}",
                prompt=args.task_input,
                mode="bounded",
                model=checked.model,
                prior=args.prior_messages,
                child_id=child_id,
            )
        wait = c.options.delegation_invoke_wait_seconds or INVOKE_WAIT_SECONDS
        finished = await self._wait_child(rec, wait, parked=self.port.parked_call(call, "subagent", rec.session_id))
        return self._invoke_result(rec, finished)

    @staticmethod
    def _invoke_result(rec: ChildRecord, finished: bool) -> ToolCallOutput:
        if not finished:
            out = InvokeSubAgentResult(
                status="running", execution_id=rec.session_id, agent_name=rec.agent, note=INVOKE_RUNNING_NOTE
            )
            return ToolCallOutput(content=out.model_dump_json(exclude_none=True))
        status = rec.status if rec.status in ("completed", "stopped") else "failed"
        messages = [*rec.prior, PriorMessage(role="user", content=rec.task)]
        if rec.final_message is not None:
            messages.append(PriorMessage(role="assistant", content=rec.final_message))
        out = InvokeSubAgentResult(
            status=status,
            execution_id=rec.session_id,
            agent_name=rec.agent,
            output=rec.final_message,  # type: ignore[arg-type]
            error=rec.error,
            messages=messages,
        )
        return ToolCallOutput(content=out.model_dump_json(exclude_none=True), is_error=status != "completed")

    async def _tool_hand_off(self, args: HandOffArgs, call: ToolCall) -> ToolCallOutput:
        c = self.config
        refusal = handoff_refusal(
            caller=c.agent,
            target=args.agent_name,
            grants=c.subagents,
            parent_id=c.parent_id,
            already=self.state.handed_off_to is not None or bool(c.options.handed_off_from),
        )
        if refusal:
            return tool_error(refusal)
        if self.state.delegation.running():
            return tool_error(
                "Sub-agents of this conversation are still running; stop them or wait for them before handing off."
            )
        prep = await self._checked(
            "hand_off_to_agent",
            contract.ACT_HANDOFF_HISTORY,
            HandoffHistoryInput(caller=self._caller(), agent_name=args.agent_name),
            HandoffHistoryOutput,
            f"hand-off history for {args.agent_name}",
        )
        if isinstance(prep, ToolCallOutput):
            return prep
        if self.state.handed_off_to is not None:  # a parallel call in the same step won the race
            return tool_error("This conversation has already been handed off once; it cannot be handed off again.")
        new_id = f"session-{self.port.uuid4()}"
        self.state.handed_off_to = new_id  # claim it before the await so a parallel call is refused
        request = c.scoped_request(
            args.agent_name,
            args.message,
            title=c.title,
            keep_alive=c.keep_alive,
            history=prep.history,
            options=c.options.delegation_only().merged({"handed_off_from": c.session_id}),
        )
        try:
            # A child in Temporal's eyes (the UI links them), abandoned so it outlives this session.
            await self.port.start_child(
                SessionInput(request=request), handoff_start(new_id, agent=args.agent_name, from_agent=c.agent)
            )
        except Exception as exc:
            self.state.handed_off_to = None
            return tool_error(f"hand_off_to_agent failed: could not start the specialist's session: {exc}")
        now = self.now_iso()
        self.state.delegation.handoff = HandoffRecord(
            agent_name=args.agent_name, session_id=new_id, message=args.message, at=now
        )
        notice = f"Handed off to {args.agent_name} (session {new_id})."
        self.state.last_message = Message(role="assistant", content=notice)
        self.state.last_input = None
        self.state.last_message_at = now
        self.port.set_status(SessionStatus.handed_off)
        self.port.publish("status", status=SessionStatus.handed_off.value, handed_off_to=new_id, agent=args.agent_name)
        return ToolCallOutput(content=HandOffResult(agent_name=args.agent_name, session_id=new_id).model_dump_json())

    # ---- codai: spawn_agent ---------------------------------------------------------------------------

    async def _tool_spawn_agent(self, args: SpawnAgentArgs, call: ToolCall) -> ToolCallOutput:
        c = self.config
        d = self.state.delegation
        # Everything up to the first await runs in call order, so the per-message count is deterministic.
        if d.spawn_step != self.state.steps:
            d.spawn_step, d.spawn_in_step = self.state.steps, 0
        cap = c.options.delegation_fanout_cap or SPAWN_FANOUT_CAP
        if d.spawn_in_step >= cap:
            return tool_error(error_json("delegation_fanout_capped", cap=cap))
        ceiling = (
            c.options.delegation_cost_ceiling_usd
            if c.options.delegation_cost_ceiling_usd is not None
            else COST_CEILING_USD
        )
        # One spend for both ceilings: the tree's (agent_tools._budget), live from the store when the tree has a
        # budget, else own + finished children's; the tree budget's cost ceiling binds spawn_agent too.
        budget = c.options.budget_cost_usd
        ceiling = min(ceiling, budget) if budget is not None else ceiling
        spent = round(tree_spend(self.state.usage, self.state.tree_usage, self.state.budget).cost_usd, 6)
        if spent >= ceiling:
            return tool_error(error_json("request_cost_ceiling", ceiling_usd=ceiling, spent_usd=spent))
        if self.state.budget.reached is not None:
            return tool_error(error_json("budget_reached", detail=self.state.budget.reached))
        d.spawn_in_step += 1
        role = ROLES[args.role]
        child_id = self._next_child_id()
        plan = await self._lookup(
            "spawn_agent",
            contract.ACT_PLAN_SPAWN,
            PlanSpawnInput(session=self._caller(), role=role.name, parent_tools=list(c.tools)),
            PlanSpawnOutput,
            f"plan {role.name} sub-agent",
            failed=lambda exc: tool_error(error_json("sub_agent_failed", detail=str(exc.cause or exc))),
        )
        if isinstance(plan, ToolCallOutput):
            return plan
        rec = await self._start_child(
            face="spawn_agent",
            agent=c.agent,
            title=f"{role.name}: {args.task[:60]}",
            prompt=args.task,
            mode="sync",
            role=role.name,
            model=plan.model,
            tools=plan.tools,
            max_steps=clamp_steps(args.max_steps, role),
            max_tokens=SPAWN_MAX_TOKENS,
            system_prompt=args.system,
            child_id=child_id,
        )
        await self._wait_child(rec, parked=self.port.parked_call(call, "subagent", rec.session_id))
        return self._spawn_result(rec)

    @staticmethod
    def _spawn_result(rec: ChildRecord) -> ToolCallOutput:
        if rec.status != "completed":
            return tool_error(error_json("sub_agent_failed", id=rec.session_id, status=rec.status, detail=rec.error))
        return ToolCallOutput(content=spawn_result_text(rec.role or "", rec.final_message or ""))

    HANDLERS = (
        query(QUERY_SUBAGENTS, query_subagents),
        query(QUERY_HANDOFF, query_handoff),
    )
