"""search_conversation_history: the current session's stored transcript, never the workflow history."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, select

from agent_tools._store.tables import transcript
from agent_tools.activities._context import BuiltinContext, ToolImpl
from agent_tools.contracts._history import (
    SNIPPET_CHARS,
    HistoryHit,
    SearchConversationHistoryArgs,
    SearchConversationHistoryResult,
)
from agent_tools.contracts._memory.format import aware


def snippet(content: str, needles: list[str], width: int = SNIPPET_CHARS) -> str:
    """``width`` characters around the first needle found (case-insensitive), with ellipses where cut."""
    low = content.lower()
    hits = [p for p in (low.find(n.lower()) for n in needles) if p >= 0]
    pos = min(hits) if hits else 0
    start = max(0, pos - width // 3)
    end = min(len(content), start + width)
    start = max(0, end - width)
    text = content[start:end].replace("\n", " ")
    return ("..." if start > 0 else "") + text + ("..." if end < len(content) else "")


async def _all_words(ctx: BuiltinContext, words: list[str], role: str | None, limit: int) -> list[Any]:
    """Messages holding every word of the query (any order), newest first."""
    conds = [func.lower(transcript.c.content).contains(w.lower(), autoescape=True) for w in words]
    stmt = select(transcript).where(transcript.c.session_id == ctx.session.session_id, and_(*conds))
    if role:
        stmt = stmt.where(transcript.c.role == role)
    ordered = stmt.order_by(transcript.c.seq.desc()).limit(limit)
    return list(await ctx.services.store.run(lambda conn: conn.execute(ordered).all()))


async def search_conversation_history(
    args: SearchConversationHistoryArgs, ctx: BuiltinContext
) -> SearchConversationHistoryResult:
    query = args.query.strip()
    exact = await ctx.services.transcripts.search(ctx.session.session_id, query, role=args.role, limit=args.limit)
    hits = [
        HistoryHit(
            position=s.seq,
            role=s.message.role,
            created_at=aware(s.created_at).isoformat(),
            snippet=snippet(s.message.content, [query]),
        )
        for s in exact
    ]
    words = query.split()
    if len(hits) < args.limit and len(words) > 1:
        # The exact phrase is rarely what people remember word for word; fall back to "all the words".
        seen = {h.position for h in hits}
        for row in await _all_words(ctx, words, args.role, args.limit):
            if row.seq in seen or len(hits) >= args.limit:
                continue
            hits.append(
                HistoryHit(
                    position=row.seq,
                    role=row.role,
                    created_at=aware(row.created_at).isoformat(),
                    snippet=snippet(row.content or "", words),
                )
            )
    hits.sort(key=lambda h: -h.position)
    note = None if hits else "No earlier message in this conversation matches; try fewer or other words."
    return SearchConversationHistoryResult(query=query, role=args.role, matches=hits, note=note)


IMPLEMENTATIONS: dict[str, ToolImpl] = {"search_conversation_history": search_conversation_history}
