"""Search attributes every session carries, so the Temporal UI can list and filter the session tree."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from temporalio.common import SearchAttributeKey, SearchAttributePair, TypedSearchAttributes

AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
SESSION_ROOT_ID = SearchAttributeKey.for_keyword("SessionRootId")
SESSION_PARENT_ID = SearchAttributeKey.for_keyword("SessionParentId")
SESSION_STATE = SearchAttributeKey.for_keyword("SessionState")
DEPTH = SearchAttributeKey.for_int("Depth")
# What the session tree lists without asking each session (one visibility query on SessionRootId).
SESSION_TITLE = SearchAttributeKey.for_keyword("SessionTitle")
SESSION_UPDATED_AT = SearchAttributeKey.for_datetime("SessionUpdatedAt")

if TYPE_CHECKING:
    from temporalio.client import Client

ALL: tuple[SearchAttributeKey[Any], ...] = (
    AGENT_NAME,
    SESSION_ROOT_ID,
    SESSION_PARENT_ID,
    SESSION_STATE,
    DEPTH,
    SESSION_TITLE,
    SESSION_UPDATED_AT,
)


def at_start(
    *, agent: str, root_id: str, parent_id: str | None, depth: int, title: str | None = None
) -> TypedSearchAttributes:
    """The attributes a session starts with (client or parent session), so the tree is listable at once."""
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(AGENT_NAME, agent),
        SearchAttributePair(SESSION_ROOT_ID, root_id),
        SearchAttributePair(DEPTH, depth),
        SearchAttributePair(SESSION_STATE, "starting"),
    ]
    if title:
        pairs.append(SearchAttributePair(SESSION_TITLE, title_value(title)))
    if parent_id:
        pairs.append(SearchAttributePair(SESSION_PARENT_ID, parent_id))
    return TypedSearchAttributes(pairs)


def quote(value: str) -> str:
    """A string literal for a visibility query (``SessionRootId = '...'``)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def title_value(title: str) -> str:
    """A title as a Keyword value: keywords are indexed whole, and long ones cost the visibility store."""
    return title[:200]


def cli_type(key: SearchAttributeKey[Any]) -> str:
    """The type's name as the ``temporal`` CLI spells it (``Keyword``, ``Int``, ``Datetime``)."""
    kinds = {"KEYWORD": "Keyword", "INT": "Int", "DATETIME": "Datetime"}
    return kinds[key.indexed_value_type.name.removeprefix("INDEXED_VALUE_TYPE_")]


def dev_server_flags() -> list[str]:
    """``--search-attribute`` flags registering them on ``temporal server start-dev``."""
    flags: list[str] = []
    for key in ALL:
        flags += ["--search-attribute", f"{key.name}={cli_type(key)}"]
    return flags


def create_commands(namespace: str, keys: Sequence[SearchAttributeKey[Any]] = ALL) -> str:
    """The ``temporal`` CLI lines that create ``keys`` on ``namespace``."""
    return " && ".join(
        f"temporal operator search-attribute create --namespace {namespace} --name {key.name} --type {cli_type(key)}"
        for key in keys
    )


def is_missing_attribute_error(exc: BaseException) -> bool:
    """Whether a start or an upsert failed because the namespace lacks one of its search attributes."""
    message = getattr(exc, "message", "") or str(exc)
    return "no mapping defined for search attribute" in message


async def ensure_registered(client: Client) -> list[str]:
    """Register the session search attributes the client's namespace lacks; returns the names added.

    Sessions set them at start and on every state change, and a server without them fails every one of
    those workflow tasks. Creating them needs the operator service (a dev server or a self-hosted cluster
    allows it; Temporal Cloud does not).

    Raises:
        ConfigurationError: some are missing and cannot be created here; the message has the commands.
    """
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest
    from temporalio.service import RPCError, RPCStatusCode

    from agent_tools._errors import ConfigurationError

    namespace = client.namespace
    try:
        try:
            listed = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=namespace)
            )
        except RPCError as exc:
            if exc.status != RPCStatusCode.UNIMPLEMENTED:
                raise
            # The time-skipping test server cannot list them, only add them: add all, and take "already
            # exists" as the answer.
            missing = list(ALL)
        else:
            present = set(listed.custom_attributes)
            missing = [key for key in ALL if key.name not in present]
        if not missing:
            return []
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={k.name: IndexedValueType.ValueType(k.indexed_value_type) for k in missing},
            )
        )
    except RPCError as exc:
        if exc.status == RPCStatusCode.ALREADY_EXISTS:
            return []
        names = ", ".join(key.name for key in ALL)
        raise ConfigurationError(
            f"namespace {namespace!r} lacks the session search attributes ({names}) and they cannot be created "
            f"from here ({exc.message}); create them with: {create_commands(namespace)} "
            "(or set AGENT_TOOLS_SEARCH_ATTRIBUTES=false)"
        ) from exc
    return [key.name for key in missing]
