"""The session's shared state and the hooks capability mixins extend (each calls ``super()``)."""

import asyncio
import typing
from collections.abc import Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.contrib.workflow_streams import WorkflowStream
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from agent_tools.activity_io import ProgressEvent, ProgressKind, SessionRef, ToolCallOutput
    from agent_tools.boundaries import MAX_JSON_DEPTH, describe_validation_error, json_depth, model_problems
    from agent_tools.errors import NON_RETRYABLE_MODEL_ERRORS, NON_RETRYABLE_TOOL_ERRORS
    from agent_tools.messages import Message, ToolCall
    from agent_tools.policy import CallPolicy, ExecutionPolicy
    from agent_tools.session import ParkedCall, SessionConfig, SessionRequest, SessionState, SessionStatus, Trigger


PROGRESS_KINDS = frozenset(typing.get_args(ProgressKind))


def failure_detail(exc: BaseException) -> str:
    """The innermost application error's message (the provider's, the tool's or the child's own words) of
    an activity or child-workflow failure."""
    cause: BaseException | None = getattr(exc, "cause", None)
    while cause is not None and not isinstance(cause, ApplicationError) and getattr(cause, "cause", None) is not None:
        cause = cause.cause  # type: ignore[attr-defined]
    return cause.message if isinstance(cause, ApplicationError) else str(cause or exc)


SignalModel = typing.TypeVar("SignalModel", bound=BaseModel)


def read_signal(
    payload: RawValue, model: type[SignalModel], refusal: type[Exception], *, subject: str, verb: str, noun: str
) -> SignalModel:
    """A signal's payload, decoded by hand into ``model`` with its limits checked.

    A signal cannot be refused to its sender, and one the SDK could not decode (not JSON, nested too deeply,
    not an object) would be dropped unseen; decoded here, every bad one can be recorded with its reason.
    ``subject``/``verb``/``noun`` word the reasons ("answers are ...", "the decision is ...").

    Raises:
        refusal: the payload is not a JSON object of readable depth, or breaks ``model``'s limits.
        pydantic.ValidationError: it is an object ``model`` does not take.
    """
    try:
        data: typing.Any = workflow.payload_converter().from_payload(payload.payload, typing.Any)
    except Exception as exc:
        raise refusal(f"{subject} {verb} not JSON the session can read (malformed, or nested too deeply)") from exc
    if json_depth(data) > MAX_JSON_DEPTH:
        raise refusal(f"{subject} {verb} nested deeper than {MAX_JSON_DEPTH} levels")
    if not isinstance(data, dict):
        raise refusal(f"{subject} must be a JSON object, got {type(data).__name__}")
    value = model.model_validate(data)
    problems = model_problems(value)
    if problems is not None:
        raise refusal(f"{noun} out of bounds: {problems}")
    return value


def signal_rejection(exc: Exception, refusal: type[Exception], *, noun: str) -> str:
    """The reason recorded for a signal that could not be taken (``exc`` from reading or applying it)."""
    if isinstance(exc, refusal):
        return str(exc)
    if isinstance(exc, ValidationError):
        return f"malformed {noun}: {describe_validation_error(exc)}"
    return f"unreadable {noun}: {type(exc).__name__}"


# Errors no retry can fix: a provider's 4xx and a configuration mistake (names derived from the classes).
MODEL_NON_RETRYABLE = NON_RETRYABLE_MODEL_ERRORS
TOOL_NON_RETRYABLE = NON_RETRYABLE_TOOL_ERRORS


def retry_policy(policy: CallPolicy, non_retryable: Sequence[str] = TOOL_NON_RETRYABLE) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=policy.initial_interval_seconds),
        backoff_coefficient=policy.backoff_coefficient,
        maximum_interval=timedelta(seconds=policy.maximum_interval_seconds),
        maximum_attempts=policy.maximum_attempts,
        non_retryable_error_types=list(non_retryable),
    )


def call_options(policy: CallPolicy, non_retryable: Sequence[str] = TOOL_NON_RETRYABLE) -> dict[str, typing.Any]:
    """``execute_activity`` keyword arguments for a call of this kind."""
    return {
        "start_to_close_timeout": timedelta(seconds=policy.start_to_close_seconds),
        "heartbeat_timeout": timedelta(seconds=policy.heartbeat_seconds) if policy.heartbeat_seconds else None,
        "retry_policy": retry_policy(policy, non_retryable),
    }


