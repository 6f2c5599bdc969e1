"""Where data enters: the limits, the normalisation, and the one way a refusal is worded. Pure.

Everything that enters from outside (a model's output, a client's start, signal or update, an HTTP body,
a value bound for the store) is normalised or refused here, where it enters, never deep inside:

* JSON nesting, string and collection sizes are checked against limits well below what Temporal and the
  decoders accept, so nothing reaches a workflow task that it cannot decode or that exceeds a payload;
* NUL bytes and lone surrogates become U+FFFD (:func:`clean_text`), so no store and no encoder refuses a
  value later;
* every pydantic refusal reads the same: ``field.path: message; other.field: message``.

docs/limits.md lists every limit and where it applies.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from agent_tools._errors import InvalidInput
from agent_tools._messages import Message, ToolCall


def describe_validation_error(
    error: ValidationError | Iterable[Mapping[str, Any]],
    *,
    whole: str = "(arguments)",
    skip: Iterable[str] = (),
    messages: Mapping[str, str] | None = None,
) -> str:
    """The problems of a validation error as one line.

    Args:
        error: A pydantic error, or its ``errors()`` list (FastAPI hands those over).
        whole: What to call the input itself when a problem has no field path.
        skip: Path parts to leave out (FastAPI prefixes body fields with ``body``).
        messages: Wording that replaces pydantic's for some error types (``{"string_too_long": ...}``);
            ``{loc}`` in it is the field path.
    """
    errors = error.errors() if isinstance(error, ValidationError) else error
    skipped = set(skip)
    problems = []
    for e in errors:
        loc = ".".join(str(p) for p in e.get("loc", ()) if p not in skipped) or whole
        custom = (messages or {}).get(str(e.get("type")))
        problems.append(custom.format(loc=loc) if custom else f"{loc}: {e.get('msg')}")
    return "; ".join(problems)


# ---- limits, chosen well below what Temporal (2 MB per payload) and the JSON decoders accept -------------

MAX_JSON_DEPTH = 32
"""Nesting any JSON value may have where it enters: pydantic-core's decoder stops at about 200 levels, and a
workflow that cannot decode an activity's result fails its task for ever."""
MAX_TOOL_ARGUMENTS_BYTES = 256 * 1024
"""One tool call's arguments, encoded: a model step's output carries all its calls' arguments."""
MAX_TOOL_CALLS = 64
"""Tool calls one model step may make (they run in parallel)."""
MAX_MODEL_TEXT_CHARS = 200_000
"""The text of one model answer (about 50,000 tokens, far above any max_tokens setting)."""
MAX_NAME_CHARS = 200
"""Tool names and call ids from a model."""
MAX_RAW_ARGUMENTS_CHARS = 2_000
"""What is kept of arguments that were not a JSON object (for the error message)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` without what a store or an encoder refuses: NUL bytes (PostgreSQL text cannot hold them) and
    lone surrogates (not UTF-8 encodable) become U+FFFD, so the change is visible rather than silent."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """The nesting depth of a JSON value, counted without recursion; stops counting past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def clean_json(value: Any, *, max_depth: int = MAX_JSON_DEPTH, what: str = "the value") -> Any:
    """A JSON value with every string (keys too) passed through :func:`clean_text`.

    Raises:
        InvalidInput: it is nested deeper than ``max_depth`` levels.
    """
    if json_depth(value, max_depth) > max_depth:
        raise InvalidInput(f"{what} is nested deeper than {max_depth} levels")
    return _clean(value)


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_text(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def cap_text(text: str, limit: int, *, what: str = "text") -> str:
    """``text`` cut to ``limit`` characters, saying so at the end."""
    if len(text) <= limit:
        return text
    note = f"\n[{what} cut at {limit:,} of {len(text):,} characters]"
    return text[: max(0, limit - len(note))] + note


def normalize_model_message(message: Message) -> Message:
    """A model's answer as the workflow may receive it: text and names cleaned and capped, each call's
    arguments checked for depth and size. A call whose arguments cannot be taken keeps its id and name and
    says why in ``refused``, so the session answers it with a tool error the model can act on."""
    calls = []
    for i, call in enumerate(message.tool_calls[:MAX_TOOL_CALLS]):
        name = clean_text(call.name)[:MAX_NAME_CHARS] or "(unnamed)"
        call_id = clean_text(call.id)[:MAX_NAME_CHARS] or f"call_{i}"
        refused = call.refused
        arguments: dict[str, Any] = {}
        raw = clean_text(call.raw_arguments)[:MAX_RAW_ARGUMENTS_CHARS] if call.raw_arguments is not None else None
        if refused is None:
            try:
                arguments = clean_json(call.arguments, what="the arguments")
                size = len(json.dumps(arguments, ensure_ascii=False))
                if size > MAX_TOOL_ARGUMENTS_BYTES:
                    arguments = {}
                    refused = (
                        f"the arguments are {size:,} characters of JSON; the limit is {MAX_TOOL_ARGUMENTS_BYTES:,}. "
                        "Send less (large content goes in files or a saved result)"
                    )
            except InvalidInput as exc:
                refused = str(exc)
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw, refused=refused))
    dropped = len(message.tool_calls) - len(calls)
    content = cap_text(clean_text(message.content), MAX_MODEL_TEXT_CHARS, what="the answer")
    if dropped:
        content += f"\n[{dropped} tool calls beyond the limit of {MAX_TOOL_CALLS} per step were dropped]"
    return message.model_copy(update={"content": content, "tool_calls": calls})


