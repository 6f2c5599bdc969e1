"""Planning tools inside the session: todoWrite (goals and loops join here)."""

from __future__ import annotations

from temporalio import workflow

from workflows.base import SessionBase
from workflows.native import native_tool

with workflow.unsafe.imports_passed_through():
    from agent_tools.activity_io import ToolCallOutput
    from agent_tools.messages import ToolCall
    from agent_tools.tools.planning import TodoItem, TodoWriteArgs, render_todos


class PlanningMixin(SessionBase):
    @native_tool("todoWrite")
    async def _tool_todo_write(self, args: TodoWriteArgs, call: ToolCall) -> ToolCallOutput:
        self.state.planning.todos = list(args.todos)
        self.publish("todos", todos=[t.model_dump() for t in args.todos])
        self.refresh_details()
        done = sum(1 for t in args.todos if t.status == "completed")
        return ToolCallOutput(
            content=f"Todo list updated: {len(args.todos)} items, {done} completed.\n{render_todos(args.todos)}"
        )

    @workflow.query(name="todos")
    def query_todos(self) -> list[TodoItem]:
        return self.state.planning.todos

    def _details_sections(self) -> list[str]:
        sections = super()._details_sections()
        if self.state.planning.todos:
            sections.append("**Todos**\n" + render_todos(self.state.planning.todos))
        return sections
