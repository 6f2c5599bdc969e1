"""The saved-result readers: read, search and query an artifact the tool runner saved.

Artifacts are rows of the ``artifacts`` table (``TranscriptStore.save_artifact``). A ref belongs to one
session and one workflow run: a ref from another session is unknown, and one from an earlier run (before a
continue-as-new) tells the model to call the tool again, as the FYAI contract says.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agent_tools._errors import ToolFailure
from agent_tools.activities._context import BuiltinContext, ToolImpl
from agent_tools.activities._query import bounded_query
from agent_tools.contracts._query import JsonQueryError
from agent_tools.contracts._results import (
    QueryToolResultArgs,
    ReadArtifactArgs,
    ReadArtifactResult,
    ReadToolResultArgs,
    SearchMatch,
    SearchToolResultArgs,
    SearchToolResultResult,
    readers,
    ref_turn,
)

# Views of the last few artifacts: paging through a 10 MB JSON result should not re-parse it every call.
_CACHE_SIZE = 4


class Artifact:
    def __init__(self, row: Any) -> None:
        self.ref: str = row.ref
        self.tool: str = row.tool
        self.content: str = row.content
        self.is_json: bool = bool(row.is_json)


async def load(ctx: BuiltinContext, ref: str, *, this_turn: bool = True) -> Artifact:
    """The artifact behind ``ref`` if this session's current run (and, for FYAI's readers, ``this_turn``:
    the current turn) saved it; else a failure the model reads."""
    ref = ref.strip()
    row = await ctx.services.transcripts.load_artifact(ref)
    if row is None or row.session_id != ctx.session.session_id:
        raise ToolFailure(
            f"No saved tool result with ref {ref!r} in this session. Use the ref from the saved-result "
            "pointer, or call the original tool again."
        )
    if row.run_id != ctx.session.run_id:
        raise ToolFailure(
            f"The saved tool result {ref!r} belongs to an earlier run of this session and is no longer "
            f"available. Call the tool that produced it ({row.tool}) again to get a fresh result."
        )
    saved_in = ref_turn(ref)
    if this_turn and saved_in is not None and ctx.session.turn is not None and saved_in != ctx.session.turn:
        # FYAI: "If the agent tries to use a reference from an earlier turn, it's told to call the tool again."
        raise ToolFailure(
            f"The saved tool result {ref!r} is from an earlier turn; saved results last only for the turn that "
            f"produced them. Call the tool that produced it ({row.tool}) again to get a fresh result."
        )
    return Artifact(row)


async def _view(ctx: BuiltinContext, art: Artifact) -> readers.LineView:
    """The line view, from the cache or built in a thread (pretty-printing 10 MB of JSON takes a moment).

    The cache is only touched on the event loop, never from the worker thread.
    """
    cache = ctx.services.result_views
    view = cache.get(art.ref)
    if view is not None:
        cache.move_to_end(art.ref)
        return view
    view = await asyncio.to_thread(readers.build_view, art.content, is_json=art.is_json)
    cache[art.ref] = view
    while len(cache) > _CACHE_SIZE:
        cache.popitem(last=False)
    return view


async def read_tool_result(args: ReadToolResultArgs, ctx: BuiltinContext) -> str:
    art = await load(ctx, args.ref)
    view = await _view(ctx, art)
    return readers.render_page(art.ref, readers.read_lines(view, args.offset, args.limit))


async def search_tool_result(args: SearchToolResultArgs, ctx: BuiltinContext) -> SearchToolResultResult:
    art = await load(ctx, args.ref)
    view = await _view(ctx, art)
    try:
        # In a thread (the regex module releases the GIL with concurrent=True): a slow pattern must not
        # stall the worker's event loop, and the timeout inside the scan stops it.
        outcome = await asyncio.to_thread(readers.search, view, args.pattern, max_matches=args.max_matches)
    except readers.PatternError as exc:
        raise ToolFailure(f"{exc}. Fix the pattern (Python regular expression syntax) and try again.") from exc
    except readers.PatternTimeout as exc:
        raise ToolFailure(str(exc)) from exc
    return SearchToolResultResult(
        ref=art.ref,
        pattern=args.pattern,
        total_matches=outcome.total,
        total_is_lower_bound=outcome.total_is_lower_bound,
        total_lines=outcome.total_lines,
        matches=[SearchMatch(offset=m.offset, match=m.match, before=m.before, after=m.after) for m in outcome.matches],
    )


async def query_tool_result(args: QueryToolResultArgs, ctx: BuiltinContext) -> str:
    art = await load(ctx, args.ref)
    try:
        document = await asyncio.to_thread(json.loads, art.content)
    except (ValueError, RecursionError) as exc:
        raise ToolFailure(
            f"The saved result {art.ref!r} is not JSON (or nested too deeply to read), so it has no paths. "
            "Use read_tool_result or search_tool_result instead."
        ) from exc
    try:
        value = await bounded_query(lambda: document, args.path)
        return readers.render_query(art.ref, document, args.path, value, args.max_chars)
    except JsonQueryError as exc:
        raise ToolFailure(f"Path {args.path!r} does not fit the saved result: {exc}") from exc


async def read_artifact(args: ReadArtifactArgs, ctx: BuiltinContext) -> ReadArtifactResult:
    # codai sets no lifetime for a spilled result: read_artifact reads any of the current run's.
    art = await load(ctx, args.ref, this_turn=False)
    total = len(art.content)
    if args.offset > total:
        raise ToolFailure(f"offset {args.offset} is past the end; the artifact has {total:,} characters")
    end = min(total, args.offset + args.max_chars)
    return ReadArtifactResult(
        ref=art.ref,
        tool=art.tool,
        total_chars=total,
        offset=args.offset,
        content=art.content[args.offset : end],
        next_offset=end if end < total else None,
        is_json=art.is_json,
    )


IMPLEMENTATIONS: dict[str, ToolImpl] = {
    "read_tool_result": read_tool_result,
    "search_tool_result": search_tool_result,
    "query_tool_result": query_tool_result,
    "read_artifact": read_artifact,
}
