"""``AgentSession``: one agent conversation as a durable workflow.

The loop waits on an inbox of triggers (user message, loop tick, goal continuation, sub-agent
notification, event), runs a turn for each, and waits again; it never polls. A turn is model step ->
that step's tool calls in parallel -> results -> next step, until the model answers without tool calls or
the step budget ends. Only new messages cross into history: the transcript lives in the store.
"""

import asyncio
import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue, SearchAttributeUpdate
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import NondeterminismError

from agent_tools import _metrics as metrics
from agent_tools import _search_attributes as sa
from agent_tools import _tracing as tracing
from agent_tools._activity_io import (
    ACTIVITY_LLM_STEP,
    ACTIVITY_PREPARE,
    LlmStepInput,
    LlmStepOutput,
    ProgressEvent,
    SessionRef,
    ToolCallInput,
    ToolCallOutput,
    tool_activity_name,
)
from agent_tools._boundaries import (
    NOTE_CHARS,
    cap_text,
    clean_json,
    clean_text,
    input_problems,
    json_depth,
    preview_json,
    request_problems,
)
from agent_tools._catalog.registry import builtin_specs
from agent_tools._errors import InvalidInput, error_type
from agent_tools._messages import Message, ToolCall, message_fingerprint
from agent_tools._policy import ExecutionPolicy
from agent_tools._progress_text import model_label, preview, shorten, step_summary
from agent_tools._prompt import render_trigger
from agent_tools._session import (
    TERMINAL_STATUSES,
    WORKFLOW_NAME,
    LatestMessageView,
    ParkedCall,
    ParkedStep,
    PrepareInput,
    PrepareOutput,
    SendMessage,
    SendMessageAccepted,
    SessionConfig,
    SessionInput,
    SessionRequest,
    SessionResult,
    SessionState,
    SessionStatus,
    StatusView,
    StopRequest,
    Trigger,
)
from agent_tools._session_names import (
    QUERY_LATEST_MESSAGE,
    QUERY_STATUS,
    SIGNAL_SEND_MESSAGE,
    SIGNAL_STOP,
    UPDATE_SEND_MESSAGE,
)
from agent_tools._session_start import SessionStart
from agent_tools._stream_state import dump_stream_state, load_stream_state
from agent_tools.contracts._output import next_output_step
from agent_tools.workflows._approvals import ApprovalsPart
from agent_tools.workflows._base import (
    MODEL_NON_RETRYABLE,
    PROGRESS_KINDS,
    InflightStep,
    call_options,
    failure_detail,
    local_call_options,
    shared_names,
    shared_policy,
)
from agent_tools.workflows._budget import BudgetPart
from agent_tools.workflows._delegation import DelegationPart
from agent_tools.workflows._events import EventsPart
from agent_tools.workflows._human import HumanPart
from agent_tools.workflows._native import NativeHandler, ResumeHandler, merged
from agent_tools.workflows._output import OutputPart
from agent_tools.workflows._planning import PlanningPart
from agent_tools.workflows._port import CapabilityPart, ChildHandle, part_handlers

R = TypeVar("R")
P = TypeVar("P", bound=CapabilityPart)

BUILTIN_SPECS = {s.name: s for s in builtin_specs()}
# A client message's meta: small, shallow (it is kept in the inbox and carried by continue-as-new).
MAX_META_DEPTH = 8
# Progress items carried across continue-as-new for late subscribers.
_STREAM_CARRY = 50
# Live text costs signals, each a few history events: past this history length a run stops streaming text
# (the terminal keeps its status lines, the final message still comes) so no turn can push the history
# towards Temporal's event limit.
_STREAM_HISTORY_EVENTS = 20_000
# The least continue_as_new_after_events a session runs with (SessionOptions' own lower limit).
_MIN_CAN_EVENTS = 100
# Native tool calls the current details list.
_NATIVE_CALLS_KEPT = 8


# The capability parts, in the order their hooks run (``on_stop`` in the reverse order).
PARTS: tuple[type[CapabilityPart], ...] = (
    OutputPart,
    BudgetPart,
    EventsPart,
    DelegationPart,
    PlanningPart,
    HumanPart,
    ApprovalsPart,
)


