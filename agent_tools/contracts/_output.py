"""Structured results: a session whose final answer must be JSON that matches a JSON Schema.

The client gives the schema (a pydantic model class or a JSON Schema dict), ``prepare_session`` checks it
once and puts an :class:`OutputContract` into the session's config (so continue-as-new carries it), each
model step sends it to the provider (OpenAI's ``response_format``, Anthropic's forced tool) and the
``llm_step`` activity checks a final answer against it. The workflow only reads the verdict
(:func:`next_output_step`): a valid answer becomes the session result's ``output``; an invalid one goes
back to the model as a user message with the validation error, a bounded number of times, and then ends
the turn with a clear error.

Pure: no temporalio import, no I/O. jsonschema is imported where it is used: only sessions with a
schema need it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from agent_tools._boundaries import MAX_JSON_DEPTH, clean_json, json_depth
from agent_tools._messages import Message

if TYPE_CHECKING:
    from agent_tools._activity_io import LlmStepOutput

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "MAX_OUTPUT_RETRIES",
    "MAX_SCHEMA_CHARS",
    "OUTPUT_TOOL",
    "OutputContract",
    "OutputState",
    "OutputStep",
    "StructuredAnswer",
    "check_answer",
    "contract_of",
    "next_output_step",
    "output_line",
    "parse_answer",
    "schema_dict",
    "schema_refusal",
]

DEFAULT_OUTPUT_RETRIES = 2
"""How many times an invalid final answer goes back to the model before the turn fails."""
MAX_OUTPUT_RETRIES = 10
MAX_SCHEMA_CHARS = 32_000
"""A schema travels with every model step of the session (it is part of each step's input in the history):
32,000 characters is far above any real output model and keeps a 200-step session's history bounded."""
OUTPUT_TOOL = "final_answer"
"""The tool Anthropic is made to call for a final answer (its arguments are the answer)."""
# A problem the model reads: enough to act on, never a page of jsonschema's repr.
_PROBLEM_CHARS = 1_000
# A pattern in a hostile schema may backtrack for ever against a hostile answer (``^(a+)+$``): each pattern
# match is bounded, and one that runs out is a validation error, not a blocked worker.
_PATTERN_SECONDS = 0.2
_NAME = re.compile(r"[^A-Za-z0-9_-]+")
_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```$", re.DOTALL)


class OutputContract(BaseModel):
    """What a session's final answer must be: checked once when the session is prepared."""

    json_schema: dict[str, Any]
    # The schema's name where a provider wants one (OpenAI's ``json_schema.name``: ``[A-Za-z0-9_-]{1,64}``).
    name: str = "output"
    retries: int = DEFAULT_OUTPUT_RETRIES


class StructuredAnswer(BaseModel):
    """The llm_step activity's verdict on a final answer: the parsed value, or why it does not fit."""

    value: Any = None
    problem: str | None = None


class OutputState(BaseModel):
    """The session's structured result so far (carried by continue-as-new with the rest of the state)."""

    value: Any = None
    valid: bool = False
    # Invalid answers sent back to the model in turn ``turn``.
    retries: int = 0
    turn: int = 0
    problem: str | None = None


class OutputStep(BaseModel):
    """What the workflow does after a final answer: send ``feedback`` to the model, or end the turn (with
    ``error`` when the retries ran out)."""

    feedback: Message | None = None
    error: str | None = None


def schema_dict(schema: type[BaseModel] | Mapping[str, Any]) -> dict[str, Any]:
    """A JSON Schema from a pydantic model class (its ``model_json_schema``) or a mapping, as a plain dict."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if isinstance(schema, Mapping):
        return dict(schema)
    raise TypeError(f"output_schema must be a pydantic model class or a JSON Schema dict, got {type(schema).__name__}")


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(item, str):
                yield item
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def schema_refusal(schema: Any) -> str | None:
    """Why ``schema`` cannot be a session's output schema, or None.

    Refused: anything but a JSON object, more than :data:`MAX_SCHEMA_CHARS`, nesting deeper than the
    engine's JSON limit, what the schema's own metaschema refuses (an unknown type, a bad regex), and
    references outside the schema (``$ref`` to a URL would make validation fetch or fail at the end).
    """
    if not isinstance(schema, dict):
        return f"output_schema must be a JSON object, got {type(schema).__name__}"
    if json_depth(schema) > MAX_JSON_DEPTH:
        return f"output_schema is nested deeper than {MAX_JSON_DEPTH} levels"
    try:
        # NaN and Infinity are no JSON (a bound of NaN would be dropped or refused on the way to the session).
        size = len(json.dumps(schema, allow_nan=False))
    except ValueError as exc:
        if "float" in str(exc):
            return "output_schema holds a number JSON cannot (NaN or Infinity)"
        return f"output_schema is not JSON: {exc}"
    except (TypeError, RecursionError) as exc:
        return f"output_schema is not JSON: {exc}"
    if size > MAX_SCHEMA_CHARS:
        return f"output_schema is {size:,} characters of JSON; at most {MAX_SCHEMA_CHARS:,}"
    outside = [ref for ref in _refs(schema) if not ref.startswith("#")]
    if outside:
        return f"output_schema may only refer inside itself ($ref '#/...'), not to {outside[0][:200]!r}"
    import jsonschema  # type: ignore[import-untyped]

    if "$schema" in schema and jsonschema.validators.validator_for(schema, default=None) is None:
        # jsonschema would fall back to its newest draft (and warns that this will become an error).
        return f"output_schema names a $schema this worker does not know: {str(schema['$schema'])[:200]!r}"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"output_schema is not a valid JSON Schema{f' at {where}' if where else ''}: {exc.message[:500]}"
    except Exception as exc:  # an unknown $schema, a metaschema the library cannot load
        return f"output_schema cannot be checked: {type(exc).__name__}: {str(exc)[:500]}"
    return None


def contract_of(schema: dict[str, Any], retries: int | None) -> OutputContract:
    """The contract for a schema :func:`schema_refusal` accepted."""
    title = schema.get("title")
    name = _NAME.sub("_", title).strip("_")[:64] if isinstance(title, str) else ""
    return OutputContract(
        json_schema=schema, name=name or "output", retries=DEFAULT_OUTPUT_RETRIES if retries is None else retries
    )


def parse_answer(text: str) -> Any:
    """The JSON value of a final answer (a fenced ```json block is read too).

    Raises:
        ValueError: not JSON, or nested deeper than the engine's JSON limit.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise ValueError("the answer is empty")
    try:
        value = json.loads(body)
    except RecursionError as exc:
        raise ValueError(f"the answer is nested deeper than {MAX_JSON_DEPTH} levels") from exc
    except ValueError as exc:
        raise ValueError(f"the answer is not JSON ({exc})") from exc
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"the answer is nested deeper than {MAX_JSON_DEPTH} levels")
    # JSON escapes decode to what no payload can carry (``"\ud800"`` is a lone surrogate) or a store refuses
    # (NUL): cleaned like every other model output, before the schema sees the value.
    return clean_json(value)


