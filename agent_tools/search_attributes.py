"""Search attributes every session carries, so the Temporal UI can list and filter the session tree."""

from __future__ import annotations

from typing import Any

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
SESSION_ROOT_ID = SearchAttributeKey.for_keyword("SessionRootId")
SESSION_PARENT_ID = SearchAttributeKey.for_keyword("SessionParentId")
SESSION_STATE = SearchAttributeKey.for_keyword("SessionState")
DEPTH = SearchAttributeKey.for_int("Depth")

ALL = (AGENT_NAME, SESSION_ROOT_ID, SESSION_PARENT_ID, SESSION_STATE, DEPTH)


def at_start(*, agent: str, root_id: str, parent_id: str | None, depth: int) -> TypedSearchAttributes:
    """The attributes a session starts with (client or parent session), so the tree is listable at once."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(AGENT_NAME, agent),
        SearchAttributePair(SESSION_ROOT_ID, root_id),
        SearchAttributePair(DEPTH, depth),
        SearchAttributePair(SESSION_STATE, "starting"),
    ]
    if parent_id:
        pairs.append(SearchAttributePair(SESSION_PARENT_ID, parent_id))
    return TypedSearchAttributes(pairs)


def dev_server_flags() -> list[str]:
    """``--search-attribute`` flags registering them on ``temporal server start-dev``."""
    kinds = {"KEYWORD": "Keyword", "INT": "Int"}
    flags: list[str] = []
    for key in ALL:
        flags += [
            "--search-attribute",
            f"{key.name}={kinds[key.indexed_value_type.name.removeprefix('INDEXED_VALUE_TYPE_')]}",
        ]
    return flags
