"""Planning contracts: todoWrite (RTC). Goals and loops join this module (issue: planning)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, model_validator

from agent_tools.catalog.spec import ToolSpec

TodoStatus = Literal["pending", "in_progress", "completed"]


class TodoItem(BaseModel):
    content: str = Field(min_length=1, description="Task description (imperative)")
    status: TodoStatus = Field(description="Task status")
    active_form: str | None = Field(
        default=None, description="Short description for status bar display when in progress"
    )


class TodoWriteArgs(BaseModel):
    """Full replacement: each call passes the complete list."""

    todos: list[TodoItem] = Field(default_factory=list, description="Todo item list (complete replacement)")

    @model_validator(mode="after")
    def _one_in_progress(self) -> TodoWriteArgs:
        # One task in progress at a time keeps the status bar honest: the list is a plan, not a wish list.
        active = [t.content for t in self.todos if t.status == "in_progress"]
        if len(active) > 1:
            raise ValueError(f"at most one todo may be in_progress at a time, got {len(active)}: {active}")
        return self


class PlanningState(BaseModel):
    todos: list[TodoItem] = Field(default_factory=list)


def render_todos(todos: list[TodoItem]) -> str:
    """Markdown checklist for the Temporal UI and the CLI."""
    marks = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]"}
    lines = []
    for t in todos:
        label = t.active_form if t.status == "in_progress" and t.active_form else t.content
        lines.append(f"- {marks[t.status]} {label}")
    return "\n".join(lines)


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="todoWrite",
        description=(
            "Manage your task list. Full replacement: pass the complete list every time. Keep tasks at a "
            "verifiable granularity, mark progress promptly, at most one task in_progress, and remove tasks "
            "you no longer need instead of cancelling them."
        ),
        args_model=TodoWriteArgs,
        capability="planning",
        runs_in="workflow",
    ),
]
