"""Large tool results: when to save them and the pointer the model gets instead. Pure."""

from __future__ import annotations

import json
import re
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


# An image as a data URL, inside any text: a plain string, a JSON value, JSON text whose slashes are escaped.
_DATA_IMAGE = re.compile(
    r"data:image(?:/|\\/)([A-Za-z0-9.+-]{1,40})((?:;[A-Za-z0-9._=-]{1,60}){0,5});base64,((?:[A-Za-z0-9+=]|/|\\/)+)"
)


def describe_data_images(text: str) -> str:
    """Each ``data:image/...;base64,...`` URL in ``text`` replaced by the line an image's bytes get.

    FYAI: "Images and binary results are never saved" as artifacts. An image in a data URL is an image,
    whatever holds it; its base64 is no text the model or a reader could use. The rest of the text stays.
    """
    if "base64," not in text:
        return text

    def line(match: re.Match[str]) -> str:
        payload = match.group(3).replace("\\/", "/")
        size = len(payload) * 3 // 4 - (len(payload) - len(payload.rstrip("=")))
        return f"[image (image/{match.group(1)}), {size:,} bytes: not shown to the model]"

    return _DATA_IMAGE.sub(line, text)


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
