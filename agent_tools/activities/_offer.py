"""What this deployment can serve: tools its configuration leaves without an engine are not offered.

RTC registers webSearch/webFetch "only when the server has search/fetch configured"; codai offers
web_search/web_fetch when "web search is configured on the gateway" and delegate_to_model "when ≥ 2 models
are allowed". Offering such a tool anyway only teaches the model a tool that answers ``search_unavailable``.
"""

from __future__ import annotations

from agent_tools._settings import Settings
from agent_tools._web.engines import search_configured
from agent_tools.activities._delegation import allowed_models

SEARCH_TOOLS = ("webSearch", "web_search")
FETCH_TOOLS = ("webFetch",)
CODAI_FETCH_TOOLS = ("web_fetch",)


def unavailable_tools(settings: Settings, model: str) -> set[str]:
    """Names the deployment cannot serve to a session running on ``model``."""
    out: set[str] = set()
    searching = search_configured(settings.web)
    if not searching:
        out.update(SEARCH_TOOLS)
    if not settings.web.fetch_enabled:
        out.update(FETCH_TOOLS)
    if not (searching and settings.web.fetch_enabled):
        # codai lists web_fetch under the same condition as web_search ("web search configured").
        out.update(CODAI_FETCH_TOOLS)
    if len(set(allowed_models(settings, model).values())) < 2:
        out.add("delegate_to_model")
    return out
