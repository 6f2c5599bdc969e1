"""The suite's one polling helper: what it returns, what it waits through, and how it fails."""

from __future__ import annotations

import pytest

from tests.support.polling import eventually


async def test_returns_the_first_value_that_holds() -> None:
    values = iter([None, [], [1], [1, 2]])

    async def check() -> list[int] | None:
        return next(values)

    assert await eventually(check, timeout=5, interval=0, what="a value") == [1]


async def test_until_decides_and_ignored_exceptions_count_as_not_yet() -> None:
    seen: list[int] = []

    async def check() -> int:
        seen.append(len(seen))
        if len(seen) < 3:
            raise ConnectionError("not up yet")
        return len(seen)

    got = await eventually(check, until=lambda n: n >= 5, ignoring=(ConnectionError,), timeout=5, interval=0, what="n")
    assert got == 5 and seen == [0, 1, 2, 3, 4]


async def test_fails_naming_what_and_the_last_value() -> None:
    async def check() -> str:
        return "still booting"

    with pytest.raises(AssertionError, match=r"the worker: not reached within 0.05 s; last seen: 'still booting'"):
        await eventually(check, until=lambda s: s == "ready", timeout=0.05, interval=0.01, what="the worker")


async def test_an_exception_not_ignored_propagates() -> None:
    async def check() -> bool:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        await eventually(check, timeout=5, what="never")
