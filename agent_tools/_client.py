"""Typed client: start sessions, talk to them, read their state, follow their progress.

client = await AgentToolsClient.connect()
handle = await client.start_session("Summarise the design doc", agent="assistant")
async for event in handle.progress():
    ...
result = await handle.result()
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.converter import DataConverter
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from agent_tools import _search_attributes as sa
from agent_tools import _session_names as names
from agent_tools._boundaries import (
    ID_CHARS,
    NOTE_CHARS,
    cap_text,
    clean_json,
    clean_text,
    input_problems,
    request_problems,
)
from agent_tools._errors import ConfigurationError, InvalidInput, SessionError
from agent_tools._messages import Message
from agent_tools._session_views import (
    WORKFLOW_NAME,
    LatestMessageView,
    SendMessage,
    SendMessageAccepted,
    SessionResult,
    SessionStatus,
    StatusView,
    StopRequest,
)
from agent_tools._settings import Settings

if TYPE_CHECKING:
    from temporalio.runtime import Runtime

    from agent_tools._activity_io import ProgressEvent
    from agent_tools._progress_resume import ResumableItem
    from agent_tools._session import SessionOptions, SessionRequest
    from agent_tools._session_start import SessionStart
    from agent_tools._store.db import SharedStore
    from agent_tools._store.transcripts import TranscriptStore
    from agent_tools._web_client import ResearchClient, ToolsClient
    from agent_tools.contracts._approvals import ApprovalAccepted, ApprovalState, PendingApproval
    from agent_tools.contracts._human import AnswerAccepted, HumanState, PendingQuestion

__all__ = [
    "AgentToolsClient",
    "SessionHandle",
    "SessionSummary",
    "TranscriptEntry",
    "new_session_id",
]

T = TypeVar("T")

# Starts retried after registering missing search attributes (the first retry follows the registration).
_ATTRIBUTE_RETRIES = 10


def ui_base(settings: Settings, target_host: str) -> str:
    """Where the Temporal UI of the server at ``target_host`` is: the configured URL when one was given;
    Temporal Cloud's for a Cloud namespace; otherwise the dev server's UI port on the same host."""
    if "temporal_ui_url" in settings.model_fields_set:
        return settings.temporal_ui_url.rstrip("/")
    host = _host_of(target_host)
    if host.endswith(".tmprl.cloud"):
        return "https://cloud.temporal.io"
    return f"http://{host or 'localhost'}:8233"


def _host_of(target: str) -> str:
    """``host`` of ``host:port`` (``[::1]`` of ``[::1]:7233``)."""
    if target.startswith("["):
        return target[: target.find("]") + 1] if "]" in target else target
    return target.rsplit(":", 1)[0] if ":" in target else target


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
    title: str | None = None


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

    def __init__(
        self, client: AgentToolsClient, session_id: str, *, output_model: type[BaseModel] | None = None
    ) -> None:
        self._client = client
        self.id = session_id
        # The pydantic model a structured result is parsed into (``start_session(output_schema=Model)``).
        self.output_model = output_model
        self.workflow: WorkflowHandle[Any, SessionResult] = client.temporal.get_workflow_handle(
            session_id, result_type=SessionResult
        )

    def ui_url(self) -> str:
        """The session's page in the Temporal UI."""
        return self._client.ui_url(self.id)

    async def send(self, content: str) -> SendMessageAccepted:
        """Queue a message; returns once the session accepted it (an update).

        Raises:
            SessionError: the session has ended or refused the message (the reason is in the message), or the
                message breaks its limits (checked before sending: 100,000 characters, 512 KiB of JSON).
        """
        message = _sendable(SendMessage(content=clean_text(content)), f"session {self.id}: the message", SessionError)
        async with _refusals(self.id, "message"):
            accepted: SendMessageAccepted = await self.workflow.execute_update(
                names.UPDATE_SEND_MESSAGE, message, result_type=SendMessageAccepted
            )
            return accepted

    async def send_signal(self, content: str) -> None:
        """Fire-and-forget twin of :meth:`send` for clients that can only signal."""
        message = _sendable(SendMessage(content=clean_text(content)), f"session {self.id}: the message", SessionError)
        async with _refusals(self.id, "message"):
            await self.workflow.signal(names.SIGNAL_SEND_MESSAGE, message)

    async def stop(self, reason: str = "stopped by user") -> None:
        """Stop the session and its sub-agents (leaf first)."""
        async with _refusals(self.id, "stop"):
            await self.workflow.signal(names.SIGNAL_STOP, StopRequest(reason=cap_text(clean_text(reason), NOTE_CHARS)))

    async def status(self) -> StatusView:
        """Raises: SessionError: there is no such session."""
        return await self.query(names.QUERY_STATUS, StatusView)

    async def latest_message(self) -> LatestMessageView:
        """The latest assistant message, as the session shows it now (a query)."""
        return await self.query(names.QUERY_LATEST_MESSAGE, LatestMessageView)

    async def query(self, name: str, result_type: type[T], *args: Any) -> T:
        """Run one of the session's queries (``status``, ``todos``, ``goals``, ``subagents``, ...)."""
        async with _existing(self.id):
            result: T = await self.workflow.query(name, *args, result_type=result_type)
        return result

    async def update(self, name: str, arg: Any, result_type: type[T]) -> T:
        """Run one of the session's updates; a refusal raises :class:`SessionError` with the session's reason."""
        if isinstance(arg, BaseModel):
            _sendable(arg, f"session {self.id}: the {name} update", SessionError)
        async with _refusals(self.id, name):
            result: T = await self.workflow.execute_update(name, arg, result_type=result_type)
        return result

    # askUser and tool approvals: what the session waits on, and the answers and decisions.

    async def answer_questions(self, answers: object, *, by_signal: bool = False) -> AnswerAccepted | None:
        """Answer the session's pending askUser questions (``{question or id: answer}``, or a list of answers).

        ``answers`` may be an :class:`~agent_tools.contracts.AnswerQuestions`, or the friendly JSON shapes of
        ``parse_answer_payload`` (question text or header -> label, list of labels, or ``{"other": "text"}``).
        By update (the default) the session refuses answers that fit no pending question: this raises
        ``temporalio.client.WorkflowUpdateFailedError`` whose cause says why. By signal nothing can be refused: a bad answer is recorded in :meth:`human_state` as rejected, the
        questions stay pending, and this returns None.

        Raises:
            AnswerRejected: the answers have none of the accepted shapes, or break their limits (checked
                before sending).
        """
        from agent_tools.contracts._human import AnswerAccepted, AnswerRejected, parse_answer_payload

        request = _sendable(parse_answer_payload(answers), "the answers", AnswerRejected)
        if by_signal:
            await self.workflow.signal(names.SIGNAL_ANSWER_QUESTIONS, request.model_dump(mode="json"))
            return None
        accepted: AnswerAccepted = await self.workflow.execute_update(
            names.UPDATE_ANSWER_QUESTIONS, request, result_type=AnswerAccepted
        )
        return accepted

    async def pending_questions(self) -> list[PendingQuestion]:
        """The askUser questions waiting for an answer."""
        from agent_tools.contracts._human import PendingQuestion

        return await self.query(names.QUERY_PENDING_QUESTIONS, list[PendingQuestion])

    async def pending_approvals(self) -> list[PendingApproval]:
        """The tool calls waiting for a person's approval (see docs/approvals.md)."""
        from agent_tools.contracts._approvals import PendingApproval

        return await self.query(names.QUERY_PENDING_APPROVALS, list[PendingApproval])

    async def human_state(self) -> HumanState:
        """Pending questions, answered ones (structured) and rejected signalled answers."""
        from agent_tools.contracts._human import HumanState

        return await self.query(names.QUERY_HUMAN_STATE, HumanState)

    async def approval_state(self) -> ApprovalState:
        """Pending approvals, recent decisions and rejected signalled decisions."""
        from agent_tools.contracts._approvals import ApprovalState

        return await self.query(names.QUERY_APPROVAL_STATE, ApprovalState)

    async def decide_approval(
        self,
        approval_id: str,
        *,
        approve: bool,
        digest: str | None = None,
        reason: str | None = None,
        decided_by: str | None = None,
        by_signal: bool = False,
    ) -> ApprovalAccepted | None:
        """Approve or deny one pending call, by update (as :meth:`approve` and :meth:`deny`) or by signal.

        ``digest`` is the argument digest the decider was shown (``PendingApproval.digest``); the session
        refuses a decision whose digest is not the call's. Approving requires it; a denial without one reads
        the pending call's. By update a refusal raises :class:`SessionError` with the session's reason; by
        signal nothing can be refused (a bad decision is recorded in :meth:`approval_state` as rejected, the
        call stays pending) and this returns None.

        Raises:
            ApprovalRejected: approving without a digest, a denial for an approval that is not pending, or a
                decision over its limits (checked before sending).
        """
        from agent_tools.contracts._approvals import ApprovalAccepted, ApprovalDecision, ApprovalRejected

        if digest is None:
            if approve:
                raise ApprovalRejected(
                    "approving needs the digest of the arguments you approve (PendingApproval.digest)"
                )
            found = next((p for p in await self.pending_approvals() if p.approval_id == approval_id), None)
            if found is None:
                raise ApprovalRejected(f"approval {approval_id!r} is not pending")
            digest = found.digest
        decision = ApprovalDecision(
            approval_id=approval_id, digest=digest, approve=approve, reason=reason, decided_by=decided_by
        )
        _sendable(decision, "the decision", ApprovalRejected)
        if by_signal:
            await self.workflow.signal(names.SIGNAL_DECIDE_APPROVAL, decision.model_dump(mode="json"))
            return None
        return await self.update(names.UPDATE_DECIDE_APPROVAL, decision, ApprovalAccepted)

    async def approve(
        self, approval_id: str, *, digest: str, reason: str | None = None, decided_by: str | None = None
    ) -> ApprovalAccepted:
        """Approve one pending call; ``digest`` is the argument digest you were shown. A refusal (unknown or
        decided id, another digest, not an approver) raises :class:`SessionError` with the reason."""
        accepted = await self.decide_approval(
            approval_id, approve=True, digest=digest, reason=reason, decided_by=decided_by
        )
        assert accepted is not None
        return accepted

    async def deny(
        self, approval_id: str, *, reason: str, digest: str | None = None, decided_by: str | None = None
    ) -> ApprovalAccepted:
        """Deny one pending call; the model gets ``reason`` as the call's tool error."""
        accepted = await self.decide_approval(
            approval_id, approve=False, digest=digest, reason=reason, decided_by=decided_by
        )
        assert accepted is not None
        return accepted

    async def result(self) -> SessionResult:
        """Wait for the session to end; its final message, status, usage and structured output."""
        async with _existing(self.id):
            return await self.workflow.result()

    async def output(self, model: type[BaseModel] | None = None) -> Any:
        """The structured result: the final answer parsed into ``model`` or, by default, the handle's
        ``output_model`` (a handle from :meth:`AgentToolsClient.session` has none: the JSON value then).

        Raises:
            SessionError: the session ended without an answer that matches its output schema (the reason is
                the session's error).
        """
        result = await self.result()
        if result.output is None:
            raise SessionError(
                f"session {self.id} has no structured result ({result.status.value}): {result.error or 'no answer'}"
            )
        into = model or self.output_model
        return into.model_validate(result.output) if into is not None else result.output

    async def transcript(self, offset: int = 0, limit: int = 200) -> list[TranscriptEntry]:
        """The stored transcript (full tool results included), read from the SQL store.

        Raises:
            StoreNotReady: no worker has created the store at ``settings.database_url`` yet, or the client
                cannot reach it.
        """
        from agent_tools._store.transcript_rows import plain_sqlite_file, read_transcript, row_to_message

        url = self._client.settings.database_url
        if plain_sqlite_file(url) is not None:
            # A SQLite file is read with the standard library: a command that shows a transcript then
            # never imports SQLAlchemy.
            rows = await asyncio.to_thread(read_transcript, url, self.id, offset, limit)
            page = [(r.seq, row_to_message(r), r.created_at) for r in rows]
        else:
            from agent_tools._store.db import UNREACHABLE, unreachable

            store = await self._client.transcripts()
            try:
                page = [(p.seq, p.message, p.created_at) for p in await store.page(self.id, offset, limit)]
            except UNREACHABLE as exc:  # the database went away after the store was opened
                raise unreachable(url, exc) from exc
        return [
            TranscriptEntry(
                seq=seq,
                role=message.role,
                content=message.content,
                name=message.name,
                tool_calls=[tc.model_dump() for tc in message.tool_calls],
                artifact_ref=message.artifact_ref,
                created_at=created_at,
            )
            for seq, message, created_at in page
        ]

    async def progress(
        self, from_offset: int = 0, *, poll: timedelta = timedelta(milliseconds=100), tree: bool = False
    ) -> AsyncIterator[ProgressEvent]:
        """Live progress (turns, model steps and their streamed text, tool calls, todos, questions,
        sub-agents) until the session ends.

        With ``tree``, the progress of its sub-agents too (and theirs), each event under its own
        ``session_id``: a sub-agent is followed from its ``subagent_started`` event on. The model's text
        arrives as ``text_delta`` items; :class:`agent_tools._live_text.LiveText` turns them into what to show.
        """
        if tree:
            async for event in self._tree_progress(from_offset, poll):
                yield event
            return
        from agent_tools._activity_io import ProgressEvent
        from agent_tools._progress_poll import follow_with_offsets

        # By query: a watched session's history holds what it did, not the polls of whoever watched it.
        async with _existing(self.id):
            async for _, event in follow_with_offsets(
                self._client.temporal, self.id, "progress", from_offset, ProgressEvent, interval=poll.total_seconds()
            ):
                yield event

    async def resumable_progress(
        self, cursor: str | None = None, *, poll: timedelta = timedelta(milliseconds=100)
    ) -> AsyncIterator[ResumableItem]:
        """The tree's progress as :meth:`progress` with ``tree`` gives it, each item with the cursor to go on
        after it: following again from that cursor yields exactly the items after it.

        Raises:
            CursorRefused: ``cursor`` is malformed or belongs to another session.
            SessionError: there is no such session.
        """
        from agent_tools._progress_resume import ProgressCursor, follow_tree

        start = ProgressCursor.decode(self.id, cursor) if cursor else ProgressCursor.start(self.id)
        async with _existing(self.id):
            async for item in follow_tree(self._client.temporal, start, poll=poll.total_seconds()):
                yield item

    def _tree_progress(self, from_offset: int, poll: timedelta) -> AsyncIterator[ProgressEvent]:
        return _ProgressTree(self, self._client, poll).events(from_offset)


