"""Structured results in the workflow: the current details say where the session's answer stands.

The decisions are pure (:func:`agent_tools.contracts._output.next_output_step`, called by the turn loop);
the answer is checked in the ``llm_step`` activity.
"""

from agent_tools.contracts._output import output_line
from agent_tools.workflows._port import CapabilityPart


class OutputPart(CapabilityPart):
    """The structured result's line in the Temporal UI's current details."""

    def details_sections(self) -> list[str]:
        line = output_line(self.config.output, self.state.output)
        return [line] if line is not None else []
