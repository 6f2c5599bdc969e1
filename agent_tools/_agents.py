"""Agent definitions: who an agent is, which model it runs on and which tools it sees.

Definitions come from a TOML file (``agents.toml`` by default)::

    [[agents]]
    name = "researcher"
    description = "Finds and summarises sources"
    system_prompt = "You research carefully and cite sources."
    model = "openai:gpt-4.1-mini"
    profile = "rtc"
    tools = ["web_search"]
    subagents = ["writer"]

When the file is missing, the built-in ``assistant`` agent serves.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from agent_tools._catalog.spec import ToolLevel
from agent_tools._errors import ConfigurationError
from agent_tools._policy import ExecutionPolicy
from agent_tools._session import SessionOptions
from agent_tools.contracts._approvals import ApprovalPolicy

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_SYSTEM_PROMPT",
    "AgentDefinition",
    "AgentRegistry",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are a capable assistant running as a durable agent session. Use the tools you have when they "
    "help; keep the user informed; answer concisely when you are done."
)


class AgentDefinition(BaseModel):
    """One agent: who it is, which model it runs on, and which tools it is offered.

    Attributes:
        name: Unique within its project; what sessions and delegation tools name.
        project: The project it belongs to (``default`` serves every project).
        description: Shown to other agents that may delegate to it.
        system_prompt: The system message of its sessions.
        model: A model spec (``openai:gpt-4.1-mini``); the deployment's default when omitted.
        profile: Which platform's tool faces it gets: ``rtc``, ``fyai``, ``codai``, ``all`` or None.
        tools: Tools assigned on top of the profile (by name).
        exclude_tools: Tools taken away from the profile.
        subagents: Agents it may invoke or hand off to (FYAI's grants).
        active: An inactive agent cannot start sessions.
        tool_level: The highest tool level it may use (codai: ``none`` offers no executed tool).
        max_steps: Model steps per turn.
        memory: FYAI's Memory switch: memory tools and the Memory Context block.
        spill_threshold_chars: Results longer than this are saved as artifacts (default 2,000).
        options: Session options its sessions start with; a request's own options win.
        policy: Overrides of the deployment's :class:`~agent_tools._policy.ExecutionPolicy`, e.g.
            ``{"tool_call": {"start_to_close_seconds": 1800}}``.
        approval: Tools whose calls wait for a person's approval (patterns, a tool level), how long a call
            waits, and who may decide (docs/approvals.md).
    """

    name: str = Field(min_length=1, max_length=100)
    project: str = "default"
    description: str = ""
    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    model: str | None = None
    profile: str | None = "all"
    tools: list[str] = Field(default_factory=list)
    exclude_tools: list[str] = Field(default_factory=list)
    subagents: list[str] = Field(default_factory=list, description="agents it may invoke or hand off to")
    active: bool = True
    tool_level: ToolLevel = ToolLevel.l1_http
    max_steps: int | None = Field(default=None, ge=1, le=500)
    memory: bool = True
    spill_threshold_chars: int | None = Field(default=None, ge=200)
    # Per-agent session options (e.g. ask_user_timeout_seconds); a request's own options win.
    options: SessionOptions = Field(default_factory=SessionOptions)
    # Overrides of the deployment's ExecutionPolicy for this agent's sessions, e.g.
    # {"tool_call": {"start_to_close_seconds": 1800}}.
    policy: dict[str, Any] = Field(default_factory=dict)
    approval: ApprovalPolicy | None = None

    @field_validator("policy")
    @classmethod
    def _policy_is_valid(cls, value: dict[str, Any]) -> dict[str, Any]:
        ExecutionPolicy().merged(value)  # raises with pydantic's message on a wrong field or value
        return value


DEFAULT_AGENT = AgentDefinition(name="assistant", description="General assistant")


class AgentRegistry:
    """Agents by name (names are unique within a project)."""

    def __init__(self, agents: list[AgentDefinition] | None = None) -> None:
        self._agents: dict[tuple[str, str], AgentDefinition] = {}
        for agent in agents or [DEFAULT_AGENT]:
            key = (agent.project, agent.name)
            if key in self._agents:
                raise ConfigurationError(f"agent {agent.name!r} is defined twice in project {agent.project!r}")
            self._agents[key] = agent
        if not any(name == DEFAULT_AGENT.name for _, name in self._agents):
            self._agents[(DEFAULT_AGENT.project, DEFAULT_AGENT.name)] = DEFAULT_AGENT

    @classmethod
    def from_file(cls, path: Path | None) -> AgentRegistry:
        """The agents of a TOML file (``[[agents]]`` tables), or the default agent alone when there is no file."""
        if path is None or not path.is_file():
            return cls()
        try:
            data = tomllib.loads(path.read_text())
            agents = [AgentDefinition.model_validate(a) for a in data.get("agents", [])]
        except (tomllib.TOMLDecodeError, ValidationError) as exc:
            raise ConfigurationError(f"{path}: {exc}") from exc
        return cls(agents)

    def get(self, name: str, project: str = "default") -> AgentDefinition:
        """The agent named ``name`` in ``project``, else in the default project.

        Raises:
            ConfigurationError: no such agent (the message lists the known ones).
        """
        agent = self._agents.get((project, name)) or (
            self._agents.get(("default", name)) if project != "default" else None
        )
        if agent is None:
            known = sorted(n for p, n in self._agents if p in (project, "default"))
            raise ConfigurationError(f"unknown agent {name!r} in project {project!r}; known: {known}")
        return agent

    def find(self, name: str, project: str = "default") -> AgentDefinition | None:
        """The agent as :meth:`get` finds it, or None."""
        try:
            return self.get(name, project)
        except ConfigurationError:
            return None

    def all(self) -> list[AgentDefinition]:
        """Every registered agent, of every project."""
        return list(self._agents.values())