def _validator(schema: dict[str, Any]) -> Any:
    import jsonschema
    import regex  # type: ignore[import-untyped]  # (ships no stubs)

    def search(pattern: str, text: str) -> bool:
        try:
            return regex.search(pattern, text, timeout=_PATTERN_SECONDS) is not None
        except TimeoutError as exc:
            raise jsonschema.ValidationError(f"pattern {pattern[:100]!r} took too long to match") from exc

    def pattern(validator: Any, patrn: str, instance: Any, _schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "string"):
            return
        try:
            if not search(patrn, instance):
                yield jsonschema.ValidationError(f"{instance[:200]!r} does not match {patrn[:200]!r}")
        except jsonschema.ValidationError as error:
            yield error

    def pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any, _schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for patrn, subschema in patterns.items():
            for key, item in instance.items():
                try:
                    matched = search(patrn, key)
                except jsonschema.ValidationError as error:
                    yield error
                    return
                if matched:
                    yield from validator.descend(item, subschema, path=key, schema_path=patrn)

    base = jsonschema.validators.validator_for(schema)
    bounded = jsonschema.validators.extend(base, {"pattern": pattern, "patternProperties": pattern_properties})
    return bounded(schema)


def check_answer(contract: OutputContract, text: str) -> StructuredAnswer:
    """Parse and validate a final answer; never raises (a schema that cannot be applied is a problem too)."""
    try:
        value = parse_answer(text)
    except ValueError as exc:
        return StructuredAnswer(problem=str(exc)[:_PROBLEM_CHARS])
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(_validator(contract.json_schema).iter_errors(value))
    except RecursionError:
        return StructuredAnswer(problem="the schema refers to itself more deeply than the answer can be checked")
    except Exception as exc:  # an unresolvable reference inside the schema: the model cannot fix it
        return StructuredAnswer(
            problem=f"the schema could not be applied: {type(exc).__name__}: {exc}"[:_PROBLEM_CHARS]
        )
    if error is None:
        return StructuredAnswer(value=value)
    where = "/".join(str(p) for p in error.absolute_path)
    return StructuredAnswer(problem=f"{f'at {where}: ' if where else ''}{error.message}"[:_PROBLEM_CHARS])


def next_output_step(contract: OutputContract | None, state: OutputState, out: LlmStepOutput, turn: int) -> OutputStep:
    """After a model step without tool calls: accept its answer, ask again, or give up (updates ``state``).

    Workflow code calls this: it is deterministic and reads only the step's result.
    """
    if contract is None:
        return OutputStep()
    if state.turn != turn:
        state.turn, state.retries = turn, 0
    # None: the worker that ran the step did not check the answer (one from before structured results, in a
    # rolling deploy). Not checked here: validation is the activity's, so that a slow pattern's timeout can
    # never make a replay take another branch.
    answer = out.output or StructuredAnswer(problem="the answer was not checked; give it again")
    if answer.problem is None:
        state.value, state.valid, state.problem = answer.value, True, None
        return OutputStep()
    state.problem = answer.problem
    if state.retries >= contract.retries:
        state.valid = False
        return OutputStep(
            error=f"the final answer does not match the output schema after {state.retries + 1} "
            f"attempt{'s' if state.retries else ''}: {answer.problem}"
        )
    state.retries += 1
    left = contract.retries - state.retries
    return OutputStep(
        feedback=Message(
            role="user",
            content=(
                f"Your final answer does not match the required JSON Schema: {answer.problem}\n"
                "Answer again with only a JSON value that matches the schema: no prose around it. "
                f"({left} more attempt{'' if left == 1 else 's'} after this one.)"
            ),
        )
    )


def output_line(contract: OutputContract | None, state: OutputState) -> str | None:
    """The Temporal UI's current-details line of a session with an output schema, or None."""
    if contract is None:
        return None
    if state.valid:
        verdict = "a valid answer"
    elif state.problem is not None:
        verdict = f"not valid ({state.retries} of {contract.retries} retries used): {state.problem[:300]}"
    else:
        verdict = "no answer yet"
    return f"**Structured result** `{contract.name}`: {verdict}"
