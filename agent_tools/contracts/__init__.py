"""The pure layer: tool contracts and their rules, one module (or package) per capability.

Each capability module declares the pydantic argument/result models of its faces, a module-level ``TOOLS``
list of :class:`agent_tools.catalog.ToolSpec`, and the state model the session keeps for it; a package
(``web``, ``memory``, ``results``, ``events``, ``mcp``) adds its pure helpers beside them. No I/O, no
temporalio: the workflow layer imports these modules, and ``tests/test_architecture.py`` checks it.

Implementation, not public API: names here may change between releases (the public API is
``agent_tools.__all__``).
"""
