"""The installed distribution's version: what workers name their build by and the HTTP API states."""

from __future__ import annotations

DISTRIBUTION = "durable-agent-tools"


def package_version() -> str:
    """The version of the installed distribution; ``dev`` in a checkout that was never installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "dev"
