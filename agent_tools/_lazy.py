"""Lazy public names for a package's ``__init__``: each name's module is imported on first use.

A package face lists its names in ``__all__`` and a table of where each is defined; importing the package
then loads none of those modules (a workflow importing one contract loads only that one). The table's
imports are repeated under ``if TYPE_CHECKING:`` for type checkers and the API reference.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, table: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for ``package`` whose names are ``table`` (name: module)."""

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(table)

    return __getattr__, __dir__
