"""``AgentSession``: one agent conversation as a durable workflow.

The loop waits on an inbox of triggers (user message, loop tick, goal continuation, sub-agent
notification, event), runs a turn for each, and waits again; it never polls. A turn is model step ->
that step's tool calls in parallel -> results -> next step, until the model answers without tool calls or
the step budget ends. Only new messages cross into history: the transcript lives in the store.
"""

# No `from __future__ import annotations` in workflow modules: the sandbox re-imports them for every run,
# and string annotations would be re-evaluated (compiled) each time by the SDK's handler inspection.

import asyncio
from typing import Any

from pydantic import ValidationError
from temporalio import workflow
from temporalio.common import RawValue, SearchAttributeUpdate
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ActivityError, ApplicationError
from temporalio.workflow import NondeterminismError

from agent_tools.workflows.approvals import PATCH_APPROVAL_PARKED, ApprovalMixin
from agent_tools.workflows.base import (
    LEAN_START_2_IMPLIES,
    LEAN_START_IMPLIES,
    MODEL_NON_RETRYABLE,
    PATCH_LEAN_START,
    PATCH_LEAN_START_2,
    InflightStep,
    call_options,
    failure_detail,
    local_call_options,
    shared_policy,
)
from agent_tools.workflows.budget import BudgetMixin
from agent_tools.workflows.delegation import DelegationMixin
from agent_tools.workflows.events import EventWaitMixin
from agent_tools.workflows.human import HumanLoopMixin
from agent_tools.workflows.native import NATIVE_TOOLS
from agent_tools.workflows.output import OutputMixin
from agent_tools.workflows.planning import PlanningMixin

with workflow.unsafe.imports_passed_through():
    from agent_tools import search_attributes as sa
    from agent_tools import tracing
    from agent_tools.activity_io import (
        ACTIVITY_LLM_STEP,
        ACTIVITY_PREPARE,
        LlmStepInput,
        LlmStepOutput,
        ToolCallInput,
        ToolCallOutput,
        tool_activity_name,
    )
    from agent_tools.boundaries import (
        NOTE_CHARS,
        cap_text,
        clean_json,
        clean_text,
        json_depth,
        model_problems,
        preview_json,
        request_problems,
    )
    from agent_tools.catalog.registry import builtin_specs
    from agent_tools.contracts.output import next_output_step
    from agent_tools.errors import InvalidInput, error_type
    from agent_tools.messages import Message, ToolCall, message_fingerprint
    from agent_tools.policy import ExecutionPolicy
    from agent_tools.progress_text import model_label, preview, shorten, step_summary
    from agent_tools.prompt import render_trigger
    from agent_tools.session import (
        TERMINAL_STATUSES,
        WORKFLOW_NAME,
        LatestMessageView,
        ParkedCall,
        ParkedStep,
        PrepareInput,
        PrepareOutput,
        SendMessage,
        SendMessageAccepted,
        SessionInput,
        SessionRequest,
        SessionResult,
        SessionState,
        SessionStatus,
        StatusView,
        StopRequest,
        Trigger,
    )
    from agent_tools.stream_state import dump_stream_state, load_stream_state

BUILTIN_SPECS = {s.name: s for s in builtin_specs()}
# Marks histories whose prepare step ran as a local activity (see ``_prepare``).
PATCH_LOCAL_PREPARE = "prepare-as-local-activity"
# Marks histories whose runs may continue-as-new in the middle of a turn parked on a durable wait.
PATCH_MID_WAIT_CAN = "continue-as-new-mid-wait"
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


