"""The session's shared state and the hooks capability mixins extend (each calls ``super()``)."""

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream

with workflow.unsafe.imports_passed_through():
    from agent_tools.activity_io import ProgressEvent, SessionRef
    from agent_tools.session import SessionConfig, SessionRequest, SessionState, SessionStatus, Trigger


class SessionBase:
    """Attributes every mixin may use, and hook methods with neutral defaults."""

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
        return SessionRef.of(self.config, workflow.info().run_id)

    def now_iso(self) -> str:
        return workflow.now().isoformat()

    def enqueue(self, trigger: Trigger) -> None:
        self.state.inbox.append(trigger)
        self.touch()

    def publish(self, kind: str, **data: object) -> None:
        event = ProgressEvent(kind=kind, session_id=self.config.session_id, data=dict(data))  # type: ignore[arg-type]
        self.stream.topic("progress", type=ProgressEvent).publish(event)

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
