"""Timeouts and retry policies of the calls a session makes: typed, with the engine's defaults.

A deployment sets them on the plugin (``AgentToolsPlugin(policy=...)``) or in the environment
(``AGENT_TOOLS_POLICY__MODEL_STEP__START_TO_CLOSE_SECONDS=600``); an agent may override them in its
definition (``[agents.policy.tool_call]``). ``prepare_session`` resolves them into the session's config, so
the workflow reads them from its own state: they are part of what continue-as-new carries, and a history
recorded before a change replays with the values it was recorded with.

Pure: no temporalio import. The workflows turn a :class:`CallPolicy` into Temporal's options.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "HEARTBEAT_SECONDS",
    "RETRY_INITIAL_SECONDS",
    "WORKFLOW_TASK_TIMEOUT_SECONDS",
    "CallPolicy",
    "ChildPolicy",
    "ExecutionPolicy",
]


# The heartbeat timeout of model steps and tool calls. Five beats fit in it (one a second), and the
# worker forwards one to the server at most every 2 s (agent_tools._worker.build_worker), so a worker held
# up for 3 s still gets a beat into every window. Less slack took live calls for dead and ran them again:
# on the 2-core machine at load 12-15, 5 of 390 calls at 2 s (1 s forwarding) and 21 of 390 at 3 s, none
# of 780 at 5 s (bench/chaos.py's fault-free runs, "heartbeat timeouts").
HEARTBEAT_SECONDS = 5.0
# The first retry of a model step or a tool comes this soon: a killed worker's call waits the heartbeat
# timeout and then this. Model steps back off three-fold so that eight attempts still ride out a provider
# outage for about as long as before (0.25 s .. 60 s, 150 s in all; it was 1 s doubling, 123 s).
RETRY_INITIAL_SECONDS = 0.25


# The sessions' workflow task timeout: Temporal's default.
WORKFLOW_TASK_TIMEOUT_SECONDS = 10.0


class CallPolicy(BaseModel):
    """How long one kind of call may take, and how Temporal retries it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start_to_close_seconds: float = Field(gt=0, le=30 * 86400)
    # None: the call does not heartbeat (short store look-ups).
    heartbeat_seconds: float | None = Field(default=None, gt=0, le=86400)
    initial_interval_seconds: float = Field(default=1.0, gt=0, le=3600)
    backoff_coefficient: float = Field(default=2.0, ge=1, le=10)
    maximum_interval_seconds: float = Field(default=30.0, gt=0, le=86400)
    maximum_attempts: int = Field(default=3, ge=0, le=1000)  # 0: unlimited, Temporal's meaning


class _PartialSections(BaseModel):
    """A policy whose sections may be given in part: the fields not given keep the section's default.

    The environment gives them that way (``AGENT_TOOLS_POLICY__MODEL_STEP__HEARTBEAT_SECONDS=30`` arrives as
    ``{"model_step": {"heartbeat_seconds": "30"}}``), and so may an agent's override; validated as they come,
    such a section would lack its required ``start_to_close_seconds`` and the whole setting would fail.
    """

    @model_validator(mode="before")
    @classmethod
    def _fill_sections(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        filled = dict(data)
        for name, field in cls.model_fields.items():
            given, default = filled.get(name), field.default
            if isinstance(given, dict) and isinstance(default, BaseModel):
                # Nested sections (child_session.await_call) are filled by their own class's validator.
                filled[name] = {**default.model_dump(exclude=set(given)), **given}
        return filled


class ChildPolicy(_PartialSections):
    """Limits of a child session (a sub-agent of any face)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # None: a child may run as long as its parent waits for it; the faces' own bounded waits still apply.
    execution_timeout_seconds: float | None = Field(default=None, gt=0)
    # A child that is not this session's own child workflow (after a continue-as-new, or a hand-off) is
    # awaited by an activity that polls it and heartbeats.
    await_call: CallPolicy = CallPolicy(
        start_to_close_seconds=30 * 86400, heartbeat_seconds=60, maximum_interval_seconds=60, maximum_attempts=0
    )


class ExecutionPolicy(_PartialSections):
    """Every call kind a session makes. The defaults are the engine's long-standing values."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # Model steps and tools heartbeat five times per timeout while they run (activities/heartbeat.py), so a
    # worker that dies mid-call is noticed after HEARTBEAT_SECONDS and the call retried on another worker
    # RETRY_INITIAL_SECONDS later; with the earlier 30 s a SIGKILLed worker held its sessions half a minute
    # (bench/chaos.py measures it).
    model_step: CallPolicy = CallPolicy(
        start_to_close_seconds=300,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        initial_interval_seconds=RETRY_INITIAL_SECONDS,
        backoff_coefficient=3.0,
        maximum_interval_seconds=60,
        maximum_attempts=8,
    )
    # A tool's two retries come after 0.25 s and 0.75 s (they were 1 s and 2 s).
    tool_call: CallPolicy = CallPolicy(
        start_to_close_seconds=600,
        heartbeat_seconds=HEARTBEAT_SECONDS,
        initial_interval_seconds=RETRY_INITIAL_SECONDS,
        backoff_coefficient=3.0,
    )
    # The small-model call that judges a goal after a turn.
    goal_judge: CallPolicy = CallPolicy(start_to_close_seconds=120)
    # The short engine activities: prepare_session, delegation look-ups, event subscriptions and loads.
    engine: CallPolicy = CallPolicy(start_to_close_seconds=60, maximum_interval_seconds=20, maximum_attempts=10)
    child_session: ChildPolicy = ChildPolicy()
    # How long a worker may take over one workflow task of a session before the server gives it to another
    # (Temporal's start option; its default is 10 s, and it allows at most 120 s). A SIGKILLed worker's
    # started tasks wait this long. Read where a session starts (AgentToolsClient); a continue-as-new run
    # keeps its predecessor's.
    workflow_task_timeout_seconds: float = Field(
        default=WORKFLOW_TASK_TIMEOUT_SECONDS, ge=1, le=120, allow_inf_nan=False
    )

    @field_validator("workflow_task_timeout_seconds", mode="before")
    @classmethod
    def _seconds_not_a_flag(cls, value: Any) -> Any:
        if isinstance(value, bool):  # pydantic would read True as 1 s
            raise ValueError("a number of seconds, not a boolean")
        return value

    def merged(self, override: dict[str, Any] | None) -> ExecutionPolicy:
        """This policy with the fields of ``override`` (a partial, nested dict) replaced."""
        if not override:
            return self
        data = self.model_dump()
        for key, value in override.items():
            if isinstance(value, dict) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return ExecutionPolicy.model_validate(data)
