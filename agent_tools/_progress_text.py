"""How sessions and their progress read, in the Temporal UI and the terminal alike: session summaries and
details, step labels, readable previews of tool results. Pure: the workflow, the client and the CLI share
it."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["model_label", "preview", "session_details", "session_summary", "shorten", "step_summary"]

# Tool results longer than this are previewed as text without trying to read them as JSON.
_JSON_PREVIEW_LIMIT = 20_000


def model_label(spec: str) -> str:
    """A model spec as a person reads it: ``scripted:/long/path/demo_script.yaml`` -> ``scripted:demo_script.yaml``."""
    prefix, sep, rest = spec.partition(":")
    if prefix == "scripted" and sep:
        return f"scripted:{rest.replace(chr(92), '/').rsplit('/', 1)[-1]}"
    return spec


def step_summary(step: int, spec: str) -> str:
    """The model step's activity summary: ``model step 3 · gpt-4.1-mini``."""
    label = model_label(spec)
    model = label if label.startswith("scripted:") else (label.partition(":")[2] or label)
    return f"model step {step} · {model}"


def shorten(text: str, limit: int) -> str:
    """``text`` on one line, cut at a word boundary with an ellipsis when longer than ``limit``."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: max(1, limit - 1)]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:") + "…"


def preview(content: str, limit: int = 160) -> str:
    """A tool result in one readable line: JSON as its keys and sizes, text as its first words."""
    text = content.strip()
    if text[:1] in ("{", "[") and len(text) <= _JSON_PREVIEW_LIMIT:
        try:
            value = json.loads(text)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, (dict, list)):
            text = _describe(value)
    return shorten(text, limit)


def _scalar(value: Any, limit: int = 60) -> str:
    if isinstance(value, str):
        return shorten(value, limit)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, list):
        head = f" (first: {_scalar(value[0], 40)})" if value and not isinstance(value[0], (dict, list)) else ""
        if value and isinstance(value[0], dict):
            title = next((value[0][k] for k in ("title", "name", "content", "url") if k in value[0]), None)
            head = f" (first: {shorten(str(title), 40)})" if title is not None else ""
        return f"{len(value)} item{'s' if len(value) != 1 else ''}{head}"
    if isinstance(value, dict):
        return "{" + ", ".join(list(value)[:4]) + (", …" if len(value) > 4 else "") + "}"
    return shorten(str(value), limit)


def _describe(value: dict[str, Any] | list[Any]) -> str:
    if isinstance(value, list):
        return _scalar(value)
    return "; ".join(f"{k}: {_scalar(v)}" for k, v in list(value.items())[:6])


def session_summary(agent: str, title: str | None, prompt: str | None) -> str:
    """The one line the Temporal UI's list and page header show for a session: ``assistant: Plan a trip``."""
    return shorten(f"{agent}: {title or prompt or '(waits for a message)'}", 200)


def session_details(
    *,
    agent: str,
    title: str | None,
    prompt: str | None,
    model: str | None,
    scope: str,
    parent_id: str | None = None,
    root_id: str | None = None,
    depth: int = 0,
) -> str:
    """The session's static details (markdown) for the top of its Temporal UI page: what it was started
    with. The current details below them say what it does now."""
    lines = [f"**{shorten(title or prompt or agent, 120)}**"]
    lines.append(f"agent `{agent}` · model `{model_label(model) if model else 'the agent default'}` · {scope}")
    if parent_id:
        lines.append(f"sub-agent of `{parent_id}` · root `{root_id or parent_id}` · depth {depth}")
    if prompt:
        lines.append("> " + shorten(prompt, 600))
    return "\n\n".join(lines)
