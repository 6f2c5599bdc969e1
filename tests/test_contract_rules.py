"""The documents' rules between tools and results (issue 14, items 9-16), on the dev server with the scripted
model unless the rule is pure."""

from __future__ import annotations

from typing import Any

from agent_tools.catalog import ToolCatalog
from agent_tools.session import SessionStatus
from tests.test_delegation import tool_results

QUESTION = {
    "question": "Which one?",
    "header": "Pick",
    "options": [{"label": "a", "description": "A"}, {"label": "b", "description": "B"}],
}


async def test_unknown_parameters_and_string_booleans_are_refused(settings: Any, script: Any, worker_for: Any) -> None:
    """Item 16: `webFetch {timeout: 999}` (an activity tool), `askUser` with `multiSelect: "yes"` (a workflow
    tool) and an unknown key inside a todo are refused with what is valid; a numeric string stays accepted."""
    settings.model = script(
        [
            {
                "tool_calls": [
                    {"name": "webFetch", "arguments": {"url": "https://a.example/", "prompt": "x", "timeout": 999}},
                    {"name": "askUser", "arguments": {"questions": [{**QUESTION, "multiSelect": "yes"}]}},
                    {"name": "todoWrite", "arguments": {"todos": [{"content": "x", "status": "pending", "due": 1}]}},
                    {"name": "createGoal", "arguments": {"condition": "done", "max_turns": "3"}},
                ]
            },
            {"say": "{{tool_results}}"},
        ]
    )
    async with worker_for() as client:
        handle = await client.start_session("go", tools=["webFetch", "askUser", "todoWrite", "createGoal"])
        result = await handle.result()
        results = tool_results(await handle.transcript())
    assert result.status == SessionStatus.completed
    assert results[0] == (
        "Invalid arguments for webFetch: (arguments): unknown parameter 'timeout'; valid parameters: url, prompt"
    )
    assert results[1] == "Invalid arguments for askUser: questions.0.multiSelect: must be true or false, not 'yes'"
    assert results[2].startswith("Invalid arguments for todoWrite: todos.0: unknown parameter 'due'; valid parameters:")
    assert "content, status, active_form" in results[2]
    assert "goal" in results[3].lower() and not results[3].startswith("Invalid")


def test_strict_check_reads_nested_optional_and_free_form_fields() -> None:
    catalog = ToolCatalog.builtin()
    wait = catalog.get("wait_for_event")
    assert wait is not None
    # `match` is free-form (additionalProperties): any key is the user's own.
    wait.validate_arguments({"kind": "ci", "match": {"anything": 1}})
    search = catalog.get("web_search")
    assert search is not None
    search.validate_arguments({"query": "x", "max_results": "3"})  # numeric strings stay coerced (documented)
