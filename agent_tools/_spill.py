"""Large tool results: when to save them and the pointer the model gets instead. Pure."""

from __future__ import annotations

import json
from typing import Any

PREVIEW_CHARS = 600
NO_READER_NOTE = (
    "The full result was saved but cannot be opened here (no result reader is available); work with the "
    "preview below, or call the tool again with narrower arguments."
)


def json_structure_hint(text: str, *, max_keys: int = 12) -> str | None:
    """A one-line shape of a JSON document (``object with keys: a, b`` / ``array of 120 objects``)."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return _shape(data, max_keys)


def _shape(data: Any, max_keys: int) -> str:
    if isinstance(data, dict):
        keys = list(data)
        shown = ", ".join(keys[:max_keys]) + (f", ... ({len(keys)} keys)" if len(keys) > max_keys else "")
        return f"object with keys: {shown}"
    if isinstance(data, list):
        if not data:
            return "empty array"
        kinds = {type(x).__name__ for x in data[:50]}
        inner = _shape(data[0], max_keys) if isinstance(data[0], dict | list) else next(iter(kinds))
        return f"array of {len(data)} items; first: {inner}"
    return type(data).__name__


def should_spill(content: str, threshold: int, *, exempt: bool) -> bool:
    return not exempt and len(content) > threshold


def spill_pointer(*, ref: str, content: str, json_hint: str | None, readers: tuple[str, ...]) -> str:
    """The short text the model sees in place of a saved result."""
    lines = [
        f"[Tool result saved: {len(content):,} characters, {content.count(chr(10)) + 1:,} lines; ref={ref}]",
    ]
    if json_hint:
        lines.append(f"JSON structure: {json_hint}")
    if readers:
        lines.append("Read it with: " + ", ".join(f'{r}(ref="{ref}", ...)' for r in readers))
    else:
        # FYAI: with the readers switched off, results are still saved "but agents can no longer open them":
        # naming a reader the agent does not have would only cost it a failed call.
        lines.append(NO_READER_NOTE)
    lines.append(f"First {PREVIEW_CHARS} characters:")
    lines.append(content[:PREVIEW_CHARS])
    return "\n".join(lines)
