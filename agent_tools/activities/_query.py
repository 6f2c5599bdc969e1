"""JSON queries (codai's json_query, FYAI's query_tool_result) as activities run them: off the event loop, with
a time limit. The language is in :mod:`agent_tools.contracts._query`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from agent_tools.contracts._query import QUERY_TIMEOUT_SECONDS, JsonQueryError, compile_query, run_query


async def bounded_query(document: Callable[[], Any], expression: str) -> Any:
    """Evaluate ``expression`` over ``document()`` in a worker thread (heartbeats go on meanwhile).

    ``document`` is a callable so that parsing a large document happens in the thread too.

    Raises:
        JsonQueryError: the query does not parse, does not fit the document, or ran past the limit.
    """
    compile_query(expression)  # a malformed query is an error at once, without a thread
    try:
        return await asyncio.wait_for(
            asyncio.to_thread(lambda: run_query(document(), expression)), QUERY_TIMEOUT_SECONDS
        )
    except TimeoutError:
        # The thread finishes on its own: a JMESPath expression cannot loop, its cost is bounded by the document.
        raise JsonQueryError(
            f"the query ran past {QUERY_TIMEOUT_SECONDS:g} s; narrow it or query a smaller document"
        ) from None
