"""The workflow layer: deterministic orchestration only (the session loop and its capability parts, each
with its workflow-native tools, behind the session's port; the event router; deep research).

Nothing here does I/O: ruff's banned-api rule (pyproject) keeps httpx, sqlalchemy and the activity layer
out, and ``tests/test_architecture.py`` checks every module for clocks, randomness and I/O calls.
Implementation, not public API.
"""
