"""wait_for_event inside the session: keep the wait where the ingress finds it, then wait on a durable timer.

The wait costs no polling: a durable timer (``workflow.wait_condition(..., timeout=)``) races the
``event_arrived`` signal (the ingress's, or with direct delivery off the project router's). Only small references cross into the session's history; the event itself is read
by the session's next activity (``load_event``, a local activity since patch ``load-event-local``), which
also saves a large payload as an artifact.
"""

import asyncio
from datetime import timedelta

from temporalio.exceptions import ActivityError

from agent_tools._activity_io import ToolCallOutput
from agent_tools._messages import ToolCall
from agent_tools._session import ParkedCall, SessionStatus
from agent_tools._session_names import QUERY_EVENT_STATE, QUERY_EVENT_WAITS, SIGNAL_EVENT_ARRIVED
from agent_tools._spill import should_spill
from agent_tools.contracts._events.contract import (
    ACTIVITY_LOAD_EVENT,
    ACTIVITY_SUBSCRIBE,
    EventDelivery,
    EventWait,
    EventWaitState,
    LoadEventInput,
    SubscribeInput,
    SubscribeOutput,
    Subscription,
    WaitForEventArgs,
    WaitForEventResult,
    received_result,
    render_result,
    timeout_message,
)
from agent_tools.workflows._base import call_options, failure_detail, local_call_options
from agent_tools.workflows._native import NativeHandler, ResumeHandler
from agent_tools.workflows._port import CapabilityPart, query, signal


