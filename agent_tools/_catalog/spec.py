"""What the catalog knows about one tool: its contract and where it runs."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from agent_tools._boundaries import describe_validation_error, limit_error


class ToolLevel(StrEnum):
    """codai's tool levels, ordered: an agent gets the tools at or below its own level."""

    none = "none"
    l1_http = "l1_http"
    l3_sandbox = "l3_sandbox"
    l4_browser = "l4_browser"

    @property
    def rank(self) -> int:
        """The level's order: a higher level allows every tool a lower one does."""
        return _LEVEL_RANK[self]

    def allows(self, required: ToolLevel) -> bool:
        """True when a tool that needs ``required`` may run at this level."""
        return self.rank >= required.rank


_LEVEL_RANK = {ToolLevel.none: 0, ToolLevel.l1_http: 1, ToolLevel.l3_sandbox: 3, ToolLevel.l4_browser: 4}

# codai: "`none` disables every executed tool". codai's faces that need no network of their own
# (read_artifact, memory_*, use_skill, delegate_to_model, spawn_agent) still run on the gateway, so they ask
# for the lowest level above none. RTC's and FYAI's tools have no level in their documents and keep none.
CODAI_EXECUTED = ToolLevel.l1_http

RunsIn = Literal["activity", "workflow"]


def _default_invalid_message(tool: str, error: ValidationError) -> str:
    return f"Invalid arguments for {tool}: {describe_validation_error(error)}"


@dataclass(frozen=True)
class ToolSpec:
    """A tool's contract.

    Attributes:
        name: The name the model calls.
        description: What the model reads about it.
        args_model: Pydantic model of the arguments; the JSON Schema the model sees comes from it.
        result_model: Pydantic model of the structured result, when the tool has one.
        runs_in: ``activity`` (touches the world) or ``workflow`` (orchestration, deterministic).
        capability: The engine behind the face (memory, web, delegation, ...).
        interrupts: Whether calling it pauses the turn for something outside (askUser, sync subAgent).
        automatic: Attached without being assigned (FYAI's "Automatic" chip), subject to its condition.
        level: Tool level the agent needs to get it.
        spill_exempt: Always return the full result, never a saved-result pointer.
        summary_arg: Argument shown in the Temporal UI activity summary (``webSearch: "query"``).
        invalid_arguments: Formats a validation failure for the model (contracts differ on the shape).
        requires_approval: Every call waits for a person's approval (``@tool(requires_approval=True)``).
        read_only: Only reads: changes nothing, writes nothing, starts nothing, calls no model (codai's
            ``explore`` children get only such tools).
    """

    name: str
    description: str
    args_model: type[BaseModel]
    capability: str
    runs_in: RunsIn = "activity"
    result_model: type[BaseModel] | None = None
    interrupts: bool = False
    automatic: bool = False
    level: ToolLevel = ToolLevel.none
    spill_exempt: bool = False
    summary_arg: str | None = None
    invalid_arguments: Callable[[str, ValidationError], str] = field(default=_default_invalid_message)
    requires_approval: bool = False
    read_only: bool = False

    def parameters_schema(self) -> dict[str, Any]:
        """JSON Schema of the arguments, trimmed of pydantic's titles that only cost tokens."""
        return _schema_of(self.args_model)

    def validate_arguments(self, arguments: dict[str, Any]) -> BaseModel:
        """Parse arguments; raises ``pydantic.ValidationError``.

        Also checks the limits of :meth:`parameters_schema` (lengths, counts, ranges), the schema the model
        saw, and refuses parameters the schema does not name (with the valid ones) and anything but true or
        false where it says boolean; pydantic would drop the first and read ``"yes"`` as true. Numeric strings
        (``"10"`` for an integer) stay accepted: harmless, and models write them. An MCP server's own schema
        is its contract.
        """
        if self.capability != "mcp" and isinstance(arguments, dict):
            problems = strict_problems(self.parameters_schema(), arguments)
            if problems:
                raise _as_validation_error(self.name, problems)
        try:
            parsed = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            raise limit_error(self.name, self.parameters_schema(), arguments, also=exc) or exc from None
        # Checked on the parsed arguments: the contracts' own normalisation (trimming, a ref taken out of a
        # pasted pointer, a timeout capped as the document says) comes first.
        dumped = parsed.model_dump(mode="json", fallback=lambda _value: None)  # sentinels (MCP) read as unset
        error = limit_error(self.name, self.parameters_schema(), dumped)
        if error is not None:
            raise error
        return parsed

    def summary(self, arguments: dict[str, Any]) -> str:
        """The one line the Temporal UI shows for this call."""
        if self.summary_arg and self.summary_arg in arguments:
            value = str(arguments[self.summary_arg]).replace("\n", " ")
            if len(value) > 80:
                value = value[:77] + "..."
            return f'{self.name}: "{value}"'
        return self.name


