"""``EventRouter``: one long-lived workflow per organisation and project that routes events to sessions.

Sessions send ``subscribe`` (through an activity's signal-with-start); the ingress sends ``event`` (signal-
with-start too, so the router exists whenever there is something to route). Signals to one workflow are
delivered in order, so an event signalled after a subscription is always matched against it, even when no
worker runs at the time: both signals wait in history until one does.

Subscriptions are one-shot (a wait takes the first matching event) and end at their deadline. The router
continues-as-new with its live subscriptions before its history grows large.

A routed batch's deliveries go out from one local activity that signals the sessions in parallel (patch
``router-batched-delivery``). One external-signal command per session cost the router two history events
and a workflow task each (the server's confirmation wakes the workflow), and those workflow tasks, one at
a time per workflow, were what held a burst of events back; a local activity costs one marker per batch
and no round trip through the server.

Since revision 0005 the ingress signals the waiting sessions itself, from the waits the subscribe activity
keeps in the store, and claims each wait there; the delivery activity skips a claimed wait (and claims the
rest). With ``direct_delivery`` on (the default) nothing signals the router at all: it serves deployments
that turn direct delivery off (the waits and the events then reach it too, and it delivers what the ingress
did not: a wait subscribed before the store kept waits), and replays its recorded histories.
"""

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from agent_tools.contracts._events.contract import (
    ACTIVITY_DELIVER_EVENTS,
    ROUTER_WORKFLOW,
    SIGNAL_EVENT,
    SIGNAL_SUBSCRIBE,
    DeliverEventsInput,
    DeliverEventsOutput,
    EventDelivery,
    RouterEvent,
    RouterInput,
    RouterView,
    SessionDelivery,
    Subscription,
    subscription_matches,
)


@workflow.defn(name=ROUTER_WORKFLOW, sandboxed=False)
class EventRouter:
    """Subscriptions of one organisation and project; signals ``subscribe`` and ``event``, query ``state``."""

    @workflow.init
    def __init__(self, input: RouterInput) -> None:
        self.state = input.model_copy(deep=True)
        self._queue: list[RouterEvent] = []
        # Deliveries in flight: the router keeps routing while the server confirms earlier signals.
        self._inflight: set[asyncio.Task[None]] = set()
        self._recent: set[str] = set(self.state.recent_event_ids)

    @workflow.run
    async def run(self, input: RouterInput) -> None:
        while True:
            try:
                await workflow.wait_condition(
                    lambda: bool(self._queue) or self._history_full(), timeout=self._until_next_deadline()
                )
            except TimeoutError:
                pass  # a subscription's deadline passed: drop it below
            self._drop_expired()
            if self._queue:
                await self._route_queued()
                continue
            if self._history_full():
                # A continue-as-new must never drop a queued event or a delivery still in flight.
                if self._inflight:
                    await asyncio.gather(*self._inflight)
                await workflow.wait_condition(workflow.all_handlers_finished)
                if self._queue:
                    continue
                ids = self.state.recent_event_ids
                self.state.recent_event_ids = (
                    ids[len(ids) - self.state.recent_ids_kept :] if self.state.recent_ids_kept else []
                )
                workflow.continue_as_new(self.state)

    # ---- messages in ------------------------------------------------------------------------------------

    @workflow.signal(name=SIGNAL_SUBSCRIBE)
    def signal_subscribe(self, sub: Subscription) -> None:
        if any(s.subscription_id == sub.subscription_id for s in self.state.subscriptions):
            return  # a retried subscribe activity
        self.state.subscriptions.append(sub)

    @workflow.signal(name=SIGNAL_EVENT)
    def signal_event(self, event: RouterEvent) -> None:
        if event.event_id in self._recent:
            return  # a repeated delivery: the ingress signals every one, the router routes the first
        self._recent.add(event.event_id)
        self.state.recent_event_ids.append(event.event_id)
        ids = self.state.recent_event_ids
        if len(ids) > 2 * max(self.state.recent_ids_kept, 1):
            cut = max(len(ids) - self.state.recent_ids_kept, 0)
            self._recent.difference_update(ids[:cut])
            self.state.recent_event_ids = ids[cut:]
        self.state.events_seen += 1
        self._queue.append(event)

    @workflow.query(name="state")
    def query_state(self) -> RouterView:
        return RouterView(
            organisation=self.state.organisation,
            project=self.state.project,
            subscriptions=self.state.subscriptions,
            delivered=self.state.delivered,
            events_seen=self.state.events_seen,
            pending=len(self._queue),
        )

    # ---- routing ------------------------------------------------------------------------------------

    def _history_full(self) -> bool:
        info = workflow.info()
        return (
            info.is_continue_as_new_suggested()
            or info.get_current_history_length() >= self.state.max_history_events
            or info.get_current_history_size() >= self.state.max_history_bytes
        )

    def _until_next_deadline(self) -> timedelta | None:
        if not self.state.subscriptions:
            return None
        earliest = min(s.deadline for s in self.state.subscriptions)
        return max(earliest - workflow.now(), timedelta(seconds=1))

    def _drop_expired(self) -> None:
        now = workflow.now()
        self.state.subscriptions = [s for s in self.state.subscriptions if s.deadline > now]

    async def _route_queued(self) -> None:
        """Match every queued event in arrival order (each subscription takes its first match), then send
        the deliveries without waiting for them: one workflow task for a burst of events, and the next
        burst is routed while the server still confirms this one."""
        deliveries: list[tuple[str, EventDelivery]] = []
        while self._queue:
            event = self._queue.pop(0)
            keep: list[Subscription] = []
            for sub in self.state.subscriptions:
                if subscription_matches(sub, event.kind, event.payload, event.event_id):
                    deliveries.append((sub.session_id, EventDelivery.of(event, sub.subscription_id)))
                else:
                    keep.append(sub)
            self.state.subscriptions = keep
        if not deliveries:
            return
        batch = [SessionDelivery(session_id=s, delivery=d) for s, d in deliveries]
        self._track(asyncio.create_task(self._deliver_batch(batch)))

    def _track(self, task: asyncio.Task[None]) -> None:
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    async def _deliver_batch(self, batch: list[SessionDelivery]) -> None:
        # Retried until the server takes the signals: an event matched here has left its subscriptions,
        # so giving up would lose it. A session that has ended is skipped by the activity itself.
        out = await workflow.execute_local_activity(
            ACTIVITY_DELIVER_EVENTS,
            DeliverEventsInput(deliveries=batch),
            result_type=DeliverEventsOutput,
            summary=f"deliver {len(batch)} event(s)",
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30)),
        )
        self.state.delivered += out.delivered