def local_call_options(policy: CallPolicy) -> dict[str, typing.Any]:
    """``execute_local_activity`` keyword arguments for a call of this kind: a local activity has no
    heartbeat timeout, so only the start-to-close timeout and the retry policy of :func:`call_options`."""
    options = call_options(policy)
    return {"start_to_close_timeout": options["start_to_close_timeout"], "retry_policy": options["retry_policy"]}


def tool_error(text: str) -> ToolCallOutput:
    """An error result for the model (a tool that refused or failed; the turn goes on)."""
    return ToolCallOutput(content=text, is_error=True)


# Histories begun with this marker check the limits of the tools' schemas and of client input (see
# agent_tools.boundaries.limit); recorded ones replay with the rules they ran with.
PATCH_BOUNDED_INPUTS = "bounded-inputs"
# Histories begun with this marker refuse unknown tool parameters and "yes" for a boolean (issue 14.16);
# before it, such arguments were accepted, and recorded runs replay that way.
PATCH_STRICT_ARGUMENTS = "strict-tool-arguments"
# Runs begun with this one marker have the patches below without asking for them: each marker cost a cached
# run two history events (the SDK core upserts the TemporalChangeVersion search attribute with it), and a
# session asked five before it first waited. Asked first thing in ``AgentSession.run``; a run that has it also
# sets its first search attributes in one command (``AgentSession._flush_attributes``).
PATCH_LEAN_START = "lean-start"
# What it stands for: every patch the session asked when it was added (their constants live with their code).
LEAN_START_IMPLIES = frozenset(
    {
        "continue-as-new-mid-wait",
        "approval-parked-wait",
        "prepare-as-local-activity",
        PATCH_BOUNDED_INPUTS,
        PATCH_STRICT_ARGUMENTS,
        "loop-interval-floor",
    }
)
# The next fold: runs begun with this marker instead have every patch above and the three a session asked
# for itself since (an approval's wait, an event loaded in a local activity, an event that rode in its
# delivery). The last of them cost each woken session a marker and its TemporalChangeVersion upsert, two
# history events and a visibility update per event delivered. Asked before ``lean-start``; a history without
# it asks that, and each later patch, as before.
PATCH_LEAN_START_2 = "lean-start-2"
LEAN_START_2_IMPLIES = LEAN_START_IMPLIES | {"tool-approvals", "load-event-local", "inline-event"}


# One ExecutionPolicy object per distinct policy in a worker's process: every session of a worker decodes the
# same policy with its config (seven call policies, about 7 KiB of pydantic objects), and a cached session
# keeps its config for its life. Policies are frozen models, so a shared one cannot change under a session.
_SHARED_POLICIES: dict[str, ExecutionPolicy] = {}
_SHARED_POLICIES_MAX = 64


def shared_policy(policy: ExecutionPolicy) -> ExecutionPolicy:
    """The worker's one object equal to ``policy`` (``policy`` itself the first time)."""
    key = policy.model_dump_json()
    shared = _SHARED_POLICIES.get(key)
    if shared is not None:
        return shared
    if len(_SHARED_POLICIES) < _SHARED_POLICIES_MAX:
        _SHARED_POLICIES[key] = policy
    return policy


class InflightStep:
    """The tool calls of the model step in progress (per run, not state): which results are in, and which
    calls are parked in a durable wait. A run may continue-as-new only while every call still out is parked."""

    def __init__(
        self, step: int, message: Message, calls: list[ToolCall], results: list[ToolCallOutput | None]
    ) -> None:
        self.step = step
        self.message = message
        self.calls = calls
        self.results = results
        # index of the call -> its parked wait, from the moment it waits until it has resumed.
        self.parked: dict[int, ParkedCall] = {}

    def index_of(self, call: ToolCall) -> int | None:
        # By identity: a model may repeat a call id, and a step's calls are distinct objects.
        return next((i for i, c in enumerate(self.calls) if c is call), None)

    def all_out_parked(self) -> bool:
        out = [i for i, r in enumerate(self.results) if r is None]
        return bool(out) and all(i in self.parked for i in out)


