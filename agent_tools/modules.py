"""Optional capability modules: the registries list modules by name and take those that exist."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from types import ModuleType


def present_modules(names: Iterable[str]) -> list[ModuleType]:
    """Import each named module that exists, in order.

    A module that is absent is skipped (a capability not installed in this tree); a module that exists but
    fails to import raises, so a broken capability is never silently dropped.
    """
    found: list[ModuleType] = []
    for name in names:
        try:
            found.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return found
