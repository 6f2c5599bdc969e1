"""Helpers the session and its capability parts share: call options, signal decoding, failures, patch ids."""

import typing
from collections.abc import Sequence
from datetime import timedelta

from pydantic import BaseModel, ValidationError
from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ApplicationError

from agent_tools._activity_io import ProgressKind, ToolCallOutput
from agent_tools._boundaries import MAX_JSON_DEPTH, describe_validation_error, json_depth, model_problems
from agent_tools._errors import NON_RETRYABLE_MODEL_ERRORS, NON_RETRYABLE_TOOL_ERRORS
from agent_tools._messages import Message, ToolCall
from agent_tools._policy import CallPolicy, ExecutionPolicy
from agent_tools._session import ParkedCall

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


# One ExecutionPolicy object per distinct policy in a worker's process: every session of a worker decodes the
# same policy with its config (seven call policies), and a cached session
# keeps its config for its life. Policies are frozen models, so a shared one cannot change under a session.
_SHARED_POLICIES: dict[str, ExecutionPolicy] = {}
# Distinct objects each of these caches keeps at most; a new one displaces the oldest (sessions holding the
# oldest keep their object: shared objects never change).
_SHARED_MAX = 64


def shared_policy(policy: ExecutionPolicy) -> ExecutionPolicy:
    """The worker's one object equal to ``policy`` (``policy`` itself the first time)."""
    return _shared(_SHARED_POLICIES, policy.model_dump_json(), policy)


# Likewise one list per distinct tool list in a worker's process: the sessions of one agent have the same
# tools, and no workflow code changes a config's list (a change would reach every session sharing it).
_SHARED_NAMES: dict[tuple[str, ...], list[str]] = {}


def shared_names(names: list[str]) -> list[str]:
    """The worker's one list equal to ``names`` (``names`` itself the first time)."""
    return _shared(_SHARED_NAMES, tuple(names), names)


V = typing.TypeVar("V")
K = typing.TypeVar("K")


def _shared(cache: dict[K, V], key: K, value: V) -> V:
    shared = cache.get(key)
    if shared is not None:
        return shared
    if len(cache) >= _SHARED_MAX:
        del cache[next(iter(cache))]
    cache[key] = value
    return value


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