class EventsPart(CapabilityPart):
    """wait_for_event, the ``event_arrived`` signal and the ``event_waits``/``event_state`` queries."""

    def native_tools(self) -> dict[str, NativeHandler]:
        return {"wait_for_event": self._tool_wait_for_event}

    def resume_handlers(self) -> dict[str, ResumeHandler]:
        return {"wait_for_event": self._resume_wait_for_event}

    async def _tool_wait_for_event(self, args: WaitForEventArgs, call: ToolCall) -> ToolCallOutput:
        ev = self.state.events
        started = self.port.now()
        sub_id = self.port.uuid4()
        wait = EventWait(
            subscription_id=sub_id,
            call_id=call.id,
            kind=args.kind,
            match=args.match or {},
            started_at=started,
            deadline=started + timedelta(seconds=args.timeout_seconds),
        )
        ev.waits[sub_id] = wait
        ev.waits_started += 1
        self.port.set_status(SessionStatus.waiting_for_event)
        self.port.publish(
            "event",
            action="waiting",
            event_kind=args.kind,
            match=wait.match,
            timeout_seconds=args.timeout_seconds,
        )
        self.port.refresh_details()
        # No ``finally``: when the worker evicts this run from its cache the coroutine is closed, and
        # workflow calls are not allowed then; a replay rebuilds the wait anyway.
        try:
            out = await self._wait_for_event(wait, args, call)
        except asyncio.CancelledError:
            self._end_wait(sub_id)
            raise
        self._end_wait(sub_id)
        return out

    def _end_wait(self, sub_id: str) -> None:
        ev = self.state.events
        ev.waits.pop(sub_id, None)
        if not ev.waits and self.state.status == SessionStatus.waiting_for_event:
            self.port.set_status(SessionStatus.running)
        self.port.refresh_details()

    async def _wait_for_event(self, wait: EventWait, args: WaitForEventArgs, call: ToolCall) -> ToolCallOutput:
        sub_id = wait.subscription_id
        sub = Subscription(
            subscription_id=wait.subscription_id,
            session_id=self.config.session_id,
            kind=wait.kind,
            match=wait.match,
            since=wait.started_at,
            deadline=wait.deadline,
            exclude_event_ids=list(self.state.events.delivered_event_ids),
        )
        try:
            subscribed = await self.port.execute_activity(
                ACTIVITY_SUBSCRIBE,
                SubscribeInput(organisation=self.config.organisation, project=self.config.project, subscription=sub),
                result_type=SubscribeOutput,
                summary=f"subscribe {wait.kind}",
                options=call_options(self.config.policy.engine),
            )
        except ActivityError as exc:
            return ToolCallOutput(content=f"wait_for_event could not subscribe: {failure_detail(exc)}", is_error=True)
        if subscribed.backlog is not None and wait.arrived is None:
            wait.arrived = subscribed.backlog
        return await self._await_event(
            wait, args.timeout_seconds, self.port.parked_call(call, "wait_for_event", sub_id)
        )

    async def _resume_wait_for_event(self, parked: ParkedCall, call: ToolCall) -> ToolCallOutput:
        """The wait_for_event call of a step the previous run continued-as-new in: the wait's row (and a
        router's subscription) is still in place (a delivery signals the workflow id, so this run), and the
        carried wait keeps its deadline."""
        wait = self.state.events.waits.get(parked.ref)
        if wait is None:
            return ToolCallOutput(content="wait_for_event: the wait was lost across continue-as-new", is_error=True)
        try:
            out = await self._await_event(wait, (wait.deadline - wait.started_at).total_seconds(), parked)
        except asyncio.CancelledError:
            self._end_wait(wait.subscription_id)
            raise
        self._end_wait(wait.subscription_id)
        return out

    async def _await_event(self, wait: EventWait, timeout_seconds: float, parked: ParkedCall | None) -> ToolCallOutput:
        remaining = (wait.deadline - self.port.now()).total_seconds()
        if wait.arrived is None and remaining > 0:
            try:
                await self.port.parked_wait(
                    parked,
                    lambda: wait.arrived is not None,
                    timeout=remaining,
                    summary=f"wait_for_event {wait.kind}"[:200],
                )
            except TimeoutError:
                pass
        waited = (self.port.now() - wait.started_at).total_seconds()
        if wait.arrived is None:
            self.state.events.timeouts += 1
            self.port.publish("event", action="timeout", event_kind=wait.kind)
            result = WaitForEventResult(
                status="timeout",
                kind=wait.kind,
                match=wait.match,
                waited_seconds=round(waited, 3),
                message=timeout_message(wait.kind, timeout_seconds),
            )
            return ToolCallOutput(content=render_result(result), data={"status": "timeout"})
        delivery = wait.arrived
        self.state.events.events_received += 1
        self.state.events.remember(delivery.event_id)
        self.port.publish("event", action="received", event_kind=delivery.kind, event_id=delivery.event_id)
        ref = self.port.session_ref()
        load = LoadEventInput(
            session_id=ref.session_id,
            run_id=ref.run_id,
            spill_threshold=ref.spill_threshold,
            call_id=wait.call_id,
            delivery=delivery,
            kind=wait.kind,
            match=wait.match,
            waited_seconds=waited,
        )
        engine = self.config.policy.engine
        carried = delivery.inline_event()
        if carried is not None:
            content, data = received_result(load, carried)
            # Rendered here when it needs no artifact (a spilled result is written by load_event).
            if not should_spill(content, ref.spill_threshold, exempt=False):
                return ToolCallOutput(content=content, data=data)
        # A local activity: one store read (and a spill of a large event), which as a regular activity would
        # cost a round trip through the server and a workflow task of its own before the next step.
        try:
            loaded: ToolCallOutput = await self.port.execute_activity(
                ACTIVITY_LOAD_EVENT,
                load,
                result_type=ToolCallOutput,
                summary=f"event {delivery.kind}",
                options=local_call_options(engine),
                local=True,
            )
            return loaded
        except ActivityError as exc:
            return ToolCallOutput(
                content=f"Event {delivery.event_id} ({delivery.kind}) arrived but could not be read: {failure_detail(exc)}",
                is_error=True,
            )

    def on_event_arrived(self, delivery: EventDelivery) -> None:
        wait = self.state.events.waits.get(delivery.subscription_id)
        # A late delivery (the wait timed out or was stopped) has nothing to wake; the first delivery wins.
        if wait is not None and wait.arrived is None:
            wait.arrived = delivery

    def query_event_waits(self) -> list[EventWait]:
        return list(self.state.events.waits.values())

    def query_event_state(self) -> EventWaitState:
        return self.state.events

    def on_start(self) -> None:
        # A wait lives inside a tool call: the waits of a step carried into this run (continue-as-new
        # mid-wait) are resumed by its turn; any other carried wait is a leftover with no tool call to wake.
        parked = self.state.parked
        keep = {p.ref for p in parked.waits if p.kind == "wait_for_event"} if parked is not None else set()
        waits = self.state.events.waits
        for sub_id in [k for k in waits if k not in keep]:
            del waits[sub_id]

    def pending_work(self) -> list[str]:
        reasons: list[str] = []
        if self.state.events.waits:
            reasons.append(f"waiting for {len(self.state.events.waits)} event(s)")
        return reasons

    def details_sections(self) -> list[str]:
        sections: list[str] = []
        waits = self.state.events.waits.values()
        if waits:
            lines = [
                f"- `{w.kind}`" + (f" match `{w.match}`" if w.match else "") + f" until {w.deadline:%H:%M:%S} UTC"
                for w in waits
            ]
            sections.append("**Waiting for events**\n" + "\n".join(lines))
        return sections

    HANDLERS = (
        signal(SIGNAL_EVENT_ARRIVED, on_event_arrived),
        query(QUERY_EVENT_WAITS, query_event_waits),
        query(QUERY_EVENT_STATE, query_event_state),
    )