@workflow.defn(name=WORKFLOW_NAME, sandboxed=False)
class AgentSession(
    ApprovalMixin, HumanLoopMixin, PlanningMixin, DelegationMixin, EventWaitMixin, BudgetMixin, OutputMixin
):
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
        self.request = decoded.request
        self._config = decoded.config
        self.state = decoded.state or SessionState()
        self.stream = WorkflowStream(prior_state=load_stream_state(decoded.stream_state))
        self._stop_reason = None
        self._turn_task: asyncio.Task[None] | None = None
        self._last_answer: str | None = None
        self._step_position = 0
        self._attributes_due: dict[str, SearchAttributeUpdate[Any]] | None = None
        if decoded.state is None and decoded.request.prompt and self._input_error is None:
            self.state.inbox.append(Trigger(kind="user", content=decoded.request.prompt))

    # ---- main loop ----------------------------------------------------------------------------------

    @workflow.run
    async def run(self, input: RawValue) -> SessionResult:
        # Sessions begun before continue-as-new mid-wait replay without it (it adds commands mid-turn). Asked
        # first thing: a patch asked for right after the prepare local activity is not yet known on replay
        # when that activity's marker closed the previous workflow task.
        # Before them all, the one marker that stands for them in runs begun since (base.PATCH_LEAN_START_2,
        # or in runs begun before it base.PATCH_LEAN_START, which stands for fewer).
        if workflow.patched(PATCH_LEAN_START_2):
            self._implied_patches = LEAN_START_2_IMPLIES
        elif workflow.patched(PATCH_LEAN_START):
            self._implied_patches = LEAN_START_IMPLIES
        self._mid_wait_can = self.patched(PATCH_MID_WAIT_CAN)
        # Approval waits became parked waits after that (histories between the two hand none of them over).
        self._approvals_park = self._mid_wait_can and self.patched(PATCH_APPROVAL_PARKED)
        # A lean run's first search attributes (the tree's and the first status) go in one command.
        self._attributes_due = {} if self._implied_patches else None
        if self._config is None:
            refusal = self._input_error or (request_problems(self.request) if self.bounded_inputs else None)
            if refusal is not None:
                self.state.inbox.clear()
                self.state.status = SessionStatus.failed
                raise ApplicationError(
                    f"refused to start: {refusal}", type=error_type(InvalidInput), non_retryable=True
                )
        if self._config is None:
            prepared = await self._prepare(self.request)
            self._config = prepared.config
            self.state.transcript_len = prepared.transcript_len
            self.state.created_at = self.now_iso()
        self._keep_only_what_runs_need()
        self._upsert_tree_attributes()
        self._on_start()
        c = self.config
        try:
            with tracing.span(
                f"invoke_agent {c.agent}",
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": c.agent,
                    "gen_ai.conversation.id": c.session_id,
                    "gen_ai.request.model": c.model,
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
        options went into the inbox, the transcript and the config; and the config's policy is the worker's
        shared object. Neither changes a command."""
        self.config.policy = shared_policy(self.config.policy)
        r = self.request
        # The identity fields, as the client sent them (a status query before the config reads them).
        self.request = SessionRequest.model_construct(
            agent=r.agent, title=r.title, parent_id=r.parent_id, root_id=r.root_id, depth=r.depth
        )

    async def _prepare(self, request: SessionRequest) -> PrepareOutput:
        args = PrepareInput(session_id=workflow.info().workflow_id, request=request)
        # Before the config exists the worker's policy is not known yet: prepare runs on the defaults.
        options = local_call_options(ExecutionPolicy().engine)
        out: PrepareOutput
        if self.patched(PATCH_LOCAL_PREPARE):
            # A local activity: a few milliseconds of store work that would otherwise cost a round trip
            # through the server (and three history events) before the first model step.
            out = await workflow.execute_local_activity(ACTIVITY_PREPARE, args, result_type=PrepareOutput, **options)
        else:
            # Sessions started before the patch replay their prepare as the activity it was.
            out = await workflow.execute_activity(ACTIVITY_PREPARE, args, result_type=PrepareOutput, **options)
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
            await self._after_turn(trigger)
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
        return self._mid_wait_can and self._stop_reason is None and self._continue_as_new_wanted()

    def _handover_due(self) -> bool:
        """Whether the run should continue-as-new now, in the middle of the turn: every tool call of the step
        still out is parked in a durable wait (none has woken and resumed) and a new run is wanted."""
        step = self._inflight
        return (
            self._mid_wait_can
            and not self._handover
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
            # From here a wait that wakes stays parked (SessionBase.parked_wait): the new run completes it.
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
        return not self.config.keep_alive and self.state.turns > 0 and not self.state.inbox and not self._pending_work()

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
                request=self.request,
                config=self._config,
                state=self.state,
                stream_state=dump_stream_state(stream_state),
            )
        )

    async def _finish_stop(self, reason: str) -> None:
        await self._on_stop(reason)
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
                    self.note_refused_step(exc)  # a budget refusal: tell the children, show it
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
            refused, approval_id = await self._resume_approval(wait, call)
            return await self._approved_call(call, refused, approval_id)
        if wait is None:
            # Cannot happen (a run hands over only when every call still out is parked); said, not raised.
            out = ToolCallOutput(content=f"Tool {call.name} was interrupted by a continue-as-new", is_error=True)
        elif wait.kind == "askUser":
            out = await self._native_tool("_resume_ask_user", wait, call)
        elif wait.kind == "wait_for_event":
            out = await self._native_tool("_resume_wait_for_event", wait, call)
        else:
            out = await self._native_tool("_resume_subagent", wait, call)
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
        # The summary names the step in the UI's timeline (``model step 3 · gpt-4.1-mini``). It costs the
        # sandbox entries of one more payload per step (docs/design-notes.md, "Workflow sandbox").
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
            ),
            result_type=LlmStepOutput,
            summary=step_summary(self.state.steps, self.config.model),
            **call_options(self.config.policy.model_step, MODEL_NON_RETRYABLE),
        )
        self.state.transcript_len = out.position
        self.state.usage = self.state.usage + out.usage
        self.note_step_spend(out)
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
        refused, approval_id = await self._await_approval(call)
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
        with tracing.span(
            f"execute_tool {call.name}",
            {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id},
        ):
            return await self._run_tool(call, approval_id)

    async def _run_tool(self, call: ToolCall, approval_id: str | None = None) -> ToolCallOutput:
        spec = BUILTIN_SPECS.get(call.name)
        self.publish("tool_started", tool=call.name, call_id=call.id, arguments=preview_json(call.arguments))
        method = NATIVE_TOOLS.get(call.name)
        if method is not None and spec is not None:
            try:
                args = spec.validate_arguments(call.arguments, limits=self.bounded_inputs, strict=self.strict_arguments)
            except ValidationError as exc:
                out = ToolCallOutput(content=spec.invalid_arguments(call.name, exc), is_error=True)
            else:
                out = await self._native_tool(method, args, call)
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
        budget = self.budget_tool_refusal(call.name)
        if budget is not None:
            return ToolCallOutput(content=budget, is_error=True)
        if call.raw_arguments is not None:
            return ToolCallOutput(
                content=f"Invalid arguments for {call.name}: arguments must be a JSON object, got {call.raw_arguments[:200]!r}",
                is_error=True,
            )
        return None

    async def _native_tool(self, method: str, args: Any, call: ToolCall) -> ToolCallOutput:
        """Run a workflow-native tool. A bug in one (any exception) becomes a tool error for the model and a
        log line for the operator: raised, it would fail the workflow task, which Temporal retries for ever."""
        try:
            out: ToolCallOutput = await getattr(self, method)(args, call)
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
        """Upsert now, or, before a lean run's first wait, with the others due (the last value of a key wins)."""
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
            sa.SESSION_TITLE.value_set(sa.title_value(c.title)),
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
        sections = [head, *self._details_sections()]
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
        return model_problems(message) or (
            f"meta is nested deeper than {MAX_META_DEPTH} levels" if json_depth(message.meta) > MAX_META_DEPTH else None
        )

    def _accept_message(self, message: SendMessage) -> None:
        self.enqueue(Trigger(kind="user", content=clean_text(message.content), meta=clean_json(message.meta)))

    @workflow.signal(name="send_message")
    def signal_send_message(self, message: SendMessage) -> None:
        refusal = self._message_refusal(message) if self.bounded_inputs else None
        if refusal is not None:
            # A signal cannot be refused: it is dropped, said in the log and on the progress stream.
            workflow.logger.warning("send_message signal dropped: %s", refusal)
            self.publish("input_rejected", input="send_message", reason=refusal[:500])
            return
        if self.bounded_inputs:
            self._accept_message(message)
        else:
            self.enqueue(Trigger(kind=message.kind, content=message.content, meta=message.meta))

    @workflow.update(name="send_message")
    def update_send_message(self, message: SendMessage) -> SendMessageAccepted:
        if self.bounded_inputs:
            self._accept_message(message)
        else:
            self.enqueue(Trigger(kind=message.kind, content=message.content, meta=message.meta))
        return SendMessageAccepted(position=len(self.state.inbox) - 1, queued_behind=len(self.state.inbox) - 1)

    @update_send_message.validator
    def _validate_send_message(self, message: SendMessage) -> None:
        refusal = self._message_refusal(message)
        if refusal is not None:
            raise ValueError(refusal)

    @workflow.signal(name="stop")
    def signal_stop(self, request: StopRequest) -> None:
        if self._stop_reason is None:
            self._stop_reason = cap_text(clean_text(request.reason), NOTE_CHARS, what="the reason")
            if self._turn_task is not None and not self._turn_task.done():
                self._turn_task.cancel()

    @workflow.query(name="status")
    def query_status(self) -> StatusView:
        c = self._config
        return StatusView(
            session_id=workflow.info().workflow_id,
            agent=c.agent if c else self.request.agent,
            title=c.title if c else (self.request.title or ""),
            status=self.state.status,
            turns=self.state.turns,
            steps=self.state.steps,
            usage=self.state.usage,
            tree_usage=self.state.tree_usage,
            parent_id=c.parent_id if c else self.request.parent_id,
            root_id=c.root_id if c else (self.request.root_id or workflow.info().workflow_id),
            depth=c.depth if c else self.request.depth,
            pending_inbox=len(self.state.inbox),
            created_at=self.state.created_at,
            updated_at=self.state.updated_at,
            error=self.state.error,
            handed_off_to=self.state.handed_off_to,
        )

    @workflow.query(name="latest_message")
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
