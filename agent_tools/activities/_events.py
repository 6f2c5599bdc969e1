"""Event activities: keep a waiting session's wait where the ingress finds it, and load the event it received.

``subscribe`` keeps the wait in the store (``event_subscriptions``, where the ingress finds it and signals
the session itself), then looks in the events table for a matching event stored since the wait began: the
ingress stores an event before it looks for the waits, so an event stored before this wait's row is found
here, and an event stored after it reaches the session from the ingress. Nothing falls in between. Whoever
delivers an event to a wait first claims the wait's row, and the others skip it: a session is signalled once
per wait, and ignores any repeated delivery anyway.

The wait must be kept: a store error fails the activity (retried), and a match the store cannot keep is
refused with the reason. The project's router is signalled too (signal-with-start: a workflow cannot, an
activity can) only with ``direct_delivery`` off, the path before the ingress delivered on its own.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from temporalio import activity
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from agent_tools._activity_io import ToolCallOutput
from agent_tools._errors import InvalidInput
from agent_tools._store.db import Store
from agent_tools._store.event_tables import add_subscription, claim_batch, claim_one, find_matching, get_event
from agent_tools.activities._services import ActivityClass, Services
from agent_tools.activities._tool_runner import save_if_large
from agent_tools.contracts._events.contract import (
    ACTIVITY_DELIVER_EVENTS,
    ACTIVITY_LOAD_EVENT,
    ACTIVITY_SUBSCRIBE,
    ROUTER_WORKFLOW,
    SIGNAL_EVENT_ARRIVED,
    SIGNAL_SUBSCRIBE,
    DeliverEventsInput,
    DeliverEventsOutput,
    EventDelivery,
    LoadEventInput,
    RouterInput,
    SessionDelivery,
    SubscribeInput,
    SubscribeOutput,
    received_result,
    router_workflow_id,
)
from agent_tools.contracts._events.settings import EventSettings


async def subscribe(services: Services, inp: SubscribeInput, *, client: Any, task_queue: str) -> SubscribeOutput:
    """Keep the wait in the store (and with ``direct_delivery`` off, signal-with-start the router), then
    check the backlog. Idempotent: the store and the router keep the first of a repeated id.

    Raises:
        ApplicationError: (not retryable) the store cannot keep this wait's match; a store error raises as
            it is, and the activity is retried.
    """
    cfg = services.settings.events
    sub = inp.subscription
    try:
        await add_subscription(services.store, inp.organisation, inp.project, sub)
    except InvalidInput as exc:
        # Before the ingress delivered on its own the router took such a wait; nothing delivers it now, so
        # the model is told, and can wait on a simpler match.
        raise ApplicationError(f"the wait cannot be kept: {exc}", type="InvalidInput", non_retryable=True) from exc
    router_id = router_workflow_id(inp.organisation, inp.project, cfg.router_id_prefix)
    if not cfg.direct_delivery:
        await signal_router(
            client, cfg, inp.organisation, inp.project, task_queue=task_queue, signal=SIGNAL_SUBSCRIBE, arg=sub
        )
    found = await find_matching(
        services.store,
        organisation=inp.organisation,
        project=inp.project,
        kind=sub.kind,
        match=sub.match,
        since=sub.since,
        exclude=sub.exclude_event_ids,
        limit=cfg.backlog_scan_limit,
    )
    if found is not None:
        # The ingress may have claimed this wait for another event meanwhile (and signalled it): the wait
        # takes that one, the same as the signal brings.
        held = await claim_one(services.store, sub.subscription_id, found.event_id, now=datetime.now(UTC))
        if held is not None and held != found.event_id:
            found = await get_event(services.store, held)
    backlog = None
    if found is not None:
        backlog = EventDelivery.of(found, sub.subscription_id)
    return SubscribeOutput(router_id=router_id, backlog=backlog)


async def signal_router(
    client: Any, cfg: EventSettings, organisation: str, project: str, *, task_queue: str, signal: str, arg: Any
) -> None:
    """Signal-with-start the project's router (``direct_delivery`` off): the subscribe activity's wait, the
    ingress's event. A workflow cannot signal-with-start; an activity or the ingress can, so the router exists
    whenever there is something to route."""
    await client.start_workflow(
        ROUTER_WORKFLOW,
        RouterInput(organisation=organisation, project=project, max_history_events=cfg.router_max_history_events),
        id=router_workflow_id(organisation, project, cfg.router_id_prefix),
        task_queue=task_queue,
        start_signal=signal,
        start_signal_args=[arg],
        static_summary=f"event router {organisation}/{project}",
    )


# Answers no retry changes: the session has ended, or the server refuses this signal itself. Retried, one
# such session would hold the router's batch (and its continue-as-new) for ever; the old per-signal code
# logged and dropped every failure.
_UNDELIVERABLE = frozenset({RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT, RPCStatusCode.FAILED_PRECONDITION})

# Signals in flight at once from one batch: enough to keep the server busy, few enough not to flood it.
DELIVERY_CONCURRENCY = 64


async def deliver_events(inp: DeliverEventsInput, *, client: Any, store: Store | None = None) -> DeliverEventsOutput:
    """Signal ``event_arrived`` to every session of a routed batch, in parallel.

    With a store, a wait already claimed there (the ingress or the backlog check delivered an event to it)
    is skipped, and every other wait of the batch is claimed first (see ``claim_batch``).

    A session that has ended is skipped (nothing waits any more), as is one the server refuses the signal for
    (an invalid argument, a failed precondition: a retry would get the same answer); any other failure fails
    the activity,
    whose retry signals the whole batch again: a session takes the first delivery for a wait and ignores a
    repeated one, so a retry never delivers an event twice.
    """
    items = inp.deliveries
    skipped = 0
    if store is not None and items:
        pairs = [(i.delivery.subscription_id, i.delivery.event_id) for i in items]
        try:
            keep = await claim_batch(store, pairs, now=datetime.now(UTC))
        except Exception as exc:  # the store is away: signal them all, as before the claims (a session
            # ignores a repeated delivery), rather than hold the router until it is back
            activity.logger.warning("claims of %d deliveries not checked: %s", len(items), exc)
        else:
            skipped = len(items) - sum(1 for i in items if i.delivery.subscription_id in keep)
            items = [i for i in items if i.delivery.subscription_id in keep]
    sent = await signal_sessions(client, items)
    delivered = sum(sent)
    return DeliverEventsOutput(delivered=delivered, gone=len(sent) - delivered, claimed_elsewhere=skipped)


async def signal_sessions(client: Any, items: list[SessionDelivery]) -> list[bool]:
    """Signal ``event_arrived`` to each session, at most ``DELIVERY_CONCURRENCY`` at once: the router's
    delivery and the ingress's direct one. False where the session is gone or the server refuses the
    signal for good (logged and skipped); any other failure raises."""
    limit = asyncio.Semaphore(DELIVERY_CONCURRENCY)

    async def one(item: SessionDelivery) -> bool:
        async with limit:
            try:
                await client.get_workflow_handle(item.session_id).signal(SIGNAL_EVENT_ARRIVED, item.delivery)
            except RPCError as exc:
                if exc.status not in _UNDELIVERABLE:
                    raise
                activity.logger.info("event %s not delivered to %s: %s", item.delivery.event_id, item.session_id, exc)
                return False
            return True

    return list(await asyncio.gather(*(one(item) for item in items)))


async def load_event(services: Services, inp: LoadEventInput) -> ToolCallOutput:
    """Render the wait's result from the stored event; a large one is saved as an artifact (a pointer
    goes to the model), exactly like an activity tool's result."""
    record = await get_event(services.store, inp.delivery.event_id)
    content, data = received_result(inp, record)
    return await save_if_large(
        services,
        ToolCallOutput(content=content, data=data),
        session_id=inp.session_id,
        run_id=inp.run_id,
        call_id=inp.call_id,
        tool="wait_for_event",
        threshold=inp.spill_threshold,
    )


class EventActivities(ActivityClass):
    """Subscribe a session to events, load a delivered event, deliver a batch to its sessions."""

    @activity.defn(name=ACTIVITY_SUBSCRIBE)
    async def subscribe(self, inp: SubscribeInput) -> SubscribeOutput:
        services = await self._services.get()
        return await subscribe(services, inp, client=activity.client(), task_queue=activity.info().task_queue)

    @activity.defn(name=ACTIVITY_LOAD_EVENT)
    async def load_event(self, inp: LoadEventInput) -> ToolCallOutput:
        services = await self._services.get()
        return await load_event(services, inp)

    @activity.defn(name=ACTIVITY_DELIVER_EVENTS)
    async def deliver_events(self, inp: DeliverEventsInput) -> DeliverEventsOutput:
        services = await self._services.get()
        return await deliver_events(inp, client=activity.client(), store=services.store)
