"""``tests.support.temporal.skip_time``: a failed sleep RPC neither fails the test nor skips too little."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.service import RPCError, RPCStatusCode

from tests.support.temporal import skip_time

T0 = datetime(2026, 12, 1, tzinfo=UTC)


class FakeEnv:
    """A time-skipping server whose sleep calls fail as given; ``keeps_going``: the server's sleep goes on
    after the call failed (the clock reaches the target by itself), else it ends with the call."""

    def __init__(self, failures: list[str], *, keeps_going: bool) -> None:
        self.now = T0
        self.failures = failures
        self.keeps_going = keeps_going
        self.sleeps: list[float] = []
        self.pending: datetime | None = None

    async def get_current_time(self) -> datetime:
        if self.pending is not None:  # the server's sleep arrives a few reads later
            self.now, self.pending = self.pending, None
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        if self.failures:
            message = self.failures.pop(0)
            if self.keeps_going:
                self.pending = self.now + timedelta(seconds=seconds)
            raise RPCError(message, RPCStatusCode.UNKNOWN, b"")
        self.now += timedelta(seconds=seconds)


async def test_a_sleep_that_goes_on_after_its_call_timed_out_is_waited_for() -> None:
    env: Any = FakeEnv(["Timeout expired"], keeps_going=True)
    await skip_time(env, 3600)
    assert env.now == T0 + timedelta(hours=1) and env.sleeps == [3600]


async def test_a_sleep_whose_stream_broke_is_sent_again_for_what_is_left() -> None:
    env: Any = FakeEnv(["h2 protocol error: http2 error"], keeps_going=False)
    await skip_time(env, 3600, within=30, still=0.5)
    assert env.now == T0 + timedelta(hours=1) and env.sleeps == [3600, 3600]
