"""What a session tree waits on: the pending askUser questions and tool approvals of a session and of every
sub-agent still running under it, each read from that session's own handle (as the CLI's ``watch`` answers
a sub-agent: ``client.session(child).answer_questions(...)``).

A frontend names one of these by a call id: the root's own are their ask or approval id as they are (one
that would read as a sub-agent's gets a leading ``#``); a sub-agent's are its path under the root and the
id, ``sub-1/sub-2#call_x`` (:func:`call_id`, :func:`target_of`).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from agent_tools._session_names import QUERY_SUBAGENTS
from agent_tools.contracts._approvals import PendingApproval
from agent_tools.contracts._delegation import ChildRecord
from agent_tools.contracts._human import PendingQuestion

if TYPE_CHECKING:
    from agent_tools._client import AgentToolsClient

T = TypeVar("T")
Call = Callable[[Coroutine[Any, Any, Any]], Coroutine[Any, Any, Any]]

# A sub-agent's path under its root, as the progress cursor writes it (``sub-1/sub-2``).
_CHILD = re.compile(r"(sub-[0-9]{1,9}(?:/sub-[0-9]{1,9}){0,31})#(.+)", re.DOTALL)
# Sessions a tree read follows at most (a runaway fan-out must not turn one request into thousands).
MAX_TREE_SESSIONS = 200


def call_id(root: str, session_id: str, item_id: str) -> str:
    """The frontend's id of ``item_id`` (an ask or approval id) of ``session_id`` in ``root``'s tree."""
    if session_id == root or not session_id.startswith(root + "/"):
        # A root's id that would read as a sub-agent's (or as escaped) is escaped with a leading "#".
        return f"#{item_id}" if item_id.startswith("#") or _CHILD.fullmatch(item_id) else item_id
    return f"{session_id[len(root) + 1 :]}#{item_id}"


def target_of(root: str, call: str) -> tuple[str, str]:
    """The session and the ask or approval id a frontend's call id names (:func:`call_id` undone)."""
    if call.startswith("#"):
        return root, call[1:]
    found = _CHILD.fullmatch(call)
    if found is None:
        return root, call
    return f"{root}/{found.group(1)}", found.group(2)


@dataclass
class TreePending:
    """Pending items by session id, the root's first."""

    questions: list[tuple[str, PendingQuestion]] = field(default_factory=list)
    approvals: list[tuple[str, PendingApproval]] = field(default_factory=list)

    def asked(self, session_id: str, ask_id: str) -> list[PendingQuestion]:
        return [q for sid, q in self.questions if sid == session_id and q.ask_id == ask_id]

    def approval(self, session_id: str, approval_id: str) -> PendingApproval | None:
        return next((a for sid, a in self.approvals if sid == session_id and a.approval_id == approval_id), None)

    def open_calls(self, root: str) -> set[str]:
        """The frontend call ids of everything pending."""
        return {call_id(root, sid, q.ask_id) for sid, q in self.questions} | {
            call_id(root, sid, a.approval_id) for sid, a in self.approvals
        }


async def running_descendants(client: AgentToolsClient, session_id: str, call: Call) -> list[str]:
    """The sub-agents still running under ``session_id`` (theirs too), breadth first, by each parent's
    ``subagents`` query. A parent that does not answer is read as having none."""
    found: list[str] = []
    level = [session_id]
    while level and len(found) < MAX_TREE_SESSIONS:
        answers = await asyncio.gather(
            *(call(client.session(sid).query(QUERY_SUBAGENTS, list[ChildRecord])) for sid in level),
            return_exceptions=True,
        )
        level = [
            child.session_id
            for children in answers
            if isinstance(children, list)
            for child in children
            if child.status == "running"
        ][: MAX_TREE_SESSIONS - len(found)]
        found.extend(level)
    return found


async def pending_of(client: AgentToolsClient, sessions: list[str], call: Call, *, strict: str | None) -> TreePending:
    """The pending questions and approvals of ``sessions``. Only ``strict``'s failure (the root's, say) is
    raised; a sub-agent that does not answer (ended meanwhile) has nothing pending."""

    async def one(sid: str) -> tuple[list[PendingQuestion], list[PendingApproval]]:
        handle = client.session(sid)
        questions, approvals = await asyncio.gather(call(handle.pending_questions()), call(handle.pending_approvals()))
        return questions, approvals

    got = await asyncio.gather(*(one(sid) for sid in sessions), return_exceptions=True)
    out = TreePending()
    for sid, answer in zip(sessions, got, strict=True):
        if isinstance(answer, BaseException):
            if sid == strict:
                raise answer
            continue
        out.questions.extend((sid, q) for q in answer[0])
        out.approvals.extend((sid, a) for a in answer[1])
    return out


async def tree_pending(client: AgentToolsClient, session_id: str, call: Call) -> TreePending:
    """What ``session_id`` and its running sub-agents wait on; the session's own failure is raised."""
    sessions = [session_id, *await running_descendants(client, session_id, call)]
    return await pending_of(client, sessions, call, strict=session_id)
