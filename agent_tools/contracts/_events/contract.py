"""The event contracts: wait_for_event's models and tool, the router's messages, the matching rules."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, Field, field_validator

from agent_tools import _session_names as session_names
from agent_tools._boundaries import MAX_JSON_DEPTH, clean_text, json_depth
from agent_tools._catalog.spec import ToolSpec
from agent_tools.contracts._events.settings import DEFAULT_ROUTER_PREFIX

DEFAULT_TIMEOUT_SECONDS = 900
MAX_TIMEOUT_SECONDS = 3300
# Event ids a session remembers having received, so that a new wait never returns the same event again.
RECENT_DELIVERED = 50
KIND_PATTERN = r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$"
_KIND_RE = re.compile(KIND_PATTERN)

# Names shared by the session, the router, the activities and the ingress.
ROUTER_WORKFLOW = "EventRouter"
SIGNAL_SUBSCRIBE = "subscribe"
SIGNAL_EVENT = "event"
# The session's own signal (its one spelling lives with the session's other names).
SIGNAL_EVENT_ARRIVED = session_names.SIGNAL_EVENT_ARRIVED
ACTIVITY_SUBSCRIBE = "agent_tools.events.subscribe"
ACTIVITY_LOAD_EVENT = "agent_tools.events.load_event"
ACTIVITY_DELIVER_EVENTS = "agent_tools.events.deliver"
# An event whose stored record is at most this many characters of JSON rides in the ingress's delivery
# (and the backlog check's): the woken session renders its result itself, without the store read that
# otherwise runs between the event's arrival and the next model step. A larger one never enters the
# session's history; the router, which holds no stored record, always leaves the event in the store.
INLINE_EVENT_CHARS = 4_000


# ---- the tool ------------------------------------------------------------------------------------------


class WaitForEventArgs(BaseModel):
    """Arguments of wait_for_event."""

    kind: str = Field(
        min_length=1,
        max_length=200,
        pattern=KIND_PATTERN,
        description="The event type to wait for, matched as a prefix, for example github.check_suite",
    )
    match: dict[str, Any] | None = Field(
        default=None,
        description=(
            'Payload fields that must match exactly, for example {"pr": 420}. Keys may be dotted paths into '
            'the payload ("pull_request.number"); "*" matches any list element.'
        ),
    )
    timeout_seconds: int = Field(
        default=DEFAULT_TIMEOUT_SECONDS,
        ge=1,
        le=MAX_TIMEOUT_SECONDS,
        description="How long to wait. The maximum is 3,300 seconds (55 minutes)",
    )

    @field_validator("timeout_seconds", mode="before")
    @classmethod
    def _cap_timeout(cls, value: Any) -> Any:
        # A model asking for an hour should wait the longest it may, not burn a step on a validation error.
        if isinstance(value, int | float) and not isinstance(value, bool) and value > MAX_TIMEOUT_SECONDS:
            return MAX_TIMEOUT_SECONDS
        return value


class WaitForEventResult(BaseModel):
    """What the model reads: ``status`` is ``received`` (with ``event``) or ``timeout``."""

    status: str
    kind: str
    match: dict[str, Any] = Field(default_factory=dict)
    waited_seconds: float
    event: EventRecord | None = None
    message: str | None = None


# ---- events --------------------------------------------------------------------------------------------


class EventOrigin(BaseModel):
    """An event's ids and where it came from: what the ingress acknowledges, and the stored event's head."""

    event_id: str
    kind: str
    organisation: str
    project: str
    source: str
    delivery_id: str


class EventRecord(EventOrigin):
    """One stored event as the ingress accepted it."""

    received_at: datetime
    payload: dict[str, Any] = Field(default_factory=dict)


class RouterEvent(BaseModel):
    """Signal ``event`` to the router: the event with its payload (the router matches on it)."""

    event_id: str
    kind: str
    source: str
    received_at: datetime
    payload: dict[str, Any] = Field(default_factory=dict)


class Subscription(BaseModel):
    """Signal ``subscribe`` to the router: one session waiting once for one kind of event."""

    subscription_id: str
    session_id: str
    kind: str
    match: dict[str, Any] = Field(default_factory=dict)
    since: datetime
    deadline: datetime
    # Events this session already received: a new wait must not get them again.
    exclude_event_ids: list[str] = Field(default_factory=list)


class EventDelivery(BaseModel):
    """Signal ``event_arrived`` to a session: which event matched which wait (the payload stays in the
    store; the session's next activity loads it, so large payloads never enter the session's history)."""

    subscription_id: str
    event_id: str
    kind: str
    received_at: datetime
    source: str = ""
    # The stored event itself, when it is small (INLINE_EVENT_CHARS) and the sender holds it.
    event: EventRecord | None = None

    @classmethod
    def of(cls, event: EventRecord | RouterEvent, subscription_id: str) -> EventDelivery:
        """The delivery of ``event`` to one wait (the router's and the backlog check's)."""
        return cls.to_waits(event, [subscription_id])[0]

    @classmethod
    def to_waits(cls, event: EventRecord | RouterEvent, subscription_ids: Sequence[str]) -> list[EventDelivery]:
        """The deliveries of ``event`` to each wait (the ingress's to every wait it claimed): the event is
        measured for carrying once, not once per wait."""
        inline = isinstance(event, EventRecord) and len(event.model_dump_json()) <= INLINE_EVENT_CHARS
        return [
            cls(
                subscription_id=subscription_id,
                event_id=event.event_id,
                kind=event.kind,
                received_at=event.received_at,
                source=event.source,
                event=event if inline else None,
            )
            for subscription_id in subscription_ids
        ]

    def inline_event(self) -> EventRecord | None:
        """The event that rode in this delivery, if it is the one the delivery names and as shallow as the
        ingress accepts (a raw client's signal may carry anything: the session then reads the store)."""
        event = self.event
        if event is None or event.event_id != self.event_id or json_depth(event.payload) > MAX_JSON_DEPTH:
            return None
        return event


class SessionDelivery(BaseModel):
    """One ``event_arrived`` signal the router owes a session."""

    session_id: str
    delivery: EventDelivery


class DeliverEventsInput(BaseModel):
    """The router's deliveries of one routed batch, sent by one local activity."""

    deliveries: list[SessionDelivery]


class DeliverEventsOutput(BaseModel):
    delivered: int = 0
    # Sessions that had ended meanwhile (nothing waits any more).
    gone: int = 0
    # Waits the ingress (or a backlog check) had delivered an event to already: not signalled again.
    claimed_elsewhere: int = 0


class RouterInput(BaseModel):
    """EventRouter input; after continue-as-new it carries the live subscriptions."""

    organisation: str
    project: str
    subscriptions: list[Subscription] = Field(default_factory=list)
    recent_event_ids: list[str] = Field(default_factory=list)
    delivered: int = 0
    events_seen: int = 0
    # Continue-as-new once the history has this many events (Temporal's hard limit is 51,200).
    max_history_events: int = Field(default=2000, ge=20)
    # ... or once it holds this many bytes (event payloads travel in its signals; the hard limit is 50 MB).
    max_history_bytes: int = Field(default=8_000_000, ge=100_000)
    # Event ids remembered to drop a second signal for the same event (the ingress may re-signal).
    recent_ids_kept: int = Field(default=1000, ge=0)


class RouterView(BaseModel):
    """Query ``state`` of the router."""

    organisation: str
    project: str
    subscriptions: list[Subscription]
    delivered: int
    events_seen: int
    pending: int


class SubscribeInput(BaseModel):
    organisation: str
    project: str
    subscription: Subscription


class SubscribeOutput(BaseModel):
    # The project's router (signalled only with direct delivery off; the session does not use it).
    router_id: str
    # A matching event stored after the wait began, found by the backlog check (the ingress looked before
    # the wait's row was there).
    backlog: EventDelivery | None = None


class LoadEventInput(BaseModel):
    """The session asks its next activity to read the event and render the tool result."""

    session_id: str
    run_id: str
    spill_threshold: int = 2000
    call_id: str
    delivery: EventDelivery
    kind: str
    match: dict[str, Any] = Field(default_factory=dict)
    waited_seconds: float = 0.0


# ---- session state -------------------------------------------------------------------------------------


class EventWait(BaseModel):
    """One wait in progress."""

    subscription_id: str
    call_id: str
    kind: str
    match: dict[str, Any] = Field(default_factory=dict)
    started_at: datetime
    deadline: datetime
    arrived: EventDelivery | None = None


class EventWaitState(BaseModel):
    """Subscriptions this session waits on, and what it already received (carried by continue-as-new)."""

    waits: dict[str, EventWait] = Field(default_factory=dict)
    delivered_event_ids: list[str] = Field(default_factory=list)
    waits_started: int = 0
    events_received: int = 0
    timeouts: int = 0

    def remember(self, event_id: str) -> None:
        if event_id not in self.delivered_event_ids:
            self.delivered_event_ids.append(event_id)
            del self.delivered_event_ids[:-RECENT_DELIVERED]


# ---- pure rules ----------------------------------------------------------------------------------------


def valid_kind(kind: str) -> bool:
    return len(kind) <= 200 and _KIND_RE.match(kind) is not None


def kind_matches(prefix: str, kind: str) -> bool:
    """Prefix on whole dot-separated segments: ``github.check`` does not match ``github.check_suite``."""
    return kind == prefix or kind.startswith(prefix + ".")


def _candidates(node: Any, path: str) -> Iterator[Any]:
    """Every value ``path`` reaches in ``node`` (several when ``*`` fans out)."""
    if path == "":
        yield node
        return
    if isinstance(node, Mapping):
        if path in node:
            yield node[path]
        # Longest literal key first, so {"a.b": {"c": 1}} is reachable as "a.b.c".
        dots = [i for i, ch in enumerate(path) if ch == "."]
        for i in reversed(dots):
            head = path[:i]
            if head in node:
                yield from _candidates(node[head], path[i + 1 :])
        head, _, rest = path.partition(".")
        if head == "*" and "*" not in node:
            for value in node.values():
                yield from _candidates(value, rest)
    elif isinstance(node, list):
        head, _, rest = path.partition(".")
        if head == "*":
            for value in node:
                yield from _candidates(value, rest)
        elif re.fullmatch(r"-?\d+", head):
            index = int(head)
            if -len(node) <= index < len(node):
                yield from _candidates(node[index], rest)


def json_equal(actual: Any, expected: Any) -> bool:
    """JSON equality without coercion (bool is not a number; ``1 == 1.0`` as JSON numbers are)."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and actual is expected
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        return actual == expected
    if isinstance(expected, str) or expected is None:
        return type(actual) is type(expected) and actual == expected
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(actual) == len(expected)
            and all(json_equal(a, e) for a, e in zip(actual, expected, strict=True))
        )
    if isinstance(expected, Mapping):
        return (
            isinstance(actual, Mapping)
            and set(actual) == set(expected)
            and all(json_equal(actual[k], expected[k]) for k in expected)
        )
    return bool(actual == expected)


def _value_matches(actual: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        return isinstance(actual, Mapping) and payload_matches(actual, expected)
    return json_equal(actual, expected)


def payload_matches(payload: Mapping[str, Any], match: Mapping[str, Any] | None) -> bool:
    """Whether every path of ``match`` reaches a value equal to the expected one (see module docstring)."""
    if not match:
        return True
    return all(
        any(_value_matches(found, expected) for found in _candidates(payload, path)) for path, expected in match.items()
    )


def subscription_matches(sub: Subscription, kind: str, payload: Mapping[str, Any], event_id: str) -> bool:
    return (
        event_id not in sub.exclude_event_ids and kind_matches(sub.kind, kind) and payload_matches(payload, sub.match)
    )


# ---- the index key of a wait ---------------------------------------------------------------------------
#
# The ingress must find the waits an event matches among every open wait of its kind. Scanning them all
# costs N² row reads for a burst of N events to N waits. So a wait is stored with one key taken from its
# match, a (path, value) pair, and an event looks up the keys of its payload's own (path, value) pairs: the
# waits it can match are those with one of those keys, and those with no key (the scan that remains).
# ``payload_matches`` still decides; the key only narrows which rows are read, so it must never leave out a
# wait that matches (``tests/test_events_match_key.py`` checks that property on generated payloads).
#
# Only a path that reaches its value through objects alone is a key: every segment non-empty, none ``*``,
# none a list index. Such a path reaches, in any payload, exactly the values at the end of a chain of object
# keys that, joined with ".", spell the path (the literal dotted keys ``_candidates`` also tries are such
# chains), so the payload's keys are those chains to its scalar values.

# A payload with more scalar values than this is matched against every wait of its kind, as before.
MAX_PAYLOAD_KEYS = 2_000
_INDEX_SEGMENT_RE = re.compile(r"-?\d+")


def _scalar_text(value: Any) -> str | None:
    """The scalar as the key spells it, equal for values ``json_equal`` holds equal (``1`` and ``1.0``)."""
    if value is None:
        return "z"
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, int):
        return "n" + hex(value)  # hex: no limit on the digits (str() of a huge int raises)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        return "n" + (hex(int(value)) if value.is_integer() else repr(value))
    if isinstance(value, str):
        return "s" + value
    return None


def _key(path: str, value_text: str) -> str:
    raw = f"{path}\x00{value_text}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def _indexable_path(path: str) -> bool:
    return all(seg and seg != "*" and not _INDEX_SEGMENT_RE.fullmatch(seg) for seg in path.split("."))


def _match_pairs(match: Mapping[str, Any], prefix: str, depth: int) -> Iterator[tuple[str, Any]]:
    # A nested object is a nested match ({"pull_request": {"number": 420}} is "pull_request.number": 420).
    for path, expected in match.items():
        full = f"{prefix}.{path}" if prefix else str(path)
        if isinstance(expected, Mapping):
            if depth < MAX_JSON_DEPTH:
                yield from _match_pairs(expected, full, depth + 1)
        else:
            yield full, expected


def match_index_key(match: Mapping[str, Any] | None) -> str | None:
    """The key a wait is stored under, or None (a wait the ingress reads for every event of its kind).

    Of the match's (path, scalar) pairs on indexable paths, a number or a string before a boolean or null
    (they tell fewer events apart), then the longest path (``pull_request.number`` before ``action``).
    """
    best: tuple[int, int, str, str] | None = None
    for path, expected in _match_pairs(match or {}, "", 0):
        text = _scalar_text(expected)
        if text is None or not _indexable_path(path):
            continue
        rank = (0 if text[0] in "ns" else 1, -len(path), path, text)
        if best is None or rank < best:
            best = rank
    return None if best is None else _key(best[2], best[3])


def payload_index_keys(payload: Mapping[str, Any]) -> set[str] | None:
    """The keys of every wait this payload could match, or None when it holds more scalars than
    ``MAX_PAYLOAD_KEYS`` (then every wait of the kind is read)."""
    keys: set[str] = set()
    stack: list[tuple[str, Mapping[str, Any]]] = [("", payload)]
    while stack:
        prefix, node = stack.pop()
        for name, value in node.items():
            path = f"{prefix}.{name}" if prefix else str(name)
            if isinstance(value, Mapping):
                stack.append((path, value))
                continue
            text = _scalar_text(value)
            if text is None:
                continue  # a list (no key reaches into one) or a value no wait can equal by key
            keys.add(_key(path, text))
            if len(keys) > MAX_PAYLOAD_KEYS:
                return None
    return keys


def router_workflow_id(organisation: str, project: str, prefix: str = DEFAULT_ROUTER_PREFIX) -> str:
    """One router per organisation and project; both parts are quoted (``a/b`` + ``c`` != ``a`` + ``b/c``)."""
    return f"{prefix}/{quote(organisation, safe='')}/{quote(project, safe='')}"


def github_kind(event: str, payload: Mapping[str, Any]) -> str:
    """``X-GitHub-Event: check_suite`` + ``{"action": "completed"}`` -> ``github.check_suite.completed``."""
    kind = f"github.{event}"
    action = payload.get("action")
    if isinstance(action, str) and action:
        kind += f".{action}"
    return kind


def timeout_message(kind: str, seconds: float) -> str:
    return (
        f"No matching {kind} event arrived within {seconds:g} seconds (timed out). Do not assume it "
        "happened or failed: check the status directly (for example query the CI run, the pull request "
        "or the job's API) before deciding what to do next."
    )


def render_result(result: WaitForEventResult) -> str:
    return json.dumps(result.model_dump(mode="json", exclude_none=True), ensure_ascii=False)


def received_result(load: LoadEventInput, record: EventRecord | None) -> tuple[str, dict[str, Any]]:
    """The wait's result for the event it received, read from the store (``load_event``) or carried by the
    delivery (the session itself): the tool result's content and its data."""
    result = WaitForEventResult(
        status="received",
        kind=load.kind,
        match=load.match,
        waited_seconds=round(load.waited_seconds, 3),
        event=record,
        message=None if record else f"event {load.delivery.event_id} matched but is no longer in the store",
    )
    data = {"event_id": load.delivery.event_id, "event_kind": load.delivery.kind, "status": "received"}
    # clean_text: a carried event never passed the ingress's cleaning when a raw client signalled it, and a
    # lone surrogate in the content would fail the encoding of every later payload of the session.
    return clean_text(render_result(result)), data


WaitForEventResult.model_rebuild()

TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="wait_for_event",
        description=(
            "Wait for a platform event (a CI check finishing, a webhook arriving, an external job "
            "completing) instead of sleeping and polling. kind is matched as a prefix (e.g. "
            'github.check_suite); match lists payload fields that must be equal (e.g. {"pr": 420}; dotted '
            'paths such as "pull_request.number" reach nested fields). Returns the first matching event in '
            "your organisation and project as soon as it arrives; otherwise reports a timeout after "
            "timeout_seconds (default 900, at most 3300), and then you should check the status directly."
        ),
        args_model=WaitForEventArgs,
        result_model=WaitForEventResult,
        capability="events",
        runs_in="workflow",
        interrupts=True,
        summary_arg="kind",
    ),
]
