"""Our metrics (``agent_tools_*``), recorded through the Temporal SDK's metric meters, so that they leave the
worker by the same exporter as the SDK's own ``temporal_*`` metrics (the worker's runtime; see
``AGENT_TOOLS_METRICS_BIND``). Without an exporter the meters are no-ops and all of this costs nothing.

Workflows record through ``workflow.metric_meter()``, which records nothing while a workflow replays, so a
count moves once per thing that happened however often its history is replayed. Activities record through
``activity.metric_meter()``; a retried activity counts each attempt, which is what a call to a provider is.

Where counts are taken (and only there): a session's start and the progress events every session publishes
(status, tool calls, questions, approvals) in the workflow; the model-call activity, the spill of a large
result and the sandbox in activities. Label values come from bounded sets: a tool the session does not have
is counted as ``unknown``, so that a model inventing names cannot make new series.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from temporalio import activity, workflow
from temporalio.common import MetricMeter

__all__ = [
    "COST_BUCKETS_USD",
    "METRIC_NAMES",
    "model_call",
    "model_call_failed",
    "on_progress",
    "sandbox_run",
    "session_started",
    "spilled",
]

SESSIONS_STARTED = "agent_tools_sessions_started"
SESSIONS_ENDED = "agent_tools_sessions_ended"
TOOL_CALLS = "agent_tools_tool_calls"
TOOL_ERRORS = "agent_tools_tool_errors"
QUESTION_WAITS = "agent_tools_question_waits"
APPROVAL_WAITS = "agent_tools_approval_waits"
APPROVAL_DECISIONS = "agent_tools_approval_decisions"
MODEL_CALLS = "agent_tools_model_calls"
MODEL_CALL_FAILURES = "agent_tools_model_call_failures"
MODEL_TOKENS = "agent_tools_model_tokens"
MODEL_COST = "agent_tools_model_cost_usd"
SPILLS = "agent_tools_spills"
SANDBOX_RUNS = "agent_tools_sandbox_runs"

METRIC_NAMES = (
    SESSIONS_STARTED, SESSIONS_ENDED, TOOL_CALLS, TOOL_ERRORS, QUESTION_WAITS, APPROVAL_WAITS, APPROVAL_DECISIONS,
    MODEL_CALLS, MODEL_CALL_FAILURES, MODEL_TOKENS, MODEL_COST, SPILLS, SANDBOX_RUNS,
)  # fmt: skip

# Per-call cost buckets: the histogram's _sum is the spend, its _count the priced calls.
COST_BUCKETS_USD = (0.0001, 0.001, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)

_TERMINAL = frozenset({"completed", "stopped", "failed", "handed_off"})
_APPROVAL_OUTCOMES = frozenset({"approved", "denied", "timed_out"})
_LABEL_CHARS = 120


def _label(value: object) -> str:
    return str(value)[:_LABEL_CHARS]


def _tool_label(name: object, tools: Collection[str]) -> str:
    return _label(name) if isinstance(name, str) and name in tools else "unknown"


def _count(meter: MetricMeter | None, name: str, description: str, attributes: Mapping[str, str], n: int = 1) -> None:
    if meter is not None and n > 0:
        meter.create_counter(name, description).add(n, dict(attributes))


def _workflow_meter() -> MetricMeter | None:
    return workflow.metric_meter() if workflow.in_workflow() else None


def _activity_meter() -> MetricMeter | None:
    return activity.metric_meter() if activity.in_activity() else None


# ---- in workflows ------------------------------------------------------------------------------------


def session_started(agent: str) -> None:
    """A session's first run began (not a continued run)."""
    _count(_workflow_meter(), SESSIONS_STARTED, "Sessions started", {"agent": _label(agent)})


def on_progress(kind: str, data: Mapping[str, object], *, agent: str, tools: Collection[str]) -> None:
    """Count what a session's progress event says happened."""
    meter = _workflow_meter()
    if meter is None:
        return
    if kind == "status" and data.get("status") in _TERMINAL:
        outcome = {"agent": _label(agent), "outcome": _label(data["status"])}
        _count(meter, SESSIONS_ENDED, "Sessions ended, by outcome", outcome)
    elif kind == "tool_finished":
        by_tool = {"tool": _tool_label(data.get("tool"), tools)}
        _count(meter, TOOL_CALLS, "Tool calls finished, by tool", by_tool)
        if data.get("is_error"):
            _count(meter, TOOL_ERRORS, "Tool calls that ended in an error, by tool", by_tool)
    elif kind == "question":
        questions = data.get("questions")
        n = len(questions) if isinstance(questions, list) else 1
        _count(meter, QUESTION_WAITS, "Questions asked of a person", {"agent": _label(agent)}, n)
    elif kind == "approval":
        tool = _tool_label(data.get("tool"), tools)
        state = _label(data.get("state"))
        if state == "pending":
            _count(meter, APPROVAL_WAITS, "Tool calls that waited for approval, by tool", {"tool": tool})
        elif state in _APPROVAL_OUTCOMES:  # not "decided": the decision arrived, its outcome follows
            decided = {"tool": tool, "outcome": state}
            _count(meter, APPROVAL_DECISIONS, "Approval waits ended, by outcome", decided)


# ---- in activities -----------------------------------------------------------------------------------


def model_call(model: str, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
    """A model answered: one call, its tokens and its cost, by model spec."""
    meter = _activity_meter()
    if meter is None:
        return
    by_model = {"model": _label(model)}
    _count(meter, MODEL_CALLS, "Model calls answered, by model", by_model)
    _count(
        meter, MODEL_TOKENS, "Model tokens, by model and direction", {**by_model, "direction": "input"}, input_tokens
    )
    _count(
        meter, MODEL_TOKENS, "Model tokens, by model and direction", {**by_model, "direction": "output"}, output_tokens
    )
    meter.create_histogram_float(MODEL_COST, "Cost of each model call, by model", "USD").record(
        max(cost_usd, 0.0), by_model
    )


def model_call_failed(model: str, kind: str) -> None:
    """A model call failed: ``retryable`` (Temporal retries it) or ``refused``."""
    attributes = {"model": _label(model), "kind": _label(kind)}
    _count(_activity_meter(), MODEL_CALL_FAILURES, "Model calls that failed, by model and kind", attributes)


def spilled(tool: str) -> None:
    """A tool result too large for the history was saved as an artifact."""
    _count(_activity_meter(), SPILLS, "Tool results saved as artifacts, by tool", {"tool": _label(tool)})


def sandbox_run(mode: str, ok: bool) -> None:
    """One exec_python run, by isolation mode and outcome."""
    attributes = {"mode": _label(mode), "outcome": "ok" if ok else "error"}
    _count(_activity_meter(), SANDBOX_RUNS, "exec_python runs, by isolation and outcome", attributes)
