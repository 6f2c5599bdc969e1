"""Contracts of the saved-result readers: FYAI's read/search/query_tool_result and codai's read_artifact.

A tool result longer than the session's spill threshold is saved as an artifact by the activity that
produced it (``agent_tools/activities/_tool_runner.py``); the model gets a pointer with a ``ref``. These tools read the
artifact back piece by piece. Every reader is ``spill_exempt``: its answer is already bounded, and saving
a reader's page again would send the model round in circles. A ref is valid for the current workflow run
only; an older ref tells the model to call the original tool again.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, Field

from agent_tools._boundaries import OFFSET_MAX
from agent_tools._catalog.spec import CODAI_EXECUTED, ToolSpec

_BARE_REF = re.compile(r"[\w.\-]+")
_REF_IN_TEXT = re.compile(r"""ref["']?\s*[=:]\s*["']?([\w.\-]+)""")


def _lenient_ref(value: Any) -> Any:
    """Accept the ref as models tend to paste it: bare, ``ref=res_...``, or the whole pointer or reader header.

    Only the first ``ref=``/``"ref":`` token is taken, so nothing else in the pasted text can steer the read.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if _BARE_REF.fullmatch(text):
        return text
    m = _REF_IN_TEXT.search(text)
    return m.group(1) if m else text


_TURN_SUFFIX = re.compile(r"_t(\d{1,9})$")


def ref_turn(ref: str) -> int | None:
    """The turn a saved result's ref was made in (``res_<id>_t<turn>``), or None for a ref without one."""
    found = _TURN_SUFFIX.search(ref.strip())
    return int(found.group(1)) if found else None


RefField = Annotated[str, BeforeValidator(_lenient_ref)]
_REF = Field(min_length=1, max_length=100, description="The ref id from the saved-result pointer (res_...)")


class ReadToolResultArgs(BaseModel):
    ref: RefField = _REF
    offset: int = Field(default=0, ge=0, le=OFFSET_MAX, description="First line to read (0-based)")
    limit: int = Field(default=200, ge=1, le=2000, description="Number of lines, at most 2,000")


class SearchToolResultArgs(BaseModel):
    ref: RefField = _REF
    pattern: str = Field(min_length=1, max_length=1000, description="Python regular expression, e.g. (?i)error")
    max_matches: int = Field(default=50, ge=1, le=500, description="Maximum matches to return, at most 500")


class SearchMatch(BaseModel):
    offset: int = Field(description="Line of the match; pass it to read_tool_result as offset")
    match: str
    before: str = Field(description="Up to 120 characters before the match")
    after: str = Field(description="Up to 120 characters after the match")


class SearchToolResultResult(BaseModel):
    ref: str
    pattern: str
    total_matches: int
    total_is_lower_bound: bool = Field(description="True when counting stopped early (time or count cap)")
    total_lines: int
    matches: list[SearchMatch]


class QueryToolResultArgs(BaseModel):
    ref: RefField = _REF
    path: str = Field(
        default=".",
        max_length=500,
        description="Path into the JSON: '.', '[0:20]', '.results[0].name', '.items[].id'",
    )
    max_chars: int = Field(default=4000, ge=200, le=20_000, description="Cap on the returned JSON text")


class ReadArtifactArgs(BaseModel):
    ref: RefField = _REF
    offset: int = Field(default=0, ge=0, le=OFFSET_MAX, description="Character offset to start reading at")
    max_chars: int = Field(default=8000, ge=200, le=40_000, description="Characters to return, 200-40,000")


class ReadArtifactResult(BaseModel):
    ref: str
    tool: str = Field(description="The tool whose result this is")
    total_chars: int
    offset: int
    content: str
    next_offset: int | None = Field(description="Where to continue; null at the end")
    is_json: bool


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="read_tool_result",
        read_only=True,
        description=(
            "Read lines of a large tool result that was saved instead of returned in full. Give the ref from "
            "the pointer, a start line (offset) and how many lines (limit, at most 2,000). JSON results are "
            "shown pretty-printed."
        ),
        args_model=ReadToolResultArgs,
        capability="results",
        automatic=True,
        spill_exempt=True,
        summary_arg="ref",
    ),
    ToolSpec(
        name="search_tool_result",
        read_only=True,
        description=(
            "Search a saved tool result with a Python regular expression. Returns up to max_matches matches "
            "(default 50, at most 500), each with 120 characters of context either side and the line offset "
            "to pass to read_tool_result."
        ),
        args_model=SearchToolResultArgs,
        result_model=SearchToolResultResult,
        capability="results",
        automatic=True,
        spill_exempt=True,
        summary_arg="pattern",
    ),
    ToolSpec(
        name="query_tool_result",
        read_only=True,
        description=(
            "Navigate a saved JSON tool result by path, e.g. '.', '[0:20]', '.results[0].name' or "
            "'.items[].id'. Returns the JSON at that path, cut to max_chars (default 4,000; 200-20,000)."
        ),
        args_model=QueryToolResultArgs,
        capability="results",
        automatic=True,
        spill_exempt=True,
        summary_arg="path",
    ),
    ToolSpec(
        name="read_artifact",
        read_only=True,
        level=CODAI_EXECUTED,
        description=(
            "Read back a large tool result that was spilled to storage instead of inlined: a window of "
            "max_chars characters from offset; continue with next_offset."
        ),
        args_model=ReadArtifactArgs,
        result_model=ReadArtifactResult,
        capability="results",
        spill_exempt=True,
        summary_arg="ref",
    ),
]
