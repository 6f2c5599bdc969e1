"""The one way a test waits for a state it cannot be notified of: poll a check until it holds."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast, overload

T = TypeVar("T")


@overload
async def eventually(
    check: Callable[[], Awaitable[T | None]],
    *,
    timeout: float,
    interval: float = ...,
    what: str,
    ignoring: tuple[type[Exception], ...] = ...,
) -> T: ...


@overload
async def eventually(
    check: Callable[[], Awaitable[T]],
    *,
    until: Callable[[T], object],
    timeout: float,
    interval: float = ...,
    what: str,
    ignoring: tuple[type[Exception], ...] = ...,
) -> T: ...


async def eventually(
    check: Callable[[], Awaitable[T | None]] | Callable[[], Awaitable[T]],
    *,
    until: Callable[[T], object] | None = None,
    timeout: float,
    interval: float = 0.1,
    what: str,
    ignoring: tuple[type[Exception], ...] = (),
) -> T:
    """Await ``check()`` every ``interval`` seconds and return the first value that holds: for which
    ``until(value)`` is true, or without ``until``, that is true itself (not None, False or empty). An
    exception of a type in ``ignoring`` (a workflow that has not run its first task yet) counts as not
    holding. After ``timeout`` seconds this fails naming ``what`` and the last value or exception seen."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        last: object
        try:
            value = await check()
        except ignoring as exc:
            last = exc
        else:
            last = value
            if until(cast(T, value)) if until is not None else value:
                return cast(T, value)
        if loop.time() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout} s; last seen: {last!r}")
        await asyncio.sleep(interval)
