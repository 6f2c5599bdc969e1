"""Structured results in the workflow: the current details say where the session's answer stands.

The decisions are pure (:func:`agent_tools.contracts.output.next_output_step`, called by the turn loop);
the answer is checked in the ``llm_step`` activity.
"""

from temporalio import workflow

from agent_tools.workflows.base import SessionBase

with workflow.unsafe.imports_passed_through():
    from agent_tools.contracts.output import output_line


class OutputMixin(SessionBase):
    """The structured result's line in the Temporal UI's current details."""

    def _details_sections(self) -> list[str]:
        sections = super()._details_sections()
        line = output_line(self.config.output, self.state.output)
        if line is not None:
            sections.append(line)
        return sections
