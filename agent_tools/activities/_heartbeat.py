"""Heartbeat while awaiting slow I/O, so a crashed worker's activity is retried within the heartbeat
timeout instead of the (much longer) start-to-close timeout."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import TypeVar

from temporalio import activity

T = TypeVar("T")

# Set while a beater runs for the current activity: a tool that calls a model (webFetch's extraction,
# delegate_to_model) is already covered by the tool runner's beater and must not start a second one.
_beating: ContextVar[bool] = ContextVar("agent_tools_heartbeating", default=False)


async def with_heartbeat(awaitable: Awaitable[T], *, every: float | None = None) -> T:
    if not activity.in_activity() or _beating.get():
        return await awaitable
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        return await awaitable
    # Five beats per timeout: the worker forwards at most one every 2 s (build_worker), so the server's
    # load stays bounded, and an event loop held up for a while still gets a beat into each window.
    interval = every or max(0.2, timeout.total_seconds() / 5)

    async def beat() -> None:
        # Sleep first: a call that ends within the interval costs the server no heartbeat at all.
        while True:
            await asyncio.sleep(interval)
            activity.heartbeat()

    beater = asyncio.create_task(beat())
    token = _beating.set(True)
    try:
        return await awaitable
    finally:
        _beating.reset(token)
        beater.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beater
