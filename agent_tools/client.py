"""Typed client: start sessions, talk to them, read their state, follow their progress.

client = await AgentToolsClient.connect()
handle = await client.start_session("Summarise the design doc", agent="assistant")
async for event in handle.progress():
    ...
result = await handle.result()
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.contrib.workflow_streams import WorkflowStreamClient
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agent_tools import search_attributes as sa
from agent_tools.activity_io import ProgressEvent
from agent_tools.errors import ConfigurationError, SessionError
from agent_tools.session import (
    WORKFLOW_NAME,
    LatestMessageView,
    SendMessage,
    SendMessageAccepted,
    SessionInput,
    SessionRequest,
    SessionResult,
    SessionStatus,
    StatusView,
    StopRequest,
)
from agent_tools.settings import Settings


def new_session_id() -> str:
    return f"session-{uuid.uuid4()}"


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    run_id: str | None
    agent: str | None
    state: str | None
    root_id: str | None
    parent_id: str | None
    depth: int | None
    status: str
    start_time: datetime | None


@dataclass(frozen=True)
class TranscriptEntry:
    seq: int
    role: str
    content: str
    name: str | None
    tool_calls: list[dict[str, Any]]
    artifact_ref: str | None
    created_at: datetime


class SessionHandle:
    """One session, by id."""

    def __init__(self, client: AgentToolsClient, session_id: str) -> None:
        self._client = client
        self.id = session_id
        self.workflow: WorkflowHandle[Any, SessionResult] = client.temporal.get_workflow_handle(
            session_id, result_type=SessionResult
        )

    def ui_url(self) -> str:
        return self._client.ui_url(self.id)

    async def send(self, content: str) -> SendMessageAccepted:
        """Queue a message; returns once the session accepted it (an update).

        Raises:
            SessionError: the session has ended or refused the message (the reason is in the message).
        """
        async with _refusals(self.id, "message"):
            accepted: SendMessageAccepted = await self.workflow.execute_update(
                "send_message", SendMessage(content=content), result_type=SendMessageAccepted
            )
            return accepted

    async def send_signal(self, content: str) -> None:
        """Fire-and-forget twin of :meth:`send` for clients that can only signal."""
        async with _refusals(self.id, "message"):
            await self.workflow.signal("send_message", SendMessage(content=content))

    async def stop(self, reason: str = "stopped by user") -> None:
        """Stop the session and its sub-agents (leaf first)."""
        async with _refusals(self.id, "stop"):
            await self.workflow.signal("stop", StopRequest(reason=reason))

    async def status(self) -> StatusView:
        """Raises: SessionError: there is no such session."""
        async with _existing(self.id):
            status: StatusView = await self.workflow.query("status", result_type=StatusView)
        return status

    async def latest_message(self) -> LatestMessageView:
        async with _existing(self.id):
            latest: LatestMessageView = await self.workflow.query("latest_message", result_type=LatestMessageView)
        return latest

    async def query(self, name: str, result_type: type[Any], *args: Any) -> Any:
        async with _existing(self.id):
            return await self.workflow.query(name, *args, result_type=result_type)

    async def update(self, name: str, arg: Any, result_type: type[Any]) -> Any:
        return await self.workflow.execute_update(name, arg, result_type=result_type)

    # Capability faces of the handle live with their capability; these delegate so users keep one object.

    async def answer_questions(self, answers: Any, *, by_signal: bool = False) -> Any:
        """Answer the session's pending askUser questions (see :mod:`agent_tools.human_client`)."""
        from agent_tools.human_client import answer_questions

        return await answer_questions(self, answers, by_signal=by_signal)

    async def pending_questions(self) -> Any:
        from agent_tools.human_client import pending_questions

        return await pending_questions(self)

    async def result(self) -> SessionResult:
        async with _existing(self.id):
            return await self.workflow.result()

    async def transcript(self, offset: int = 0, limit: int = 200) -> list[TranscriptEntry]:
        """The stored transcript (full tool results included), read from the SQL store."""
        store = await self._client.transcripts()
        page = await store.page(self.id, offset, limit)
        return [
            TranscriptEntry(
                seq=p.seq,
                role=p.message.role,
                content=p.message.content,
                name=p.message.name,
                tool_calls=[tc.model_dump() for tc in p.message.tool_calls],
                artifact_ref=p.message.artifact_ref,
                created_at=p.created_at,
            )
            for p in page
        ]

    async def progress(
        self, from_offset: int = 0, *, poll: timedelta = timedelta(milliseconds=100)
    ) -> AsyncIterator[ProgressEvent]:
        """Live progress (turns, tool calls, todos, questions, sub-agents) until the session ends."""
        stream = WorkflowStreamClient.create(self._client.temporal, self.id)
        async with _existing(self.id):
            async for item in stream.subscribe("progress", from_offset, result_type=ProgressEvent, poll_cooldown=poll):
                yield item.data


