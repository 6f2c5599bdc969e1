"""Pure web code: SSRF rules, URL helpers, the face models, rendering, text windows and json_query.

No I/O here: the engine that searches and fetches is :mod:`agent_tools.activities.web`.
"""

from __future__ import annotations

from agent_tools.web.jsonquery import JsonQueryError, json_query
from agent_tools.web.ssrf import UrlRefused, check_url

__all__ = ["JsonQueryError", "UrlRefused", "check_url", "json_query"]
