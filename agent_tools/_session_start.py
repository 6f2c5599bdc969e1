"""How a session is started, for a root (the client) and a child (a parent session): one description.

The id, the search attributes it starts with, what the Temporal UI shows of it and its id reuse policy are
part of the start command, so a recorded parent's history replays only while this stays what it was.
"""

from dataclasses import dataclass

from temporalio.common import TypedSearchAttributes, WorkflowIDReusePolicy

from agent_tools import _search_attributes as sa
from agent_tools._progress_text import session_details, session_summary, shorten
from agent_tools._session import WORKFLOW_NAME, SessionRequest

__all__ = ["SessionStart", "child_start", "child_summary", "handoff_start", "root_start", "visible_title"]


@dataclass(frozen=True)
class SessionStart:
    """The options a session's workflow is started with (besides the input and the task queue)."""

    id: str
    summary: str
    details: str | None
    search_attributes: TypedSearchAttributes | None
    # One run per id (a second would mix two runs' transcripts under one session id); a hand-off keeps
    # the SDK's default.
    id_reuse_policy: WorkflowIDReusePolicy = WorkflowIDReusePolicy.REJECT_DUPLICATE
    workflow: str = WORKFLOW_NAME


def _details(request: SessionRequest, scope: str) -> str:
    return session_details(
        agent=request.agent,
        title=request.title,
        prompt=request.prompt,
        model=request.model,
        scope=scope,
        parent_id=request.parent_id,
        root_id=request.root_id,
        depth=request.depth,
    )


def _attributes(request: SessionRequest, session_id: str, title: str | None) -> TypedSearchAttributes:
    """The tree links from the first moment (the session upserts them again itself)."""
    return sa.at_start(
        agent=request.agent,
        root_id=request.root_id or session_id,
        parent_id=request.parent_id,
        depth=request.depth,
        title=title,
    )


def visible_title(request: SessionRequest, prompt_titles: bool) -> str:
    """The title visibility shows (search attributes are never encoded): the prompt's start only where
    ``prompt_titles``; else the client's own title, or the agent's name (a child's title is the model's
    words, about the conversation, so a child shows its agent's name)."""
    if prompt_titles:
        return request.title or (request.prompt or request.agent)[:60]
    return (request.title if request.parent_id is None else None) or request.agent


def root_start(request: SessionRequest, session_id: str, *, search_attributes: bool) -> SessionStart:
    """A session a client starts (``request.options.prompt_titles`` resolved: see SessionOptions)."""
    return SessionStart(
        id=session_id,
        summary=session_summary(request.agent, request.title, request.prompt),
        details=_details(request, f"{request.organisation}/{request.project} · user {request.user}"),
        search_attributes=(
            _attributes(request, session_id, visible_title(request, request.options.prompt_titles is not False))
            if search_attributes
            else None
        ),
    )


def child_start(request: SessionRequest, session_id: str, *, search_attributes: bool) -> SessionStart:
    """A sub-agent's session, started by its parent (``request`` carries the tree links)."""
    title = request.title or ""
    # A parent whose titles may not come from prompts hands that on (SessionOptions.delegation_only).
    shown = title if request.options.prompt_titles is not False else request.agent
    return SessionStart(
        id=session_id,
        summary=child_summary(request),
        details=_details(request, f"{request.organisation}/{request.project}"),
        search_attributes=_attributes(request, session_id, shown) if search_attributes else None,
    )


def child_summary(request: SessionRequest) -> str:
    """What the parent's Relationships tab and the list show of a child: its role, agent, title and task,
    ``sub-agent · assistant: Budget check · Ask what the trip may cost.`` (the summary is not replayed)."""
    head = f"{request.role or 'sub-agent'} · {request.agent}"
    parts = [f"{head}: {request.title}" if request.title else head]
    if request.prompt and request.prompt != request.title:
        parts.append(request.prompt)
    return shorten(" · ".join(parts), 200)


def handoff_start(session_id: str, *, agent: str, from_agent: str) -> SessionStart:
    """The specialist's session a hand-off starts: a new conversation, not a sub-agent in the tree."""
    return SessionStart(
        id=session_id,
        summary=f"{agent}: hand-off from {from_agent}"[:200],
        details=None,
        search_attributes=None,
        id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
    )