class _ProgressTree:
    """A session's progress merged with its sub-agents' (and theirs), each stream polled on its own."""

    def __init__(self, root: SessionHandle, client: AgentToolsClient, poll: timedelta) -> None:
        self._root = root
        self._client = client
        self._poll = poll
        # Items: events, or the id of a session whose stream has ended, or the root's error.
        self._queue: asyncio.Queue[ProgressEvent | str | BaseException] = asyncio.Queue()
        self._followed: dict[str, asyncio.Task[None]] = {}
        self._ended: set[str] = set()
        # A parent's subagent_done is held until the sub-agent's own stream has ended (or for a moment):
        # each stream is polled on its own, so the sub-agent's last words would otherwise come after it.
        self._held: dict[str, tuple[float, ProgressEvent]] = {}

    async def events(self, from_offset: int) -> AsyncIterator[ProgressEvent]:
        loop = asyncio.get_running_loop()
        self._follow(self._root, from_offset)
        try:
            while True:
                timeout = max(0.0, min(d for d, _ in self._held.values()) - loop.time()) if self._held else None
                try:
                    item = await asyncio.wait_for(self._queue.get(), timeout)
                except TimeoutError:
                    for event in self._release(loop.time()):
                        yield event
                    continue
                if isinstance(item, BaseException):
                    raise item
                if isinstance(item, str):
                    for event in self._stream_ended(item, loop.time()):
                        yield event
                    if item == self._root.id:
                        return
                    continue
                if self._hold(item, loop.time()):
                    continue
                yield item
                child = item.data.get("id")
                if item.kind == "subagent_started" and isinstance(child, str) and child not in self._followed:
                    self._follow(self._client.session(child), 0)
        finally:
            for task in self._followed.values():
                task.cancel()

    def _follow(self, handle: SessionHandle, offset: int) -> None:
        self._followed[handle.id] = asyncio.create_task(self._pump(handle, offset))

    async def _pump(self, handle: SessionHandle, offset: int) -> None:
        try:
            async for event in handle.progress(offset, poll=self._poll):
                await self._queue.put(event)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:
            # The root's failure ends the iteration with its error; a sub-agent's ends only its part.
            if handle.id == self._root.id:
                await self._queue.put(exc)
                return
        await self._queue.put(handle.id)

    def _hold(self, event: ProgressEvent, now: float) -> bool:
        """Hold a subagent_done whose sub-agent's stream is still being read; True when held."""
        child = event.data.get("id")
        if event.kind != "subagent_done" or not isinstance(child, str):
            return False
        if child not in self._followed or child in self._ended:
            return False
        self._held[child] = (now + 2.0, event)
        return True

    def _stream_ended(self, session_id: str, now: float) -> list[ProgressEvent]:
        """The events a session's ended stream lets out: its held subagent_done, and all held at the root's end."""
        self._ended.add(session_id)
        out = self._release(now, session_id)
        if session_id == self._root.id:
            out.extend(event for _, event in self._held.values())
        return out

    def _release(self, now: float, child: str | None = None) -> list[ProgressEvent]:
        due = [k for k, (deadline, _) in self._held.items() if k == child or deadline <= now]
        return [self._held.pop(k)[1] for k in due]


