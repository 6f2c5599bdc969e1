"""The memory tools in their three faces (RTC, FYAI, codai), and the Memory Context hook, over the engine in
:mod:`._memory`."""

from __future__ import annotations

from agent_tools._activity_io import SessionRef
from agent_tools._errors import ToolFailure
from agent_tools._messages import Message
from agent_tools.activities._context import BuiltinContext, ToolImpl
from agent_tools.activities._memory import Memory, MemoryEngine, Scope, memory_id_for, utc_now
from agent_tools.activities._services import ContextHook, Services
from agent_tools.contracts._memory.contract import (
    DeleteMemoryArgs,
    DeleteMemoryResult,
    ListMemoriesArgs,
    ListMemoriesResult,
    MemoryItem,
    MemoryRecallArgs,
    MemoryRememberArgs,
    RecallArgs,
    RememberArgs,
    SaveMemoryArgs,
    SaveMemoryResult,
    SearchMemoryArgs,
    SearchMemoryResult,
    Tier,
    UpdateMemoryArgs,
)
from agent_tools.contracts._memory.format import DATA_NOTE, human_age, render_context_block, render_recall


def memory_enabled(services: Services, ref: SessionRef) -> bool:
    """The session's Memory switch: the agent's definition, or the request's ``options.memory``."""
    return ref.memory


def _require(ctx: BuiltinContext) -> tuple[MemoryEngine, Scope, str]:
    if not memory_enabled(ctx.services, ctx.session):
        raise ToolFailure(f"Memory is off for agent {ctx.session.agent!r}; nothing was read or saved. Carry on.")
    return ctx.services.memory, Scope.of(ctx.session), f"{ctx.session.session_id}/{ctx.call_id}"


async def _save(ctx: BuiltinContext, content: str, tier: Tier, tags: list[str]) -> tuple[str, Memory]:
    engine, scope, call_key = _require(ctx)
    memory_id = memory_id_for(scope, ctx.session.session_id, ctx.session.run_id, ctx.call_id)
    return await engine.save(scope, content.strip(), tier=tier, tags=tags, call_key=call_key, memory_id=memory_id)


def _saved_text(status: str, m: Memory) -> str:
    if status == "created":
        return f"Remembered as {m.memory_id} ({m.tier})."
    return (
        f"Already remembered as {m.memory_id} ({m.tier}, saved {human_age(m.updated_at, utc_now())}); "
        "no duplicate was saved."
    )


# ---- RTC ----------------------------------------------------------------------------------------------


async def save_memory(args: SaveMemoryArgs, ctx: BuiltinContext) -> SaveMemoryResult:
    status, m = await _save(ctx, args.content, args.tier, args.tags)
    return SaveMemoryResult(status=status, memory=m.item(utc_now()))  # type: ignore[arg-type]


async def update_memory(args: UpdateMemoryArgs, ctx: BuiltinContext) -> MemoryItem:
    engine, scope, _ = _require(ctx)
    content = args.content.strip() if args.content is not None else None
    m = await engine.update(scope, args.memory_id.strip(), content=content, tags=args.tags, tier=args.tier)
    return m.item(utc_now())


async def delete_memory(args: DeleteMemoryArgs, ctx: BuiltinContext) -> DeleteMemoryResult:
    engine, scope, _ = _require(ctx)
    if not await engine.delete(scope, args.memory_id.strip()):
        raise ToolFailure(f"No memory {args.memory_id!r} for this agent and user.")
    return DeleteMemoryResult(memory_id=args.memory_id.strip(), deleted=True)


async def list_memories(args: ListMemoriesArgs, ctx: BuiltinContext) -> ListMemoriesResult:
    engine, scope, _ = _require(ctx)
    found, total = await engine.list_memories(scope, tier=args.tier, tag=args.tag, limit=args.limit, offset=args.offset)
    now = utc_now()
    return ListMemoriesResult(memories=[m.item(now) for m in found], total=total, offset=args.offset)


async def search_memory(args: SearchMemoryArgs, ctx: BuiltinContext) -> SearchMemoryResult:
    engine, scope, call_key = _require(ctx)
    found = await engine.search(scope, args.query, limit=args.limit, tier=args.tier, use_call=call_key)
    now = utc_now()
    return SearchMemoryResult(note=DATA_NOTE, query=args.query, memories=[m.item(now) for m in found])


# ---- FYAI ---------------------------------------------------------------------------------------------


async def remember(args: RememberArgs, ctx: BuiltinContext) -> str:
    status, m = await _save(ctx, args.fact, args.tier, [])
    return _saved_text(status, m)


async def recall(args: RecallArgs, ctx: BuiltinContext) -> str:
    engine, scope, call_key = _require(ctx)
    found = await engine.search(scope, args.query, limit=args.limit, use_call=call_key)
    return render_recall(args.query, [m.line() for m in found], utc_now())


# ---- codai --------------------------------------------------------------------------------------------


async def memory_remember(args: MemoryRememberArgs, ctx: BuiltinContext) -> str:
    status, m = await _save(ctx, args.content, "long_term", args.tags)
    return _saved_text(status, m)


async def memory_recall(args: MemoryRecallArgs, ctx: BuiltinContext) -> str:
    engine, scope, call_key = _require(ctx)
    found = await engine.search(scope, args.query, limit=args.limit, use_call=call_key)
    return render_recall(args.query, [m.line() for m in found], utc_now())


# ---- Memory Context -----------------------------------------------------------------------------------

_CONTEXT_CACHE_SIZE = 256


def _last_user_message(transcript: list[Message]) -> tuple[int, str]:
    for seq in range(len(transcript) - 1, -1, -1):
        if transcript[seq].role == "user":
            return seq, transcript[seq].content
    return -1, ""


async def memory_context(services: Services, ref: SessionRef, transcript: list[Message]) -> str | None:
    """The Memory Context block for this model step: memories relevant to the latest user message.

    Cached per (session, user message): every step of one turn shows the same block, which keeps the
    prompt prefix stable for provider caching and costs no query after the turn's first step.
    """
    if not memory_enabled(services, ref):
        return None
    engine = services.memory
    seq, message = _last_user_message(transcript)
    cache = services.memory_context
    key = (ref.session_id, ref.run_id, seq)
    if key in cache:
        return cache[key]
    found = await engine.context(Scope.of(ref), message[:1000], engine.policy.context_limit)
    block = render_context_block([m.line() for m in found], utc_now())
    cache[key] = block
    while len(cache) > _CONTEXT_CACHE_SIZE:
        cache.popitem(last=False)
    return block


IMPLEMENTATIONS: dict[str, ToolImpl] = {
    "saveMemory": save_memory,
    "updateMemory": update_memory,
    "deleteMemory": delete_memory,
    "listMemories": list_memories,
    "searchMemory": search_memory,
    "remember": remember,
    "recall": recall,
    "memory_remember": memory_remember,
    "memory_recall": memory_recall,
}

CONTEXT_HOOKS: list[ContextHook] = [memory_context]