class SessionBase:
    """Attributes every mixin may use, and hook methods with neutral defaults."""

    _bounded_inputs: bool | None = None
    # The step in progress, and whether the run is handing it to its successor (continue-as-new mid-wait).
    _inflight: InflightStep | None = None
    _handover: bool = False

    _strict_arguments: bool | None = None
    # The patches this run's lean-start marker stands for (:data:`LEAN_START_2_IMPLIES`,
    # :data:`LEAN_START_IMPLIES`, or none for a run begun before both); set first thing in ``AgentSession.run``.
    _implied_patches: frozenset[str] = frozenset()

    def patched(self, patch_id: str) -> bool:
        """``workflow.patched``, true without a marker for the patches a lean-start run stands for.

        A handler that runs before ``run`` (a signal in the first activation) asks the patch itself, as it
        always did; its replay asks in the same order.
        """
        return patch_id in self._implied_patches or workflow.patched(patch_id)

    @property
    def strict_arguments(self) -> bool:
        """Whether native tools refuse unknown parameters and non-boolean flags (:data:`PATCH_STRICT_ARGUMENTS`)."""
        if self._strict_arguments is None:
            self._strict_arguments = self.patched(PATCH_STRICT_ARGUMENTS)
        return self._strict_arguments

    @property
    def bounded_inputs(self) -> bool:
        """Whether this run checks the input limits added with :data:`PATCH_BOUNDED_INPUTS`."""
        if self._bounded_inputs is None:
            self._bounded_inputs = self.patched(PATCH_BOUNDED_INPUTS)
        return self._bounded_inputs

    request: SessionRequest
    _config: SessionConfig | None
    state: SessionState
    stream: WorkflowStream
    _stop_reason: str | None

    # ---- helpers for mixins -------------------------------------------------------------------------

    @property
    def config(self) -> SessionConfig:
        """The resolved config; set by the first activity of the first run, before any turn or tool runs."""
        assert self._config is not None, "session config is resolved before any handler needs it"
        return self._config

    @property
    def session_id(self) -> str:
        return self.config.session_id

    def session_ref(self) -> SessionRef:
        return SessionRef.of(self.config, workflow.info().run_id, self.state.turns)

    def now_iso(self) -> str:
        return workflow.now().isoformat()

    def enqueue(self, trigger: Trigger) -> None:
        self.state.inbox.append(trigger)
        self.touch()

    def publish(self, kind: str, **data: object) -> None:
        """Publish a live progress event (a ``ProgressEvent`` on the ``progress`` topic).

        It goes through the workflow's payload converter, and the poll that delivers it through the whole
        data converter, so the host's codec covers progress as it covers everything else.
        """
        if kind not in PROGRESS_KINDS:
            raise ValueError(f"unknown progress event kind {kind!r}")
        self.stream.topic("progress").publish(ProgressEvent(kind=kind, session_id=self.config.session_id, data=data))  # type: ignore[arg-type]

    async def wait_until(
        self, done: typing.Callable[[], bool], timeout: float | timedelta | None = None, *, summary: str | None = None
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
        done: typing.Callable[[], bool],
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

    def touch(self) -> None:
        self.state.updated_at = self.now_iso()

    def set_status(self, status: SessionStatus) -> None:
        raise NotImplementedError  # provided by AgentSession

    def refresh_details(self) -> None:
        raise NotImplementedError  # provided by AgentSession

    # ---- hooks --------------------------------------------------------------------------------------

    def _on_start(self) -> None:
        """Called once per run after the config is known (start background timers here)."""

    async def _after_turn(self, trigger: Trigger) -> None:
        """Called after every completed turn (goals judge here)."""

    def _pending_work(self) -> list[str]:
        """Reasons the session must not finish yet (active loops, goals, running children...)."""
        return []

    async def _on_stop(self, reason: str) -> None:
        """Called when the session stops or is cancelled (stop children here)."""

    def _details_sections(self) -> list[str]:
        """Markdown sections for the Temporal UI's current details."""
        return []