class AgentToolsClient:
    """Sessions over a Temporal client.

    Build it on a client you already have (``AgentToolsClient(client)``: its codec, interceptors and
    connection are used as they are; a client without pydantic's payload converter gets one, codec kept),
    or let :meth:`connect` open one.
    """

    def __init__(self, temporal: Client, settings: Settings | None = None, *, store: SharedStore | None = None) -> None:
        self.temporal = _with_pydantic_payloads(temporal)
        self.settings = settings or Settings()
        # The store transcripts and the web tools' cache are read through: its own, opened on first use, or
        # one its maker shares with it (the HTTP service's routes share one), which the maker closes.
        self._shared_store = store
        self._owns_store = store is None
        self._transcripts: TranscriptStore | None = None
        self._tools: ToolsClient | None = None

    @classmethod
    async def connect(
        cls,
        settings: Settings | None = None,
        *,
        client: Client | None = None,
        data_converter: DataConverter | None = None,
        runtime: Runtime | None = None,
        store: SharedStore | None = None,
    ) -> AgentToolsClient:
        """A client for Temporal's configuration and ``settings`` (see ``agent_tools._connection``), or over
        ``client`` when given.

        Args:
            settings: Address, namespace, task queue; read from the environment when omitted. Temporal's own
                configuration (a profile, ``TEMPORAL_*`` variables) supplies TLS, API key and what these leave out.
            client: An existing Temporal client to use instead of connecting.
            data_converter: Your data converter (a payload codec for encryption, say); its payload converter
                becomes pydantic's, the rest is kept.
            runtime: The Temporal runtime to connect on (the one whose telemetry exports your metrics).
            store: A store to share (see ``__init__``); the client then leaves closing it to you.

        Raises:
            ConfigurationError: the configuration is wrong or the server cannot be reached (one line naming
                what was tried).
        """
        settings = settings or Settings()
        if client is not None:
            return cls(client, settings, store=store)
        from agent_tools._connection import compose_data_converter, connect

        extra: dict[str, Any] = {} if runtime is None else {"runtime": runtime}
        temporal = await connect(settings, data_converter=compose_data_converter(data_converter), **extra)
        # The namespace and address actually used, for the UI links.
        used = {
            "temporal_address": temporal.service_client.config.target_host,
            "temporal_namespace": temporal.namespace,
        }
        return cls(temporal, settings.model_copy(update=used), store=store)

    def ui_url(self, session_id: str) -> str:
        """The Temporal UI page of a session: under ``settings.temporal_ui_url`` when it is set, else the UI
        of the server this client is connected to (its host's port 8233, or Temporal Cloud's)."""
        base = ui_base(self.settings, self.temporal.service_client.config.target_host)
        return f"{base}/namespaces/{self.temporal.namespace}/workflows/{session_id}"

    async def start_session(
        self,
        prompt: str | None = None,
        *,
        session_id: str | None = None,
        agent: str = "assistant",
        organisation: str = "default",
        project: str = "default",
        user: str = "default",
        title: str | None = None,
        model: str | None = None,
        tools: list[str] | None = None,
        exclude_tools: list[str] | None = None,
        system_prompt: str | None = None,
        max_steps: int | None = None,
        max_tokens: int | None = None,
        keep_alive: bool = False,
        history: list[Message] | None = None,
        options: SessionOptions | dict[str, Any] | None = None,
        output_schema: type[BaseModel] | Mapping[str, Any] | None = None,
        output_retries: int | None = None,
    ) -> SessionHandle:
        """Start a session and return its handle.

        Args:
            prompt: The first user message; None starts a session that waits for :meth:`SessionHandle.send`.
            session_id: The workflow id; a new ``session-<uuid>`` when omitted.
            agent: The agent definition to run (``agents.toml``; ``assistant`` is built in).
            organisation: Scope of memories and of the organisation's tool switches.
            project: Scope of memories and agents.
            user: Scope of memories.
            title: Shown in the Temporal UI and the CLI; the prompt's start when omitted.
            model: A model spec (``openai:gpt-4.1-mini``) instead of the agent's.
            tools: The tool names this session sees instead of the agent's profile.
            exclude_tools: Tools taken away from what the agent would see.
            system_prompt: Instead of the agent's.
            max_steps: Model steps per turn (1-500).
            max_tokens: Output tokens per model call.
            keep_alive: Wait for the next message after each answer (a chat) instead of ending when idle.
            history: Messages that open the conversation before the prompt.
            options: Session options (``continue_as_new_after_turns``, ``ask_user_timeout_seconds``, ...).
            output_schema: Structured results: a pydantic model class or a JSON Schema dict the final answer
                must match. The result's ``output`` holds the parsed answer; :meth:`SessionHandle.output`
                returns it (an instance of the model class when one was given).
            output_retries: How many times an answer that does not match goes back to the model with the
                validation error before the turn fails (0-10, default 2).

        Raises:
            pydantic.ValidationError: a field is out of range.
            SessionError: the output schema is not a usable JSON Schema (the reason says why).
        """
        from agent_tools._session import SessionOptions, SessionRequest
        from agent_tools.contracts._output import schema_dict

        request = SessionRequest(
            agent=agent,
            prompt=prompt,
            organisation=organisation,
            project=project,
            user=user,
            title=title,
            model=model,
            tools=tools,
            exclude_tools=exclude_tools or [],
            system_prompt=system_prompt,
            max_steps=max_steps,
            max_tokens=max_tokens,
            keep_alive=keep_alive,
            history=history or [],
            options=SessionOptions.model_validate(options or {}),
            output_schema=schema_dict(output_schema) if output_schema is not None else None,
            output_retries=output_retries,
        )
        handle = await self.start_request(request, session_id=session_id)
        if isinstance(output_schema, type) and issubclass(output_schema, BaseModel):
            handle.output_model = output_schema
        return handle

    async def start_request(self, request: SessionRequest, *, session_id: str | None = None) -> SessionHandle:
        """Start a session from a whole :class:`SessionRequest`.

        Raises:
            SessionError: the request breaks a limit, or a session with this id exists already (running or
                closed: a second run under one id would mix both runs' transcripts and memories).
        """
        from agent_tools._session import SessionRequest
        from agent_tools.contracts._output import schema_refusal

        try:
            # Normalised where it enters: text a store or an encoder would refuse (NUL, lone surrogates) is
            # replaced, and nesting beyond the decoders' limits is refused.
            request = SessionRequest.model_validate(clean_json(request.model_dump(exclude_unset=True)))
        except InvalidInput as exc:
            raise SessionError(f"refused to start the session: {exc}") from exc
        problems = request_problems(request) or (
            schema_refusal(request.output_schema) if request.output_schema is not None else None
        )
        if problems is not None:
            raise SessionError(f"refused to start the session: {problems}")
        if request.options.prompt_titles is None and self.temporal.data_converter.payload_codec is not None:
            # Search attributes are never encoded: under a codec the prompt stays out of the session's title.
            request = request.model_copy(update={"options": request.options.merged({"prompt_titles": False})})
        sid = session_id or new_session_id()
        if len(sid) > ID_CHARS or clean_text(sid) != sid:
            raise SessionError(f"session ids are at most {ID_CHARS} characters of text, got {sid[:80]!r}")
        from agent_tools._session_start import root_start

        start = root_start(request, sid, search_attributes=self.settings.search_attributes)
        try:
            await self._start_workflow(start, request)
        except WorkflowAlreadyStartedError as exc:
            raise SessionError(
                f"a session with id {sid!r} exists already (running or closed); start with another id"
            ) from exc
        return SessionHandle(self, sid)

    async def _start_workflow(self, start: SessionStart, request: SessionRequest) -> None:
        """Start the root's workflow. A namespace no worker has prepared yet lacks the session search
        attributes: they are registered from here where the server allows it, else the error says how."""
        from agent_tools._session import SessionInput

        for attempt in range(_ATTRIBUTE_RETRIES + 1):
            try:
                await self.temporal.start_workflow(
                    start.workflow,
                    SessionInput(request=request),
                    id=start.id,
                    task_queue=self.settings.task_queue,
                    search_attributes=start.search_attributes,
                    # The Temporal UI's list and the top of the session's page name it by these.
                    static_summary=start.summary,
                    static_details=start.details,
                    task_timeout=timedelta(seconds=self.settings.policy.workflow_task_timeout_seconds),
                    id_reuse_policy=start.id_reuse_policy,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                )
                return
            except RPCError as exc:
                if not sa.is_missing_attribute_error(exc):
                    raise
                if attempt == _ATTRIBUTE_RETRIES:
                    raise SessionError(
                        f"namespace {self.temporal.namespace!r} still lacks the session search attributes after "
                        "registering them; start a worker (agent-tools worker) once, or create them with: "
                        f"{sa.create_commands(self.temporal.namespace)}"
                    ) from None
                if attempt == 0:
                    await sa.ensure_registered(self.temporal)  # raises with the commands where it cannot
                else:
                    await asyncio.sleep(0.5)  # a server may take a moment to see attributes just added

    async def run(self, prompt: str, **fields: Any) -> SessionResult:
        """Start a session (``fields`` as :meth:`start_session` takes them) and wait for its result."""
        handle = await self.start_session(prompt, **fields)
        return await handle.result()

    @property
    def tools(self) -> ToolsClient:
        """Standalone web tools (search, fetch), as the HTTP endpoints offer them; closed with the client."""
        if self._tools is None:
            from agent_tools._web_client import ToolsClient

            self._tools = ToolsClient(self)
        return self._tools

    @property
    def research(self) -> ResearchClient:
        """deep_research jobs: create, retrieve, wait, run."""
        from agent_tools._web_client import ResearchClient

        return ResearchClient(self)

    def session(self, session_id: str) -> SessionHandle:
        """A handle on an existing session (nothing is checked until it is used)."""
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
                clauses.append(f"{key} = {sa.quote(value)}")
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
                    title=attrs.get(sa.SESSION_TITLE),
                )
            )
        return out

    def shared_store(self) -> SharedStore:
        """The store this client reads through (opened on first use, never created or migrated here: the
        workers own its schema)."""
        if self._shared_store is None:
            from agent_tools._store.db import SharedStore

            self._shared_store = SharedStore(self.settings.database_url)
        return self._shared_store

    async def transcripts(self) -> TranscriptStore:
        """The transcript store, opened read-and-append on an existing database (never created here)."""
        if self._transcripts is None:
            from agent_tools._store.transcripts import TranscriptStore

            self._transcripts = TranscriptStore(await self.shared_store().get())
        return self._transcripts

    async def close(self) -> None:
        """Close what the client opened on use: the web tools' engine and its own store."""
        if self._tools is not None:
            await self._tools.aclose()
            self._tools = None
        self._transcripts = None
        if self._owns_store and self._shared_store is not None:
            await self._shared_store.close()

    async def __aenter__(self) -> AgentToolsClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _with_pydantic_payloads(temporal: Client) -> Client:
    """``temporal`` itself when it converts pydantic models; else a client on the same connection whose
    payload converter is pydantic's (codec, failure converter and interceptors kept)."""
    from temporalio.contrib.pydantic import PydanticPayloadConverter

    from agent_tools._connection import compose_data_converter

    if temporal.data_converter.payload_converter_class is PydanticPayloadConverter:
        return temporal
    config = temporal.config()
    config["data_converter"] = compose_data_converter(config.get("data_converter"))
    # The plugins have configured this client already; configuring them again would stack their changes.
    config["plugins"] = []
    return Client(**config)


M = TypeVar("M", bound=BaseModel)


def _sendable(model: M, what: str, error: type[Exception]) -> M:
    """``model`` if a session can take it; else ``error`` says why, before anything is sent."""
    problem = input_problems(model)
    if problem is not None:
        raise error(f"{what} cannot be sent: {problem}")
    return model


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
