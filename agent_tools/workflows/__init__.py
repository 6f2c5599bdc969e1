"""Deterministic orchestration only: the session loop and the workflow-native tools.

Nothing here does I/O; ruff's banned-api rule (pyproject) keeps httpx and sqlalchemy out.
"""
