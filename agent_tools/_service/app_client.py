"""The service's one client of Temporal and its one store, which every router shares.

The client is made on first use (at start-up when served), from what the app state holds (``agent_client``,
an AgentToolsClient, or ``temporal``, a Temporal client; tests inject them) or by connecting with the
settings. The store (one engine and pool for the ingress, the web tools' cache and the transcripts) opens on
first use; a client the app makes reads through it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from fastapi import HTTPException

from agent_tools._errors import ConfigurationError
from agent_tools._settings import Settings

if TYPE_CHECKING:
    from agent_tools._client import AgentToolsClient
    from agent_tools._store.db import SharedStore

__all__ = ["TEMPORAL_AWAY", "app_client", "app_store", "close_app_client"]

TEMPORAL_AWAY = "the service cannot reach Temporal now; try again shortly"

_log = logging.getLogger(__name__)


async def app_client(state: Any, settings: Settings) -> AgentToolsClient:
    """The app's client, connected once however many requests ask together; 503 while Temporal cannot be
    reached (the log says where it was looked for), each later request trying again."""
    client: AgentToolsClient | None = getattr(state, "agent_client", None)
    if client is not None:
        return client
    lock: asyncio.Lock | None = getattr(state, "agent_client_lock", None)
    if lock is None:
        lock = state.agent_client_lock = asyncio.Lock()
    async with lock:
        client = getattr(state, "agent_client", None)
        if client is None:
            from agent_tools._client import AgentToolsClient

            temporal = getattr(state, "temporal", None)
            store = app_store(state, settings)
            try:
                client = (
                    AgentToolsClient(temporal, settings, store=store)
                    if temporal is not None
                    else await AgentToolsClient.connect(
                        settings, runtime=getattr(state, "metrics_runtime", None), store=store
                    )
                )
            except ConfigurationError as exc:
                _log.warning("%s", exc)
                raise HTTPException(503, TEMPORAL_AWAY) from None
            state.agent_client = client
            state.agent_client_owned = temporal is None  # the app closes what it opened
    return client


def app_store(state: Any, settings: Settings) -> SharedStore:
    """The app's store at ``settings.database_url`` (opened at its first ``get()``)."""
    store: SharedStore | None = getattr(state, "shared_store", None)
    if store is None:
        from agent_tools._store.db import SharedStore

        store = state.shared_store = SharedStore(settings.database_url)
    return store


async def close_app_client(state: Any) -> None:
    """At shutdown: close the client's web engine when the app made the client, and the app's store."""
    if getattr(state, "agent_client_owned", False):
        await state.agent_client.close()
        state.agent_client_owned = False
    store: SharedStore | None = getattr(state, "shared_store", None)
    if store is not None:
        await store.close()
