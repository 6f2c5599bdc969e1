"""The index key of a wait (``match_index_key``) and the keys of a payload (``payload_index_keys``): the key
only narrows which waits the ingress reads, so a wait whose match holds on a payload must always be found
under one of the payload's keys. Checked on generated payloads and matches (Hypothesis), where the hard
cases live: literal dotted keys, nested matches, ``1`` against ``1.0``, ``true`` against ``1``, lists, NUL
and lone surrogates."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_tools.contracts._events.contract import (
    MAX_PAYLOAD_KEYS,
    match_index_key,
    payload_index_keys,
    payload_matches,
)

# Names that exercise the path rules: dotted literal keys, empty, "*", list indices, NUL, a lone surrogate.
PLAIN = st.sampled_from(["a", "b", "n"])
NAMES = st.one_of(
    PLAIN,
    PLAIN,
    PLAIN,
    st.sampled_from(["a.b", "b.a", "", "*", "0", "-1", "x\x00", "\ud800", "n.", ".n"]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.sampled_from([1.0, 0.0, -0.0, 0.5, 2.0**60, 10**300, 1e300, 10**4000]),
    st.sampled_from(["", "1", "a", "\x00", "\ud800", "a.b"]),
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=4),
    max_leaves=24,
)
PAYLOADS = st.dictionaries(NAMES, JSON, min_size=1, max_size=5)


def _walk(data: st.DataObject, node: Any) -> tuple[list[str], Any]:
    """A random way down ``node``: the segments taken and the value reached (an index or ``*`` in a list)."""
    segments: list[str] = []
    while not segments or data.draw(st.integers(0, 3)):  # mostly on to a scalar, where a key can be
        if isinstance(node, dict) and node:
            name = data.draw(st.sampled_from(sorted(node)))
            segments.append(name)
            node = node[name]
        elif isinstance(node, list) and node:
            i = data.draw(st.integers(0, len(node) - 1))
            segments.append(data.draw(st.sampled_from([str(i), str(i - len(node)), "*"])))
            node = node[i]
        else:
            break
    return segments, node


def _match_from(data: st.DataObject, payload: dict[str, Any]) -> dict[str, Any]:
    """A match built from the payload's own paths and values (so it often holds), flat or nested."""
    match: dict[str, Any] = {}
    for _ in range(data.draw(st.integers(1, 3))):
        segments, value = _walk(data, payload)
        if not segments:
            continue
        if data.draw(st.booleans()):
            value = data.draw(SCALARS)  # a value the payload may not hold
        cut = data.draw(st.integers(1, len(segments)))
        head, tail = ".".join(segments[:cut]), segments[cut:]
        if tail and data.draw(st.booleans()):  # type: ignore[arg-type]  # mypy types the draw by ``tail``
            match[head] = {".".join(tail): value}  # a nested match
        else:
            match[".".join(segments)] = value
    return match


def assert_found(payload: dict[str, Any], match: dict[str, Any]) -> None:
    if not payload_matches(payload, match):
        return
    key = match_index_key(match)
    keys = payload_index_keys(payload)
    assert key is None or keys is None or key in keys, (payload, match)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=PAYLOADS, data=st.data())
def test_a_wait_whose_match_holds_is_always_under_one_of_the_payloads_keys(
    payload: dict[str, Any], data: st.DataObject
) -> None:
    assert_found(payload, _match_from(data, payload))
    assert_found(payload, data.draw(st.dictionaries(NAMES, JSON, max_size=3)))


@given(payload=PAYLOADS)
@example(payload={"a.b": {"c": 1}, "a": {"b.c": 2, "b": {"c": 3}}})
def test_every_scalar_reached_through_objects_has_a_key(payload: dict[str, Any]) -> None:
    # The converse direction, for the paths a key is made of: each one the payload holds is found.
    def leaves(node: dict[str, Any], prefix: str) -> list[tuple[str, Any]]:
        out: list[tuple[str, Any]] = []
        for name, value in node.items():
            path = f"{prefix}.{name}" if prefix else name
            out += leaves(value, path) if isinstance(value, dict) else [(path, value)]
        return out

    keys = payload_index_keys(payload)
    assert keys is not None
    for path, value in leaves(payload, ""):
        key = match_index_key({path: value})
        if key is not None:
            assert key in keys, (path, value)


def test_the_key_picks_the_selective_pair_and_spells_equal_values_alike() -> None:
    # A number or a string before a boolean or null, then the longest path.
    assert match_index_key({"action": "completed", "pull_request.number": 420, "merged": True}) == match_index_key(
        {"pull_request.number": 420}
    )
    assert match_index_key({"pull_request": {"number": 420}}) == match_index_key({"pull_request.number": 420})
    assert match_index_key({"n": 1}) == match_index_key({"n": 1.0})
    assert match_index_key({"n": True}) != match_index_key({"n": 1})
    assert match_index_key({"n": "1"}) != match_index_key({"n": 1})
    assert match_index_key({"n": None}) is not None
    # Paths that may reach into a list, or an empty segment, give no key: the wait is read for every event.
    for path in ("commits.0.id", "commits.-1.id", "check_suite.pull_requests.*.number", "a..b", "", "a."):
        assert match_index_key({path: 1}) is None, path
    assert match_index_key({"n": [1, 2]}) is None
    assert match_index_key({}) is None and match_index_key(None) is None
    # Keys are fixed-width whatever the match holds.
    huge = match_index_key({"x" * 1_000_000: "y\x00\ud800" * 100_000, "n": 10**5000})
    assert huge is not None and len(huge) == 32


def test_a_payload_with_too_many_scalars_is_matched_against_every_wait() -> None:
    wide = {f"k{i}": i for i in range(MAX_PAYLOAD_KEYS + 1)}
    assert payload_index_keys(wide) is None
    narrow = payload_index_keys({f"k{i}": i for i in range(MAX_PAYLOAD_KEYS)})
    assert narrow is not None and len(narrow) == MAX_PAYLOAD_KEYS
    # A list's scalars are not counted (no key reaches into a list).
    assert payload_index_keys({"ids": list(range(100_000))}) == set()