class AgentToolsClient:
    """Sessions over a Temporal client that carries the pydantic data converter."""

    def __init__(self, temporal: Client, settings: Settings | None = None) -> None:
        self.temporal = temporal
        self.settings = settings or Settings()
        self._transcripts: Any = None

    @classmethod
    async def connect(cls, settings: Settings | None = None) -> AgentToolsClient:
        settings = settings or Settings()
        try:
            temporal = await Client.connect(
                settings.temporal_address, namespace=settings.temporal_namespace, data_converter=pydantic_data_converter
            )
        except RuntimeError as exc:
            raise unreachable(settings, exc) from exc
        return cls(temporal, settings)

    def ui_url(self, session_id: str) -> str:
        base = self.settings.temporal_ui_url.rstrip("/")
        return f"{base}/namespaces/{self.settings.temporal_namespace}/workflows/{session_id}"

    async def start_session(
        self, prompt: str | None = None, *, session_id: str | None = None, agent: str = "assistant", **fields: Any
    ) -> SessionHandle:
        request = SessionRequest(agent=agent, prompt=prompt, **fields)
        sid = session_id or new_session_id()
        attrs = None
        if self.settings.search_attributes:
            attrs = sa.at_start(
                agent=request.agent, root_id=request.root_id or sid, parent_id=request.parent_id, depth=request.depth
            )
        await self.temporal.start_workflow(
            WORKFLOW_NAME,
            SessionInput(request=request),
            id=sid,
            task_queue=self.settings.task_queue,
            search_attributes=attrs,
            static_summary=f"{request.agent}: {(request.title or prompt or '')[:80]}",
        )
        return SessionHandle(self, sid)

    async def run(self, prompt: str, **fields: Any) -> SessionResult:
        """Start a session and wait for its result."""
        handle = await self.start_session(prompt, **fields)
        return await handle.result()

    @property
    def tools(self) -> Any:
        """Standalone web tools (search, fetch), as the HTTP endpoints offer them."""
        from agent_tools.web_client import ToolsClient

        return ToolsClient(self)

    @property
    def research(self) -> Any:
        """deep_research jobs: create, retrieve, wait, run."""
        from agent_tools.web_client import ResearchClient

        return ResearchClient(self)

    def session(self, session_id: str) -> SessionHandle:
        return SessionHandle(self, session_id)

    async def list_sessions(
        self,
        *,
        agent: str | None = None,
        root_id: str | None = None,
        state: str | None = None,
        running_only: bool = False,
        limit: int = 50,
    ) -> list[SessionSummary]:
        """Sessions from Temporal visibility, filtered by the session search attributes.

        Raises:
            ConfigurationError: ``state`` is not a session state (a typo would otherwise match nothing).
        """
        states = [s.value for s in SessionStatus]
        if state is not None and state not in states:
            raise ConfigurationError(f"unknown session state {state!r}: use one of {', '.join(states)}")
        clauses = [f"WorkflowType = '{WORKFLOW_NAME}'"]
        for key, value in (("AgentName", agent), ("SessionRootId", root_id), ("SessionState", state)):
            if value is not None:
                clauses.append(f"{key} = '{_quote(value)}'")
        if running_only:
            clauses.append("ExecutionStatus = 'Running'")
        out: list[SessionSummary] = []
        async for wf in self.temporal.list_workflows(" AND ".join(clauses), limit=limit):
            attrs = wf.typed_search_attributes
            out.append(
                SessionSummary(
                    session_id=wf.id,
                    run_id=wf.run_id,
                    agent=attrs.get(sa.AGENT_NAME),
                    state=attrs.get(sa.SESSION_STATE),
                    root_id=attrs.get(sa.SESSION_ROOT_ID),
                    parent_id=attrs.get(sa.SESSION_PARENT_ID),
                    depth=attrs.get(sa.DEPTH),
                    status=wf.status.name if wf.status else "UNKNOWN",
                    start_time=wf.start_time,
                )
            )
        return out

    async def transcripts(self) -> Any:
        if self._transcripts is None:
            from agent_tools.activities.store.db import Store
            from agent_tools.activities.store.transcripts import TranscriptStore

            store = Store(self.settings.database_url)
            await store.create_schema()
            self._transcripts = TranscriptStore(store)
        return self._transcripts

    async def close(self) -> None:
        if self._transcripts is not None:
            await self._transcripts.store.close()
            self._transcripts = None


def unreachable(settings: Settings, exc: Exception) -> ConfigurationError:
    """The error for a Temporal server that cannot be reached, with the ways to get one."""
    return ConfigurationError(
        f"cannot reach Temporal at {settings.temporal_address} ({exc}). Start one with `agent-tools dev`, "
        "run with `--embedded`, or set AGENT_TOOLS_TEMPORAL_ADDRESS."
    )


@asynccontextmanager
async def _refusals(session_id: str, what: str) -> AsyncIterator[None]:
    """Turn Temporal's answers for an ended or refusing session into one clear SessionError."""
    try:
        yield
    except WorkflowUpdateFailedError as exc:
        cause = exc.cause
        reason = cause.message if isinstance(cause, ApplicationError) else str(cause or exc)
        raise SessionError(f"session {session_id} refused the {what}: {reason}") from exc
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise SessionError(f"session {session_id} refused the {what}: {exc.message}") from exc
        raise


@asynccontextmanager
async def _existing(session_id: str) -> AsyncIterator[None]:
    """Reads (queries, the result, progress) work on ended sessions too: NOT_FOUND means there is none."""
    try:
        yield
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            raise SessionError(f"no session {session_id!r} ({exc.message})") from exc
        raise


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace("'", "\\'")
