"""``memory.vector_cache_mb`` (each worker's byte budget for cached vectors) from code or the environment:
anything that is not a size in range is refused when the settings are read, so no worker starts with a
budget it cannot hold or a negative one."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from agent_tools._settings import Settings
from agent_tools.contracts._memory.settings import MemoryPolicy

HOSTILE = [-1, 10**40, "lots", "256\x00", "\ud800", 1.5, None, [256], {"mb": 1}, "9" * 5000]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_vector_cache_size_that_is_not_one_is_refused(value: Any) -> None:
    with pytest.raises(ValidationError):
        MemoryPolicy(vector_cache_mb=value)


@pytest.mark.parametrize("value", ["-1", "1e40", "lots", "[256]", "9" * 5000, "{" * 10_000])
def test_from_the_environment_too(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_TOOLS_MEMORY__VECTOR_CACHE_MB", value)
    with pytest.raises(ValidationError):
        Settings(agents_file=None)


def test_the_default_and_a_valid_size(monkeypatch: pytest.MonkeyPatch) -> None:
    assert MemoryPolicy().vector_cache_mb * 2**20 == 268_435_456
    monkeypatch.setenv("AGENT_TOOLS_MEMORY__VECTOR_CACHE_MB", "64")
    assert Settings(agents_file=None).memory.vector_cache_mb == 64
