"""Tool contracts, one pure module per capability.

Each module declares the pydantic argument/result models of its faces, a module-level ``TOOLS`` list of
:class:`agent_tools.catalog.ToolSpec`, and the state model the session keeps for it. No I/O, no temporalio:
workflows import these modules.
"""
