"""The web cache over the SQL store: a lookup that ignores expired rows and a write that also sweeps them
(the "self-cleaning" cache), so every worker sees the same entries."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, delete, select

from agent_tools._store.base import upsert_rows
from agent_tools._store.db import Store
from agent_tools._store.web_tables import web_cache

SWEEP_EVERY_S = 60.0


def cache_key(kind: str, subject: str, extra: dict[str, Any] | None = None) -> str:
    material = json.dumps([kind, subject, extra or {}], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(material.encode()).hexdigest()


class WebCache:
    """Without a store (a client whose store no worker has created yet) every lookup misses and nothing is
    kept: the tools still work, uncached."""

    def __init__(self, store: Store | None, *, clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.clock = clock
        self._last_sweep = 0.0

    async def get(self, kind: str, subject: str, extra: dict[str, Any] | None = None) -> dict[str, Any] | None:
        if self.store is None:
            return None
        key = cache_key(kind, subject, extra)
        stmt = select(web_cache.c.value).where(web_cache.c.key == key, web_cache.c.expires_at > self.clock())
        row = await self.store.run(lambda conn: conn.execute(stmt).first())
        if row is None:
            return None
        value: dict[str, Any] = json.loads(row[0])
        return value

    async def put(
        self,
        kind: str,
        subject: str,
        value: dict[str, Any],
        ttl_s: float,
        extra: dict[str, Any] | None = None,
    ) -> None:
        if self.store is None:
            return
        now = self.clock()
        row = {
            "key": cache_key(kind, subject, extra),
            "kind": kind,
            "subject": subject[:2000],
            "value": json.dumps(value, ensure_ascii=False),
            "created_at": now,
            "expires_at": now + ttl_s,
        }
        sweep = now - self._last_sweep > SWEEP_EVERY_S
        if sweep:
            self._last_sweep = now

        def write(conn: Connection) -> None:
            upsert_rows(conn, web_cache, [row], keys=["key"], update=["value", "created_at", "expires_at", "subject"])
            if sweep:
                conn.execute(delete(web_cache).where(web_cache.c.expires_at <= now))

        await self.store.run(write)

    async def count(self) -> int:
        if self.store is None:
            return 0
        return len(await self.store.run(lambda conn: conn.execute(select(web_cache.c.key)).all()))
