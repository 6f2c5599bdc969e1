"""Heartbeat while awaiting slow I/O, so a crashed worker's activity is retried within the heartbeat
timeout instead of the (much longer) start-to-close timeout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")


async def with_heartbeat(awaitable: Awaitable[T], *, every: float | None = None) -> T:
    if not activity.in_activity():
        return await awaitable
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return await awaitable
    interval = every or max(0.2, timeout.total_seconds() / 3)

    async def beat() -> None:
        # Sleep first: a call that ends within the interval costs the server no heartbeat at all.
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat()

    beater = asyncio.create_task(beat())
    try:
        return await awaitable
    finally:
        beater.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beater
