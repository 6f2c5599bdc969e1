"""Web engine: search engines with failover, the guarded fetcher, extraction and the SQL cache."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent_tools.activities.services import Services
    from agent_tools.activities.web.service import WebService

__all__ = ["get_web"]


def get_web(services: Services) -> WebService:
    """The worker's web engine, created on first use and closed with the services."""
    from agent_tools.activities.web.service import WebService

    engine = services.engines.get("web")
    if engine is None:
        engine = WebService(services.settings.web, services.store)
        services.engines["web"] = engine
    assert isinstance(engine, WebService)
    return engine
