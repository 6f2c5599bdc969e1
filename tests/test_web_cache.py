"""The web cache on SQLite and PostgreSQL: shared entries, expiry, and the sweep that cleans it."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import delete

from agent_tools._store.db import Store
from agent_tools._store.web_tables import web_cache
from agent_tools._web.cache import WebCache


async def test_cache_round_trip_expiry_and_sweep(store_url: str, tmp_path: Path) -> None:
    store = Store(store_url)
    await store.create_schema()
    async with store.engine.begin() as conn:
        await conn.execute(delete(web_cache))
    now = [5_000.0]
    cache = WebCache(store, clock=lambda: now[0])
    other = WebCache(store, clock=lambda: now[0])  # another worker
    try:
        await cache.put("page", "https://a.example/", {"markdown": "# A", "n": 1}, ttl_s=900)
        await cache.put("search", "q", {"results": []}, ttl_s=600, extra={"max_results": 5})
        assert await other.get("page", "https://a.example/") == {"markdown": "# A", "n": 1}
        assert await other.get("search", "q", {"max_results": 5}) == {"results": []}
        assert await other.get("search", "q", {"max_results": 6}) is None
        assert await other.get("page_rtc", "https://a.example/") is None  # kinds never mix
        await cache.put("page", "https://a.example/", {"markdown": "# A2"}, ttl_s=900)  # upsert
        assert await other.get("page", "https://a.example/") == {"markdown": "# A2"}
        now[0] += 601
        assert await other.get("search", "q", {"max_results": 5}) is None  # expired: never served
        assert await other.count() == 2  # still stored until a sweep
        await cache.put("page", "https://b.example/", {"markdown": "# B"}, ttl_s=900)  # write sweeps
        assert await other.count() == 2 and await other.get("page", "https://b.example/") is not None
    finally:
        async with store.engine.begin() as conn:
            await conn.execute(delete(web_cache))
        await store.close()