# Unsandboxed: the workflow code is deterministic by construction (tests/test_architecture.py checks every
# module it loads), and a sandbox would re-import it for every run.
@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
@part_handlers(*PARTS)
class AgentSession:
    """One agent conversation: the loop, the Temporal plumbing, and the port its capability parts reach."""

    @workflow.init
    def __init__(self, input: RawValue) -> None:
        # Decoded here rather than by the SDK: an input that cannot be decoded (a raw client's bad start) would
        # fail the workflow task before any of our code ran, and Temporal retries that for ever. This way the
        # run fails once, with the reason.
        self._input_error: str | None = None
        try:
            decoded: SessionInput = workflow.payload_converter().from_payload(input.payload, SessionInput)
        except Exception as exc:
            decoded = SessionInput(request=SessionRequest())
            self._input_error = f"the session input cannot be read: {exc}"[:1000]
        # The request until prepare has resolved it into the config (then only its identity fields are kept).
        self.request: SessionRequest | None = decoded.request
        self._identity: tuple[str, str | None, str | None, str | None, int] = ("", None, None, None, 0)
        self._config = decoded.config
        self.state = decoded.state or SessionState()
        self.stream = WorkflowStream(prior_state=load_stream_state(decoded.stream_state))
        self._stop_reason: str | None = None
        self._turn_task: asyncio.Task[None] | None = None
        self._last_answer: str | None = None
        self._step_position = 0
        # A run's first search attributes (the tree's and the first status) go in one command.
        self._attributes_due: dict[str, SearchAttributeUpdate[Any]] | None = {}
        # The step in progress, and whether the run is handing it to its successor (continue-as-new mid-wait).
        self._inflight: InflightStep | None = None
        self._handover = False
        self.output = OutputPart(self)
        self.budget = BudgetPart(self)
        self.events = EventsPart(self)
        self.delegation = DelegationPart(self)
        self.planning = PlanningPart(self)
        self.human = HumanPart(self)
        self.approvals = ApprovalsPart(self)
        self._parts: dict[type[CapabilityPart], CapabilityPart] = {
            type(p): p
            for p in (self.output, self.budget, self.events, self.delegation, self.planning, self.human, self.approvals)
        }
        assert tuple(self._parts) == PARTS
        self._native: dict[str, NativeHandler] = merged((p.native_tools() for p in self._parts.values()), "tool")
        self._resume: dict[str, ResumeHandler] = merged(
            (p.resume_handlers() for p in self._parts.values()), "parked wait"
        )
        if decoded.state is None and decoded.request.prompt and self._input_error is None:
            self.state.inbox.append(Trigger(kind="user", content=decoded.request.prompt))

    # ---- main loop ----------------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: RawValue) -> SessionResult:
        if self._config is None:
            await self._first_run_start()
        self._keep_only_what_runs_need()
        self._upsert_tree_attributes()
        for part in self._parts.values():
            part.on_start()
        c = self.config
        try:
            with tracing.span(
                f"invoke_agent {c.agent}",
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": c.agent,
                    "gen_ai.conversation.id": c.session_id,
                    "gen_ai.provider.name": c.model.partition(":")[0],
                    "gen_ai.request.model": c.model.partition(":")[2] or c.model,
                    "agent_tools.root_id": c.root_id,
                    "agent_tools.parent_id": c.parent_id,
                    "agent_tools.depth": c.depth,
                },
            ):
                await self._loop()
        except asyncio.CancelledError:
            # Cancelled from outside (client or parent): stop the subtree first, then let Temporal record it.
            await self._finish_stop("cancelled")
            raise
        # Let in-flight updates (an answer being accepted, a message) finish before the run closes.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result()

    def _keep_only_what_runs_need(self) -> None:
        """Once the config is resolved, the run (cached for as long as the session waits) and the runs it
        continues as keep no copy of what prepare consumed: the request's prompt, history, system prompt and
        options went into the inbox, the transcript and the config; and the config's policy and tool list are
        the worker's shared objects. Neither changes a command."""
        self.config.policy = shared_policy(self.config.policy)
        self.config.tools = shared_names(self.config.tools)
        r = self.request
        if r is None:
            return  # already kept
        # The identity fields, as the client sent them: continue-as-new carries them as its request. Kept as
        # a tuple, not a model (a model with its defaults costs each cached session about 3 KiB).
        self._identity = (r.agent, r.title, r.parent_id, r.root_id, r.depth)
        self.request = None

    async def _first_run_start(self) -> None:
        """Refuse a request out of bounds, else resolve it into the config. Its own frame: the run's would keep
        the request for as long as the session lives."""
        request = self.request
        assert request is not None  # dropped only once the config is resolved
        refusal = self._input_error or request_problems(request)
        if refusal is not None:
            self.state.inbox.clear()
            self.state.status = SessionStatus.failed
            raise ApplicationError(f"refused to start: {refusal}", type=error_type(InvalidInput), non_retryable=True)
        prepared = await self._prepare(request)
        self._config = prepared.config
        metrics.session_started(self._config.agent)
        self.state.transcript_len = prepared.transcript_len
        self.state.created_at = self.now_iso()

    def _carried_request(self) -> SessionRequest:
        """The request continue-as-new carries: only the identity fields, as the client sent them."""
        agent, title, parent_id, root_id, depth = self._identity
        return SessionRequest.model_construct(
            agent=agent, title=title, parent_id=parent_id, root_id=root_id, depth=depth
        )

    async def _prepare(self, request: SessionRequest) -> PrepareOutput:
        info = workflow.info()
        # Only the activity's input changes (not a command): recorded histories replay as they ran.
        args = PrepareInput(session_id=info.workflow_id, request=request, run_chain=info.first_execution_run_id)
        # Before the config exists the worker's policy is not known yet: prepare runs on the defaults.
        options = local_call_options(ExecutionPolicy().engine)
        # A local activity: a few milliseconds of store work that would otherwise cost a round trip through the
        # server (and three history events) before the first model step.
        out: PrepareOutput = await workflow.execute_local_activity(
            ACTIVITY_PREPARE, args, result_type=PrepareOutput, **options
        )
        return out

    async def _loop(self) -> None:
        turns_this_run = 0
        can_after = self.config.options.continue_as_new_after_turns or 0
        resume, self.state.parked = self.state.parked, None
        while True:
            if resume is not None:
                # The previous run continued-as-new in the middle of this turn's step: resume its waits.
                trigger = resume.trigger
                self._flush_attributes()
            else:
                self.set_status(SessionStatus.idle if not self.state.inbox else SessionStatus.running)
                self._flush_attributes()
                await workflow.wait_condition(
                    lambda: (
                        bool(self.state.inbox)
                        or self._stop_reason is not None
                        or self._may_finish()
                        or self._idle_handover_due()
                    )
                )
                if self._stop_reason is not None:
                    await self._finish_stop(self._stop_reason)
                    return
                if not self.state.inbox and not self._may_finish() and self._idle_handover_due():
                    # Idle, but the history grew (signals, rejected input, polls that returned items): no turn
                    # will end to check it, so the idle session continues here.
                    await self._continue_as_new()
                if not self.state.inbox:
                    self.set_status(SessionStatus.completed)
                    return
                trigger = self.state.inbox.pop(0)
            self._turn_task = asyncio.create_task(self._traced_turn(trigger, resume))
            resume = None
            try:
                await self._await_turn(self._turn_task, trigger)
            except asyncio.CancelledError:
                if self._stop_reason is None:
                    raise
            finally:
                self._turn_task = None
                self._inflight = None
            if self._stop_reason is not None:
                continue
            if self.state.status in TERMINAL_STATUSES:
                return  # a tool ended the session's part (hand-off)
            if self.state.error is not None and not self.config.keep_alive:
                self.set_status(SessionStatus.failed)
                return
            for part in self._parts.values():
                await part.after_turn(trigger)
            turns_this_run += 1
            if self._continue_as_new_wanted() or (can_after and turns_this_run >= can_after):
                await self._continue_as_new()

    def _continue_as_new_wanted(self) -> bool:
        """Temporal suggests it, or the run's history has reached the session's own budget."""
        info = workflow.info()
        budget = self.config.options.continue_as_new_after_events or 0
        if budget:
            # An agent file's options skip the request's limits: a tiny budget would make every new run, which
            # starts with a few dozen events, continue again at once.
            budget = max(budget, _MIN_CAN_EVENTS)
        return info.is_continue_as_new_suggested() or bool(budget and info.get_current_history_length() >= budget)

    def _idle_handover_due(self) -> bool:
        return self._stop_reason is None and self._continue_as_new_wanted()

    def _handover_due(self) -> bool:
        """Whether the run should continue-as-new now, in the middle of the turn: every tool call of the step
        still out is parked in a durable wait (none has woken and resumed) and a new run is wanted."""
        step = self._inflight
        return (
            not self._handover
            and self._stop_reason is None
            and step is not None
            and step.all_out_parked()
            and self._continue_as_new_wanted()
        )

    async def _await_turn(self, task: asyncio.Task[None], trigger: Trigger) -> None:
        """Wait for the turn; meanwhile hand a parked step to a new run when continue-as-new is due."""
        while not task.done():
            await workflow.wait_condition(lambda: task.done() or self._handover_due())
            # Checked again, not trusted from the condition: a wait that woke in the same activation may have
            # resumed in between, and its result must then go on in this run.
            if task.done() or not self._handover_due():
                continue
            step = self._inflight
            assert step is not None  # _handover_due checked it
            # From here a wait that wakes stays parked (``parked_wait``): the new run completes it.
            self._handover = True
            await self._drain()
            if self._stop_reason is not None:
                break  # a stop arrived during the hand-over: the turn is cancelled, the session stops here
            self.state.parked = ParkedStep(
                trigger=trigger,
                step=step.step,
                message=step.message,
                results=list(step.results),
                waits=[step.parked[i] for i in sorted(step.parked)],
                last_answer=self._last_answer,
            )
            self._hand_over()
        await task

    def _may_finish(self) -> bool:
        return (
            not self.config.keep_alive
            and self.state.turns > 0
            and not self.state.inbox
            and not any(p.pending_work() for p in self._parts.values())
        )

    async def _continue_as_new(self) -> None:
        await self._drain()
        self._hand_over()

    async def _drain(self) -> None:
        """Release the progress pollers and let every handler finish (messages, answers, updates in flight
        are answered by this run) before the state is taken, as Temporal recommends for continue-as-new."""
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)

    def _hand_over(self) -> None:
        stream_state = self.stream.get_state()
        # Late subscribers need only the recent progress; the transcript keeps the rest.
        drop = max(0, len(stream_state.log) - _STREAM_CARRY)
        stream_state.base_offset += drop
        stream_state.log = stream_state.log[drop:]
        workflow.continue_as_new(
            SessionInput(
                request=self._carried_request(),
                config=self._config,
                state=self.state,
                stream_state=dump_stream_state(stream_state),
            )
        )

    async def _finish_stop(self, reason: str) -> None:
        for part in reversed(self._parts.values()):
            await part.on_stop(reason)
        self.state.error = None
        self.set_status(SessionStatus.stopped)

    # ---- one turn -----------------------------------------------------------------------------------

    async def _traced_turn(self, trigger: Trigger, resume: ParkedStep | None = None) -> None:
        with tracing.span(
            f"turn {self.state.turns + (0 if resume else 1)}",
            {"agent_tools.turn": self.state.turns + (0 if resume else 1), "agent_tools.trigger": trigger.kind},
        ):
            await self._run_turn(trigger, resume)

    async def _run_turn(self, trigger: Trigger, resume: ParkedStep | None = None) -> None:
        new_messages: list[Message] = []
        first = 0
        if resume is None:
            self.set_status(SessionStatus.running)
            self.state.turns += 1
            self.publish("turn_started", turn=self.state.turns, trigger=trigger.kind)
            content = render_trigger(trigger.kind, trigger.content, trigger.meta)
            # Tool results a budget-ended turn could not send go first, so every tool call keeps its result.
            new_messages = [*self.state.unsent, Message(role="user", content=content)]
            self.state.last_input = LatestMessageView(
                message_id=f"{self.config.session_id}:{self.state.transcript_len + len(new_messages) - 1}",
                role="user",
                content=content,
                created_at=self.now_iso(),
            )
            self.state.unsent = []
            self.state.error = None
        else:
            first = resume.step - 1
            self._last_answer = resume.last_answer
        for step in range(first, self.config.max_steps):
            if resume is not None:
                message = resume.message
            else:
                try:
                    out = await self._llm_step(new_messages)
                except ActivityError as exc:
                    # The model call failed for good (a 4xx, or retries exhausted). The session keeps what it
                    # has, says why, and (when kept alive) waits for the next message; the messages stay unsent.
                    self.state.unsent = new_messages
                    self.state.error = f"model call failed: {failure_detail(exc)}"
                    self.budget.note_refused_step(exc)  # a budget refusal: tell the children, show it
                    self._remember_message(Message(role="assistant", content=f"({self.state.error})"))
                    self.publish("assistant_message", content=f"({self.state.error})")
                    return
                message = out.message
                self._remember_message(message)
                if message.content:
                    # ``position`` ties the message to its step's live text (text_delta items).
                    self.publish("assistant_message", content=message.content, position=self._step_position)
                if not message.tool_calls:
                    # Structured results: an answer that does not match the schema goes back with the reason.
                    verdict = next_output_step(self.config.output, self.state.output, out, self.state.turns)
                    if verdict.feedback is None:
                        self.state.error = verdict.error
                        break
                    new_messages = [verdict.feedback]
                    continue
                # A session waits in its step's calls for as long as they take (askUser: days): it keeps the
                # message, not the step's whole output (its usage is already added up).
                del out
            outputs = await self._step_calls(step + 1, message, resume)
            resume = None
            new_messages = [
                Message(
                    role="tool", tool_call_id=call.id, name=call.name, content=o.content, artifact_ref=o.artifact_ref
                )
                for call, o in zip(message.tool_calls, outputs, strict=True)
            ]
            if self.state.status in TERMINAL_STATUSES:
                self.state.unsent = new_messages
                return
        else:
            self.state.unsent = new_messages
            notice = f"(stopped after the step budget of {self.config.max_steps} steps for one turn)"
            self._remember_message(Message(role="assistant", content=notice))
        self.publish("turn_finished", turn=self.state.turns)
        self.refresh_details()

    async def _step_calls(self, step: int, message: Message, resume: ParkedStep | None) -> list[ToolCallOutput]:
        """The step's tool calls in parallel, tracked so that the run can continue-as-new while they wait."""
        calls = message.tool_calls
        results: list[ToolCallOutput | None] = list(resume.results) if resume is not None else [None] * len(calls)
        inflight = InflightStep(step, message, calls, results)
        self._inflight = inflight
        parked = {p.index: p for p in resume.waits} if resume is not None else {}

        async def one(index: int, call: ToolCall) -> ToolCallOutput:
            done = inflight.results[index]
            if done is not None:
                return done  # already in before the continue-as-new
            wait = parked.get(index)
            out = await (self._call_tool(call) if resume is None else self._resume_call(call, wait))
            inflight.results[index] = out
            return out

        outputs = await asyncio.gather(*(one(i, call) for i, call in enumerate(calls)))
        self._inflight = None
        return list(outputs)

    async def _resume_call(self, call: ToolCall, wait: ParkedCall | None) -> ToolCallOutput:
        """Finish a call the previous run handed over in the middle of its wait."""
        if wait is not None and wait.kind == "approval":
            # Waiting for a person's approval: once it comes, the tool runs here (it publishes its own end).
            refused, approval_id = await self.approvals.resume_approval(wait, call)
            return await self._approved_call(call, refused, approval_id)
        resume = self._resume.get(wait.kind) if wait is not None else None
        if wait is None or resume is None:
            # Cannot happen (a run hands over only when every call still out is parked); said, not raised.
            out = ToolCallOutput(content=f"Tool {call.name} was interrupted by a continue-as-new", is_error=True)
        else:
            out = await self._native_tool(resume, wait, call)
        spec = BUILTIN_SPECS.get(call.name)
        self._trace_native(spec.summary(call.arguments) if spec else call.name, out)
        self.publish(
            "tool_finished", tool=call.name, call_id=call.id, is_error=out.is_error, preview=preview(out.content, 200)
        )
        return out

    def _stream_text(self) -> bool:
        return (
            self.config.options.stream_text is not False
            and workflow.info().get_current_history_length() < _STREAM_HISTORY_EVENTS
        )

    async def _llm_step(self, new_messages: list[Message]) -> LlmStepOutput:
        self.state.steps += 1
        self._step_position = self.state.transcript_len
        self.publish("step_started", step=self.state.steps, position=self._step_position, model=self.config.model)
        # The summary names the step in the UI's timeline (``model step 3 · gpt-4.1-mini``).
        out: LlmStepOutput = await workflow.execute_activity(
            ACTIVITY_LLM_STEP,
            LlmStepInput(
                session=self.session_ref(),
                position=self.state.transcript_len,
                new_messages=new_messages,
                tools=self.config.tools,
                model=self.config.model,
                max_tokens=self.config.max_tokens,
                title=self.config.title,
                role=self.config.role,
                last_answer=self._last_answer,
                stream=self._stream_text(),
                step=self.state.steps,
                output=self.config.output,
                schema_minimums=self.planning.schema_minimums(),
            ),
            result_type=LlmStepOutput,
            summary=step_summary(self.state.steps, self.config.model),
            **call_options(self.config.policy.model_step, MODEL_NON_RETRYABLE),
        )
        self.state.transcript_len = out.position
        self.state.usage = self.state.usage + out.usage
        self.budget.note_step_spend(out)
        self._last_answer = message_fingerprint(out.message)
        return out

    def _remember_message(self, message: Message) -> None:
        self.state.last_input = None  # the answer is now the latest message
        self.state.last_message = message
        self.state.last_message_id = f"{self.config.session_id}:{self.state.transcript_len - 1}"
        self.state.last_message_at = self.now_iso()
        self.touch()

    async def _call_tool(self, call: ToolCall) -> ToolCallOutput:
        refused = self._refuse_call(call)
        if refused is not None:
            self.publish(
                "tool_finished", tool=call.name, call_id=call.id, is_error=True, preview=preview(refused.content, 200)
            )
            return refused
        # A call that needs a person's approval waits for it here; denied or timed out, it never runs.
        refused, approval_id = await self.approvals.await_approval(call)
        return await self._approved_call(call, refused, approval_id)

    async def _approved_call(
        self, call: ToolCall, refused: ToolCallOutput | None, approval_id: str | None
    ) -> ToolCallOutput:
        """The call after its approval gate: the refusal when it must not run, else the tool's result."""
        if refused is not None:
            self.publish(
                "tool_finished", tool=call.name, call_id=call.id, is_error=True, preview=preview(refused.content, 200)
            )
            return refused
        builtin = BUILTIN_SPECS.get(call.name)
        with tracing.span(
            f"execute_tool {call.name}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": tracing.tool_type(builtin.capability if builtin else None),
            },
        ):
            return await self._run_tool(call, approval_id)

    async def _run_tool(self, call: ToolCall, approval_id: str | None = None) -> ToolCallOutput:
        spec = BUILTIN_SPECS.get(call.name)
        self.publish("tool_started", tool=call.name, call_id=call.id, arguments=preview_json(call.arguments))
        handler = self._native.get(call.name)
        if handler is not None and spec is not None:
            try:
                args = spec.validate_arguments(call.arguments)
            except ValidationError as exc:
                out = ToolCallOutput(content=spec.invalid_arguments(call.name, exc), is_error=True)
            else:
                out = await self._native_tool(handler, args, call)
            self._trace_native(spec.summary(call.arguments), out)
        else:
            out = await self._activity_tool(call, spec.summary(call.arguments) if spec else call.name, approval_id)
        if out.usage is not None:
            self.state.tree_usage = self.state.tree_usage + out.usage
        self.publish(
            "tool_finished", tool=call.name, call_id=call.id, is_error=out.is_error, preview=preview(out.content, 200)
        )
        return out

    def _refuse_call(self, call: ToolCall) -> ToolCallOutput | None:
        """The tool error for a call that cannot run at all (unknown tool, arguments not taken), or None."""
        if call.name not in self.config.tools:
            return ToolCallOutput(
                content=f"Unknown tool {call.name!r}. Available tools: {', '.join(self.config.tools)}", is_error=True
            )
        if call.refused is not None:
            return ToolCallOutput(content=f"Invalid arguments for {call.name}: {call.refused}", is_error=True)
        budget = self.budget.tool_refusal(call.name)
        if budget is not None:
            return ToolCallOutput(content=budget, is_error=True)
        if call.raw_arguments is not None:
            return ToolCallOutput(
                content=f"Invalid arguments for {call.name}: arguments must be a JSON object, got {call.raw_arguments[:200]!r}",
                is_error=True,
            )
        return None

    async def _native_tool(self, handler: NativeHandler | ResumeHandler, args: Any, call: ToolCall) -> ToolCallOutput:
        """Run a workflow-native tool. A bug in one (any exception) becomes a tool error for the model and a
        log line for the operator: raised, it would fail the workflow task, which Temporal retries for ever."""
        try:
            out: ToolCallOutput = await handler(args, call)
        except NondeterminismError:
            raise  # the code no longer matches the history: only a deploy can fix that
        except Exception as exc:
            workflow.logger.exception("workflow-native tool %s failed", call.name)
            return ToolCallOutput(content=f"Tool {call.name} failed: {type(exc).__name__}: {exc}"[:2000], is_error=True)
        return out

    def _trace_native(self, summary: str, out: ToolCallOutput) -> None:
        """One line for the current details: a native tool runs no activity, so this is its trace in the UI."""
        mark = "✗" if out.is_error else "✓"
        line = f"{workflow.now():%H:%M:%S} · turn {self.state.turns} · {summary} {mark} {shorten(preview(out.content), 80)}"
        calls = self.state.native_calls
        calls.append(line)
        del calls[:-_NATIVE_CALLS_KEPT]
        self.refresh_details()

    async def _activity_tool(self, call: ToolCall, summary: str, approval_id: str | None = None) -> ToolCallOutput:
        try:
            out: ToolCallOutput = await workflow.execute_activity(
                tool_activity_name(call.name),
                ToolCallInput(
                    session=self.session_ref(),
                    call_id=call.id,
                    name=call.name,
                    arguments=call.arguments,
                    approval_id=approval_id,
                ),
                result_type=ToolCallOutput,
                summary=summary,
                **call_options(self.config.policy.tool_call),
            )
        except ActivityError as exc:
            return ToolCallOutput(content=f"Tool {call.name} failed: {failure_detail(exc)}", is_error=True)
        return out

    # ---- status, UI ---------------------------------------------------------------------------------

    def set_status(self, status: SessionStatus) -> None:
        if self.state.status == status:
            return
        self.state.status = status
        self.touch()
        self.publish("status", status=status.value)
        if self.config.options.search_attributes is not False:
            # Same command as before, one more key: the tree listing reads when a session last changed state.
            self._upsert_attributes(
                [sa.SESSION_STATE.value_set(status.value), sa.SESSION_UPDATED_AT.value_set(workflow.now())]
            )
        self.refresh_details()

    def _upsert_attributes(self, updates: list[SearchAttributeUpdate[Any]]) -> None:
        """Upsert now, or, before the run's first wait, with the others due (the last value of a key wins)."""
        due = self._attributes_due
        if due is None:
            workflow.upsert_search_attributes(updates)
            return
        for update in updates:
            due[update.key.name] = update

    def _flush_attributes(self) -> None:
        """The search attributes due, in one command (once per run; from then on each upsert is its own)."""
        due, self._attributes_due = self._attributes_due, None
        if due is None:
            return
        # What the run already has (set at start by the client or the parent, or carried by continue-as-new)
        # is left out: the UI shows the same attributes either way.
        have = workflow.info().typed_search_attributes
        updates = [u for u in due.values() if have.get(u.key) != u.value]
        if updates:
            workflow.upsert_search_attributes(updates)

    def _upsert_tree_attributes(self) -> None:
        if self.config.options.search_attributes is False:
            return
        c = self.config
        updates: list[SearchAttributeUpdate[Any]] = [
            sa.AGENT_NAME.value_set(c.agent),
            sa.SESSION_ROOT_ID.value_set(c.root_id),
            sa.DEPTH.value_set(c.depth),
            sa.SESSION_STATE.value_set(self.state.status.value),
            sa.SESSION_TITLE.value_set(sa.title_value(c.visible_title or c.title)),
        ]
        if c.parent_id:
            updates.append(sa.SESSION_PARENT_ID.value_set(c.parent_id))
        self._upsert_attributes(updates)

    def refresh_details(self) -> None:
        c = self.config
        head = (
            f"**{c.title}**  \nagent `{c.agent}` · model `{model_label(c.model)}` · status **{self.state.status.value}**"
            f" · turns {self.state.turns}"
            f" · steps {self.state.steps} · tokens {self.state.usage.input_tokens}+{self.state.usage.output_tokens}"
        )
        sections = [head, *(line for p in self._parts.values() for line in p.details_sections())]
        if self.state.native_calls:
            sections.append("**Workflow tools (latest)**\n" + "\n".join(f"- {c}" for c in self.state.native_calls))
        workflow.set_current_details("\n\n".join(sections))

    def _result(self) -> SessionResult:
        last = self.state.last_message
        return SessionResult(
            session_id=self.config.session_id,
            status=self.state.status,
            final_message=last.content if last else None,
            usage=self.state.usage,
            tree_usage=self.state.tree_usage,
            error=self.state.error,
            handed_off_to=self.state.handed_off_to,
            output=self.state.output.value if self.state.output.valid else None,
        )

    # ---- messages in --------------------------------------------------------------------------------

    def _message_refusal(self, message: SendMessage) -> str | None:
        """Why a client's message cannot be taken, or None."""
        if self.state.status in TERMINAL_STATUSES or self._stop_reason is not None:
            return f"session is {self.state.status.value}; it takes no more messages"
        if message.kind != "user":
            # Sub-agent notifications, loop ticks, events and goal turns come from the session itself.
            return f"send_message takes user messages; {message.kind!r} messages come from the session itself"
        return input_problems(message) or (
            f"meta is nested deeper than {MAX_META_DEPTH} levels" if json_depth(message.meta) > MAX_META_DEPTH else None
        )

    def _accept_message(self, message: SendMessage) -> None:
        self.enqueue(Trigger(kind="user", content=clean_text(message.content), meta=clean_json(message.meta)))

    @workflow.signal(name=SIGNAL_SEND_MESSAGE)
    def signal_send_message(self, message: SendMessage) -> None:
        refusal = self._message_refusal(message)
        if refusal is not None:
            # A signal cannot be refused: it is dropped, said in the log and on the progress stream.
            workflow.logger.warning("send_message signal dropped: %s", refusal)
            self.publish("input_rejected", input="send_message", reason=refusal[:500])
            return
        self._accept_message(message)

    @workflow.update(name=UPDATE_SEND_MESSAGE)
    def update_send_message(self, message: SendMessage) -> SendMessageAccepted:
        self._accept_message(message)
        return SendMessageAccepted(position=len(self.state.inbox) - 1, queued_behind=len(self.state.inbox) - 1)

    @update_send_message.validator
    def _validate_send_message(self, message: SendMessage) -> None:
        refusal = self._message_refusal(message)
        if refusal is not None:
            raise ValueError(refusal)

    @workflow.signal(name=SIGNAL_STOP)
    def signal_stop(self, request: StopRequest) -> None:
        if self._stop_reason is None:
            self._stop_reason = cap_text(clean_text(request.reason), NOTE_CHARS, what="the reason")
            if self._turn_task is not None and not self._turn_task.done():
                self._turn_task.cancel()

    @workflow.query(name=QUERY_STATUS)
    def query_status(self) -> StatusView:
        c, r = self._config, self.request
        if c is not None:
            agent, title, parent_id, root_id, depth = c.agent, c.title, c.parent_id, c.root_id, c.depth
        else:
            assert r is not None  # dropped only once the config is resolved
            agent, title, parent_id, depth = r.agent, r.title or "", r.parent_id, r.depth
            root_id = r.root_id or workflow.info().workflow_id
        return StatusView(
            session_id=workflow.info().workflow_id,
            agent=agent,
            title=title,
            status=self.state.status,
            turns=self.state.turns,
            steps=self.state.steps,
            usage=self.state.usage,
            tree_usage=self.state.tree_usage,
            parent_id=parent_id,
            root_id=root_id,
            depth=depth,
            pending_inbox=len(self.state.inbox),
            created_at=self.state.created_at,
            updated_at=self.state.updated_at,
            error=self.state.error,
            handed_off_to=self.state.handed_off_to,
        )

    @workflow.query(name=QUERY_LATEST_MESSAGE)
    def query_latest_message(self) -> LatestMessageView:
        if self.state.last_input is not None:
            return self.state.last_input
        m = self.state.last_message
        return LatestMessageView(
            message_id=self.state.last_message_id if m else None,
            role=m.role if m else None,
            content=m.content if m else "",
            created_at=self.state.last_message_at if m else None,
        )

    # ---- the port its parts reach it through (SessionPort) --------------------------------------------

    def part(self, cls: type[P]) -> P:
        """This run's part of class ``cls`` (the parts' signals, updates and queries are routed by it)."""
        part = self._parts[cls]
        assert isinstance(part, cls)
        return part

    @property
    def config(self) -> SessionConfig:
        """The resolved config; set by the first activity of the first run, before any turn or tool runs."""
        assert self._config is not None, "session config is resolved before any handler needs it"
        return self._config

    @property
    def prepared(self) -> bool:
        return self._config is not None

    @property
    def stopping(self) -> bool:
        return self._stop_reason is not None

    @property
    def logger(self) -> logging.LoggerAdapter[logging.Logger]:
        return workflow.logger

    def patched(self, patch_id: str) -> bool:
        """``workflow.patched``: the one place a workflow change made after 1.0.0 asks its patch id."""
        return workflow.patched(patch_id)

    def now(self) -> datetime:
        return workflow.now()

    def now_iso(self) -> str:
        return workflow.now().isoformat()

    def uuid4(self) -> str:
        return str(workflow.uuid4())

    def touch(self) -> None:
        self.state.updated_at = self.now_iso()

    def enqueue(self, trigger: Trigger) -> None:
        self.state.inbox.append(trigger)
        self.touch()

    def session_ref(self) -> SessionRef:
        return SessionRef.of(self.config, workflow.info().run_id, self.state.turns)

    def publish(self, kind: str, **data: object) -> None:
        """Publish a live progress event (a ``ProgressEvent`` on the ``progress`` topic).

        It goes through the workflow's payload converter, and the poll that delivers it through the whole
        data converter, so the host's codec covers progress as it covers everything else.
        """
        if kind not in PROGRESS_KINDS:
            raise ValueError(f"unknown progress event kind {kind!r}")
        metrics.on_progress(kind, data, agent=self.config.agent, tools=self.config.tools)
        self.stream.topic("progress").publish(ProgressEvent(kind=kind, session_id=self.config.session_id, data=data))  # type: ignore[arg-type]

    async def wait_condition(
        self, done: Callable[[], bool], timeout: float | timedelta | None = None, *, summary: str | None = None
    ) -> None:
        await workflow.wait_condition(done, timeout=timeout, timeout_summary=summary)

    async def wait_until(
        self, done: Callable[[], bool], timeout: float | timedelta | None = None, *, summary: str | None = None
    ) -> None:
        """``workflow.wait_condition`` for a tool's durable wait, which also ends when the session stops.

        A stop cancels the running turn, but an activity that completes in the same activation absorbs that
        cancellation (Temporal hands back its result), and the turn goes on into its wait. So the waits check
        the stop themselves. Raises ``asyncio.CancelledError`` when stopped first, ``TimeoutError`` on timeout.
        ``summary`` names the timer in the Temporal UI's timeline.
        """
        await workflow.wait_condition(
            lambda: done() or self._stop_reason is not None, timeout=timeout, timeout_summary=summary
        )
        if self._stop_reason is not None and not done():
            raise asyncio.CancelledError(f"session stopped: {self._stop_reason}")

    def parked_call(self, call: ToolCall, kind: str, ref: str) -> ParkedCall | None:
        """The parked-wait record for ``call`` of the step in progress (None outside a tracked step)."""
        step = self._inflight
        index = step.index_of(call) if step is not None else None
        if index is None:
            return None
        return ParkedCall(index=index, kind=kind, ref=ref)  # type: ignore[arg-type]

    async def parked_wait(
        self,
        parked: ParkedCall | None,
        done: Callable[[], bool],
        timeout: float | timedelta | None = None,
        *,
        summary: str | None = None,
    ) -> None:
        """:meth:`wait_until` for a wait the run may continue-as-new in the middle of.

        While it waits the call is parked: the session loop may hand the step to a new run (the waits'
        records are in the state). A wait that wakes once the hand-over has begun stays parked (it never
        completes in this run); the new run finds the answer, the event or the passed deadline in the carried
        state and completes the call there, so a call is completed exactly once.
        """
        step = self._inflight
        if parked is not None and step is not None:
            step.parked[parked.index] = parked
        timed_out = False
        try:
            await self.wait_until(done, timeout=timeout, summary=summary)
        except TimeoutError:
            timed_out = True
        if self._handover:
            # Only a stop (which cancels the turn) ends this: the run continues-as-new around it.
            await workflow.wait_condition(lambda: False)
        if parked is not None and step is not None:
            step.parked.pop(parked.index, None)
        if timed_out:
            raise TimeoutError

    async def execute_activity(
        self,
        activity: str,
        arg: Any,
        *,
        result_type: type[R] | None,
        summary: str | None,
        options: Mapping[str, Any],
        local: bool = False,
    ) -> R:
        out: R
        if local:
            out = await workflow.execute_local_activity(
                activity, arg, result_type=result_type, summary=summary, **options
            )
        else:
            out = await workflow.execute_activity(activity, arg, result_type=result_type, summary=summary, **options)
        return out

    async def start_child(self, session: SessionInput, start: SessionStart) -> ChildHandle:
        # Abandoned: Temporal applies the close policy when a parent continues-as-new too. The child runs
        # with the deployment's workflow task timeout (a policy setting the client starts a root with).
        handle = await workflow.start_child_workflow(
            start.workflow,
            session,
            id=start.id,
            result_type=SessionResult,
            parent_close_policy=workflow.ParentClosePolicy.ABANDON,
            task_timeout=workflow.info().task_timeout,
            static_summary=start.summary,
            static_details=start.details,
            search_attributes=start.search_attributes,
            id_reuse_policy=start.id_reuse_policy,
        )
        return handle

    async def signal_external(self, workflow_id: str, signal: str, arg: Any) -> None:
        await workflow.get_external_workflow_handle(workflow_id).signal(signal, arg)
