"""What this deployment can serve: tools its configuration leaves without an engine are not offered.

RTC registers webSearch/webFetch "only when the server has search/fetch configured" (and, here, only while
a configured engine answers the worker's probe); codai offers
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


def unavailable_tools(settings: Settings, model: str, *, engine_reachable: bool = True) -> set[str]:
    """Names the deployment cannot serve to a session running on ``model``.

    ``engine_reachable``: the worker's last probe found a configured search engine answering
    (:class:`agent_tools._web.probe.SearchProbe`). Search is offered only while one is configured and
    reachable; webFetch, where engines are configured, only while one of them is reachable too (a worker that
    reaches no engine is offline), and on ``fetch_enabled`` alone where the deployment configures none.
    """
    out: set[str] = set()
    configured = search_configured(settings.web)
    searching = configured and engine_reachable
    if not searching:
        out.update(SEARCH_TOOLS)
    if not settings.web.fetch_enabled or (configured and not engine_reachable):
        out.update(FETCH_TOOLS)
    if not (searching and settings.web.fetch_enabled):
        # codai lists web_fetch under the same condition as web_search ("web search configured").
        out.update(CODAI_FETCH_TOOLS)
    if len(set(allowed_models(settings, model).values())) < 2:
        out.add("delegate_to_model")
    return out
