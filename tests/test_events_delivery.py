"""The router's delivery activity: every session of a batch signalled, an ended one skipped, any other
failure the server may get over retried (the retry signals the batch again; a session ignores a repeated
delivery), one it refuses for good skipped."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from temporalio.service import RPCError, RPCStatusCode

from agent_tools.activities.events import deliver_events
from agent_tools.contracts.events import SIGNAL_EVENT_ARRIVED, DeliverEventsInput, EventDelivery, SessionDelivery


class FakeHandle:
    def __init__(self, client: FakeClient, session_id: str) -> None:
        self.client, self.session_id = client, session_id

    async def signal(self, name: str, arg: Any) -> None:
        failure = self.client.failures.get(self.session_id)
        if failure is not None:
            raise RPCError("refused", failure, b"")
        self.client.sent.append((self.session_id, name, arg))


class FakeClient:
    def __init__(self, failures: dict[str, RPCStatusCode] | None = None) -> None:
        self.failures = failures or {}
        self.sent: list[tuple[str, str, Any]] = []

    def get_workflow_handle(self, workflow_id: str) -> FakeHandle:
        return FakeHandle(self, workflow_id)


def batch(*session_ids: str) -> DeliverEventsInput:
    at = datetime(2026, 12, 1, tzinfo=UTC)
    return DeliverEventsInput(
        deliveries=[
            SessionDelivery(
                session_id=s,
                delivery=EventDelivery(subscription_id=f"sub-{s}", event_id="evt-1", kind="k", received_at=at),
            )
            for s in session_ids
        ]
    )


async def test_every_session_of_the_batch_is_signalled_and_an_ended_one_is_skipped() -> None:
    client = FakeClient({"s2": RPCStatusCode.NOT_FOUND})
    out = await deliver_events(batch("s1", "s2", "s3"), client=client)
    assert (out.delivered, out.gone) == (2, 1)
    assert sorted((s, name, arg.subscription_id) for s, name, arg in client.sent) == [
        ("s1", SIGNAL_EVENT_ARRIVED, "sub-s1"),
        ("s3", SIGNAL_EVENT_ARRIVED, "sub-s3"),
    ]


async def test_any_other_failure_fails_the_activity_so_that_it_is_retried() -> None:
    client = FakeClient({"s2": RPCStatusCode.UNAVAILABLE})
    with pytest.raises(RPCError):
        await deliver_events(batch("s1", "s2"), client=client)


@pytest.mark.parametrize("status", [RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.FAILED_PRECONDITION])
async def test_a_signal_the_server_refuses_is_skipped_not_retried_for_ever(status: RPCStatusCode) -> None:
    # Retried, it would get the same answer every time and hold the whole batch, and the router with it.
    client = FakeClient({"s1": status})
    out = await deliver_events(batch("s1", "s2"), client=client)
    assert (out.delivered, out.gone) == (1, 1)
    assert [s for s, _, _ in client.sent] == ["s2"]
