"""Web contracts: webSearch, webFetch (RTC); web_search, web_fetch, http_fetch, json_query (codai).

The tool list is in :mod:`.tools`, the settings section in :mod:`.config`: the package itself imports
nothing, so that loading the settings loads none of the tools' models.

One engine (:mod:`agent_tools._web`) behind every face. deep_research is a child workflow started from the
client API and the HTTP service (``POST /v1/research``), not a tool of the server-side agent loop: the
codai contract lists it for the client surfaces only ("no nested research").

The search and fetch faces are ``spill_exempt``: each has its own size control (``max_results``,
``max_chars``, webFetch's small-model extraction over 50,000 bytes) that the caller chose, and a pointer in
place of the page would defeat it. json_query results spill like any other tool's.
"""