Path = tuple[str | int, ...]


def strict_problems(schema: dict[str, Any], value: Any) -> list[tuple[Path, str]]:
    """Parameters ``schema`` does not name, and non-booleans where it says boolean, anywhere in ``value``.

    An object schema with ``properties`` and no ``additionalProperties`` names every key it accepts (the
    models behind the tools' schemas ignore any other key, so a model's ``timeout`` would vanish silently).
    """
    walker = _StrictWalker(schema.get("$defs", {}))
    walker.walk(schema, value, ())
    return walker.found


class _StrictWalker:
    """One walk of ``strict_problems``: the schema's ``$defs`` and the problems found so far."""

    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs
        self.found: list[tuple[Path, str]] = []

    def deref(self, node: Any) -> Any:
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            node = self.defs.get(node["$ref"].rsplit("/", 1)[-1], {})
        return node

    def branch(self, node: dict[str, Any], val: Any) -> Any:
        options = node.get("anyOf") or node.get("oneOf")
        if not isinstance(options, list):
            return node
        options = [self.deref(o) for o in options]
        for option in options:
            if isinstance(option, dict) and _json_type_fits(option, val):
                return option
        if any(isinstance(o, dict) and o.get("type") == "boolean" for o in options):
            return {"type": "boolean"}  # an optional flag given "yes": refused like a required one
        return None  # no branch fits: pydantic's own message says so

    def walk(self, node: Any, val: Any, path: Path) -> None:
        node = self.deref(node)
        if not isinstance(node, dict):
            return
        node = self.branch(node, val)
        if node is None:
            return
        kind = node.get("type")
        if kind == "boolean" and not isinstance(val, bool):
            self.found.append((path, f"must be true or false, not {val!r}"[:200]))
        elif isinstance(val, dict) and isinstance(node.get("properties"), dict):
            self.walk_object(node, val, path)
        elif isinstance(val, list) and isinstance(node.get("items"), dict):
            for i, item in enumerate(val):
                self.walk(node["items"], item, (*path, i))

    def walk_object(self, node: dict[str, Any], val: dict[str, Any], path: Path) -> None:
        props: dict[str, Any] = node["properties"]
        unknown = [k for k in val if k not in props]
        if unknown and not node.get("additionalProperties"):
            valid = ", ".join(props) or "none"
            names = ", ".join(repr(k)[:60] for k in unknown[:5])
            self.found.append((path, f"unknown parameter {names}; valid parameters: {valid}"))
        for key, item in val.items():
            if key in props:
                self.walk(props[key], item, (*path, key))


def _json_type_fits(node: dict[str, Any], val: Any) -> bool:
    kind = node.get("type")
    if kind is None:
        return True
    fits = {
        "null": val is None,
        "boolean": isinstance(val, bool),
        "string": isinstance(val, str),
        "integer": isinstance(val, int) and not isinstance(val, bool),
        "number": isinstance(val, int | float) and not isinstance(val, bool),
        "object": isinstance(val, dict),
        "array": isinstance(val, list),
    }
    return any(fits.get(k, False) for k in (kind if isinstance(kind, list) else [kind]))


def _as_validation_error(title: str, problems: list[tuple[Path, str]]) -> ValidationError:
    from pydantic_core import InitErrorDetails, PydanticCustomError

    details = [
        InitErrorDetails(type=PydanticCustomError("strict", message), loc=path, input=None)  # type: ignore[arg-type]
        for path, message in problems
    ]
    return ValidationError.from_exception_data(title, details)


@functools.cache
def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    # Built once per model: generating a JSON Schema costs more than the rest of a model step's bookkeeping.
    return dict(_strip_titles(model.model_json_schema()))


def _strip_titles(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip_titles(v) for k, v in node.items() if not (k == "title" and isinstance(v, str))}
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node
