"""Hostile arguments for every tool in the catalog, derived from its schema and one valid example.

Each case is a tool call a model could make. ``refused`` cases must come back as a tool error; the others
(a NUL byte or a lone surrogate in an otherwise valid call, an extra field, a null where null is allowed)
must leave the session in a defined state: the tool ran or refused, and the turn went on.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from agent_tools._catalog.registry import builtin_specs

MEGABYTE = "x" * 1_000_000
# The askUser call of the clients' hostile tests: one question, two options.
ASK = {
    "name": "askUser",
    "arguments": {
        "questions": [
            {
                "question": "Which colour?",
                "header": "Colour",
                "options": [{"label": "Red", "description": "red"}, {"label": "Blue", "description": "blue"}],
            }
        ]
    },
}
HUGE = 10**40

# One valid, harmless call per tool: nothing here blocks for long (asks time out through the session's
# options, waits last a second, loops are cancelled by the script's last step).
EXAMPLES: dict[str, dict[str, Any]] = {
    "todoWrite": {"todos": [{"content": "Check the logs", "status": "pending"}]},
    "createGoal": {"condition": "The report is written", "max_turns": 1},
    "completeGoal": {"goal_id": "goal-99", "reason": "done"},
    "cancelGoal": {"goal_id": "goal-99"},
    "createLoop": {"prompt": "Check the queue", "interval_seconds": 60, "max_turns": 1},
    "cancelLoop": {"loop_id": "loop-99"},
    "completeLoop": {"reason": "done", "loop_id": "loop-99"},
    "listLoops": {},
    "pauseLoop": {"loop_id": "loop-99"},
    "resumeLoop": {"loop_id": "loop-99"},
    "askUser": {
        "questions": [
            {
                "question": "Which one?",
                "header": "Choice",
                "options": [{"label": "First", "description": "the first"}, {"label": "Second", "description": "b"}],
            }
        ]
    },
    "subAgent": {"title": "Quick check", "instruction": "Say done", "mode": "sync"},
    "listSubAgent": {},
    "getSubAgentMessage": {"sub_session_id": "no-such-session"},
    "stopSubAgent": {"sub_session_id": "no-such-session"},
    "sendMessageToSubAgent": {"sub_session_id": "no-such-session", "message": "hello"},
    "invoke_sub_agent": {"agent_name": "nobody", "task_input": "do it"},
    "spawn_agent": {"task": "Say done", "role": "explore", "max_steps": 2},
    "hand_off_to_agent": {"agent_name": "nobody", "message": "take over"},
    "delegate_to_model": {"model": "no-such-model", "prompt": "hi"},
    "webSearch": {"query": "durable agents"},
    "webFetch": {"url": "http://10.0.0.1/", "prompt": "summarise"},
    "web_search": {"query": "durable agents"},
    "web_fetch": {"url": "http://10.0.0.1/"},
    "http_fetch": {"url": "http://10.0.0.1/"},
    "json_query": {"document": {"a": [1, 2]}, "query": "a[0]"},
    "saveMemory": {"content": "The build uses uv"},
    "updateMemory": {"memory_id": "mem_nothing", "content": "x"},
    "deleteMemory": {"memory_id": "mem_nothing"},
    "listMemories": {"limit": 5},
    "searchMemory": {"query": "build"},
    "remember": {"fact": "Deploys are on Tuesdays"},
    "recall": {"query": "deploys"},
    "memory_remember": {"content": "CI runs on GitHub"},
    "memory_recall": {"query": "CI"},
    "read_tool_result": {"ref": "res_nothing"},
    "search_tool_result": {"ref": "res_nothing", "pattern": "x"},
    "query_tool_result": {"ref": "res_nothing", "path": "."},
    "read_artifact": {"ref": "res_nothing"},
    "search_conversation_history": {"query": "hello"},
    "wait_for_event": {"kind": "never.happens", "timeout_seconds": 1},
    "exec_python": {"code": "print(1)", "timeout_seconds": 5},
    "use_skill": {"name": "nothing"},
}


# Cases that are valid by contract and would block the suite's session for long: each has its own test.
ELSEWHERE = {
    # FYAI caps the wait at 55 minutes: tests/test_events_durability.py checks the cap on the time-skipping
    # server.
    ("wait_for_event", "timeout_seconds: huge"),
}


@dataclass
class Case:
    tool: str
    label: str
    arguments: dict[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    refused: bool = False

    def call(self, index: int) -> dict[str, Any]:
        call: dict[str, Any] = {"name": self.tool, "arguments": self.arguments}
        if self.raw_arguments is not None:
            call["raw_arguments"] = self.raw_arguments
        return call


def _deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = {"x": value}
    return value


def _wrong_type(schema: dict[str, Any]) -> Any:
    kind = schema.get("type")
    if kind is None and "anyOf" in schema:
        kinds = {b.get("type") for b in schema["anyOf"]}
        kind = next((k for k in ("string", "integer", "number", "boolean", "array", "object") if k in kinds), None)
    return {
        "string": {"not": "a string"},
        "integer": "lots",
        "number": "lots",
        "boolean": "yes please",
        "array": "not a list",
        "object": ["not", "an", "object"],
    }.get(str(kind), {"unexpected": True})


def _kinds(schema: dict[str, Any]) -> set[str]:
    kinds = {schema.get("type")} if "type" in schema else set()
    for branch in schema.get("anyOf", []):
        kinds.add(branch.get("type"))
    return {str(k) for k in kinds if k}


def cases_for(name: str, schema: dict[str, Any]) -> list[Case]:
    example = EXAMPLES[name]
    properties: dict[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", []))
    found = [
        Case(name, "raw: not JSON", raw_arguments="{not json", refused=True),
        Case(name, "deep JSON", {**example, next(iter(properties), "x"): _deep(250)}, refused=True),
        Case(name, "extra field", {**example, "unexpected_field": 1}),
        Case(name, "whole call of a megabyte", {**example, "padding": MEGABYTE}, refused=True),
    ]
    if required:
        found.append(Case(name, "missing fields", {}, refused=True))
    for prop, sub in properties.items():
        kinds = _kinds(sub)
        # A field of any JSON value (json_query's document) has no wrong type and takes null.
        typed = bool(kinds - {"null"})
        found.append(Case(name, f"{prop}: wrong type", {**example, prop: _wrong_type(sub)}, refused=typed))
        nullable = "null" in kinds or not typed
        found.append(Case(name, f"{prop}: null", {**example, prop: None}, refused=not nullable and prop in required))
        if kinds & {"integer", "number"}:
            found.append(Case(name, f"{prop}: huge", {**example, prop: HUGE}, refused=True))
            found.append(Case(name, f"{prop}: negative", {**example, prop: -(10**9)}, refused=True))
        if "string" in kinds:
            base = example.get(prop) if isinstance(example.get(prop), str) else "value"
            found.append(Case(name, f"{prop}: a megabyte", {**example, prop: MEGABYTE}, refused=True))
            found.append(Case(name, f"{prop}: NUL", {**example, prop: f"{base}\x00tail"}))
            found.append(Case(name, f"{prop}: lone surrogate", {**example, prop: f"{base}\ud800tail"}))
    return [copy.deepcopy(c) for c in found if (c.tool, c.label) not in ELSEWHERE]


def all_cases() -> dict[str, list[Case]]:
    """Every tool's cases, by tool name."""
    return {spec.name: cases_for(spec.name, spec.parameters_schema()) for spec in builtin_specs()}


def unknown_tool_cases() -> list[Case]:
    return [
        Case("no_such_tool", "unknown tool", {}, refused=True),
        Case("bad\x00name", "NUL in the name", {}, refused=True),
        Case("n" * 100_000, "a huge name", {}, refused=True),
    ]
