"""The activity layer: every side effect (model providers, tools that touch the world, stores, the
sandbox, MCP), one module (or package) per capability. Each activity is a thin shell over a plain async
function that tests call directly. Implementation, not public API.
"""