MAX_PREVIEW_CHARS = 2_000
"""What progress events carry of a tool's arguments."""


def preview_json(value: dict[str, Any], limit: int = MAX_PREVIEW_CHARS) -> dict[str, Any]:
    """``value`` as a progress event may carry it: itself when small, else its keys with a shortened text."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= limit:
        return value
    return {"_preview": text[:limit] + "…", "_chars": len(text)}


# Field limits the tool contracts use (their JSON Schemas show them to the model).
ID_CHARS = 200
"""An id the model or a client passes (a session, a goal, a loop, a memory, an execution); the store's id
columns hold 200 characters."""
SCOPE_CHARS = 100
"""An agent, organisation or project name (the store's columns hold 100 characters)."""
LABEL_CHARS = 200
"""A title, a tag, a name."""
NOTE_CHARS = 4_000
"""A reason, a description, a short note."""
MESSAGE_CHARS = 100_000
"""A message or an instruction for another session (it goes into that session's start and history)."""
LIST_ITEMS = 100
"""Items of a list argument (todos, prior messages) unless the contract says fewer."""
OFFSET_MAX = 1_000_000_000
"""Offsets into a saved result or a listing: far above any real one, far below what a column holds."""
MAX_INPUT_BYTES = 512 * 1024
"""One message, answer or decision a client sends, as JSON. Temporal takes 2 MB a payload, and a worker
cannot refuse an update above that (the refusal carries the request back and its workflow task fails)."""


def limit(
    *,
    chars: int | None = None,
    items: int | None = None,
    properties: int | None = None,
    maximum: float | None = None,
    minimum: float | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``Field(...)`` that put a limit into the field's JSON Schema.

    The schema is what the model sees, and :func:`schema_problems` enforces it where arguments enter, so the
    two cannot drift. The limits live in the schema rather than as pydantic constraints because workflow code
    validates the workflow-native tools' arguments on replay too: a pydantic constraint added to such a model
    would refuse, on replay, a call that a recorded history accepted (a non-deterministic replay). A limit
    changed after 1.0.0 is therefore a workflow change, guarded by a patch id.
    """
    extra: dict[str, Any] = {}
    if chars is not None:
        extra["maxLength"] = chars
    if items is not None:
        extra["maxItems"] = items
    if properties is not None:
        extra["maxProperties"] = properties
    if maximum is not None:
        extra["maximum"] = maximum
    if minimum is not None:
        extra["minimum"] = minimum
    return {"json_schema_extra": extra}


def limit_violations(schema: Mapping[str, Any], value: Any) -> list[tuple[tuple[str | int, ...], str]]:
    """Where ``value`` breaks ``schema``'s limits: (field path, message) pairs, at most ten.

    Only the limits are checked (lengths, counts, ranges), where the schema puts them: types and the
    contracts' own rules are pydantic's. A small walker rather than a JSON Schema library: workflow code runs
    it, and it needs the limit keywords of pydantic's schemas ($ref, anyOf, items, properties) and no more.
    """
    found: list[tuple[tuple[str | int, ...], str]] = []
    _walk(schema, value, (), schema.get("$defs", {}), found)
    return found[:10]


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "array": (list, tuple),
    "object": (dict,),
    "boolean": (bool,),
}


def _fits(schema: Mapping[str, Any], value: Any) -> bool:
    kind = schema.get("type")
    if kind is None or kind == "null":
        return kind is None or value is None
    kinds = kind if isinstance(kind, list) else [kind]
    return any(
        isinstance(value, _TYPES.get(k, ())) and not (isinstance(value, bool) and k in ("integer", "number"))
        for k in kinds
    )


def _walk(
    schema: Mapping[str, Any],
    value: Any,
    path: tuple[str | int, ...],
    defs: Mapping[str, Any],
    found: list[tuple[tuple[str | int, ...], str]],
) -> None:
    if len(found) >= 10 or len(path) > MAX_JSON_DEPTH:
        return
    if "$ref" in schema:
        target = defs.get(str(schema["$ref"]).rsplit("/", 1)[-1], {})
        _walk({**target, **{k: v for k, v in schema.items() if k != "$ref"}}, value, path, defs, found)
        return
    for key in ("anyOf", "oneOf"):
        branches = [b for b in schema.get(key, []) if isinstance(b, Mapping)]
        resolved = [defs.get(str(b["$ref"]).rsplit("/", 1)[-1], {}) if "$ref" in b else b for b in branches]
        for branch, original in zip(resolved, branches, strict=True):
            if _fits(branch, value):
                _walk(original, value, path, defs, found)
                break
    if isinstance(value, float) and not math.isfinite(value) and _RANGE_KEYWORDS & schema.keys():
        # NaN compares false with every bound, and infinity is no ceiling: a range holds finite numbers only.
        found.append((path, _non_finite_message(schema, value)))
        return
    for key in _LIMIT_KEYWORDS:
        bound = schema.get(key)
        if bound is not None and _breaks(key, bound, value):
            found.append((path, _limit_message(key, bound, value)))
    if isinstance(value, (list, tuple)) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            _walk(schema["items"], item, (*path, i), defs, found)
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            sub = properties.get(name, extra if isinstance(extra, Mapping) else None)
            if isinstance(sub, Mapping):
                _walk(sub, item, (*path, str(name)), defs, found)


def _breaks(keyword: str, bound: Any, value: Any) -> bool:
    if not isinstance(bound, (int, float)):
        return False
    if keyword in ("maxLength", "minLength", "maxItems", "minItems", "maxProperties"):
        sized = (str,) if keyword.endswith("Length") else (dict,) if keyword == "maxProperties" else (list, tuple)
        if not isinstance(value, sized):
            return False
        return len(value) > bound if keyword.startswith("max") else len(value) < bound
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    checks = {
        "maximum": value > bound,
        "minimum": value < bound,
        "exclusiveMaximum": value >= bound,
        "exclusiveMinimum": value <= bound,
    }
    return checks[keyword]


def schema_problems(schema: Mapping[str, Any], value: Any) -> str | None:
    """:func:`limit_violations` as one line, or None."""
    found = limit_violations(schema, value)
    return "; ".join(f"{'.'.join(map(str, path)) or '(arguments)'}: {message}" for path, message in found) or None


def limit_error(
    title: str, schema: Mapping[str, Any], value: Any, also: ValidationError | None = None
) -> ValidationError | None:
    """:func:`limit_violations` as a pydantic ``ValidationError``, so each face words it as it words the rest;
    ``also``'s problems (pydantic's own) come first, and a limit at a field pydantic already refused is left out."""
    from pydantic_core import InitErrorDetails, PydanticCustomError

    found = limit_violations(schema, value)
    if not found:
        return also
    details: list[InitErrorDetails] = []
    refused: set[tuple[str | int, ...]] = set()
    for e in also.errors() if also is not None else []:
        loc = tuple(e["loc"])
        refused.add(loc)
        details.append(InitErrorDetails(type=PydanticCustomError(e["type"], e["msg"]), loc=loc, input=None))  # type: ignore[arg-type]
    for path, message in found:
        if path not in refused:
            details.append(InitErrorDetails(type=PydanticCustomError("limit", message), loc=path, input=None))  # type: ignore[arg-type]
    return ValidationError.from_exception_data(title, details)


_LIMIT_KEYWORDS = frozenset(
    {
        "maxLength",
        "minLength",
        "maxItems",
        "minItems",
        "maxProperties",
        "maximum",
        "minimum",
        "exclusiveMaximum",
        "exclusiveMinimum",
    }
)


_RANGE_KEYWORDS = frozenset({"maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum"})


def _number(bound: Any) -> str:
    return f"{int(bound):,}" if isinstance(bound, (int, float)) and float(bound).is_integer() else str(bound)


def _non_finite_message(schema: Mapping[str, Any], value: float) -> str:
    low = schema.get("minimum", schema.get("exclusiveMinimum"))
    high = schema.get("maximum", schema.get("exclusiveMaximum"))
    span = " ".join(
        part
        for part in (
            f"from {_number(low)}" if low is not None else "",
            f"to {_number(high)}" if high is not None else "",
        )
        if part
    )
    return f"must be a finite number {span} (got {value})"


def _limit_message(keyword: str, bound: Any, instance: Any) -> str:
    size = len(instance) if isinstance(instance, (str, list, dict)) else instance
    words = {
        "maxLength": f"at most {bound:,} characters (got {size:,})",
        "minLength": f"at least {bound:,} characters",
        "maxItems": f"at most {bound:,} items (got {size:,})",
        "minItems": f"at least {bound:,} items",
        "maxProperties": f"at most {bound:,} entries (got {size:,})",
        "maximum": f"at most {bound}",
        "minimum": f"at least {bound}",
        "exclusiveMaximum": f"less than {bound}",
        "exclusiveMinimum": f"more than {bound}",
    }
    return "must be " + words[keyword]


@functools.cache
def model_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A model's JSON Schema, built once per process (building one costs more than checking against it)."""
    return model.model_json_schema()


def model_problems(model: BaseModel) -> str | None:
    """What in a decoded model breaks the limits its schema states, or None."""
    return schema_problems(model_schema(type(model)), model.model_dump(mode="json"))


def input_problems(model: BaseModel) -> str | None:
    """Why a client's update or signal must not be sent, or None: its size first (never its text), then its
    schema's limits."""
    size = len(model.__pydantic_serializer__.to_json(model))
    if size > MAX_INPUT_BYTES:
        return f"it is {size:,} bytes of JSON; the limit is {MAX_INPUT_BYTES:,}"
    return model_problems(model)


def request_problems(request: BaseModel) -> str | None:
    """Why a session request (from a client or a parent) cannot start, or None: its limits, and nesting."""
    data = request.model_dump(mode="json")
    if json_depth(data) > MAX_JSON_DEPTH:
        return f"the request is nested deeper than {MAX_JSON_DEPTH} levels"
    return schema_problems(model_schema(type(request)), data)
