"""codai's ``use_skill`` contract: load one of "your skills" into the loop.

A skill is a Markdown file of instructions with a small YAML front matter::

    ---
    name: release-notes
    description: Write release notes from a list of merged pull requests
    agents: [writer]          # optional: only these agents see it
    ---
    1. Group the changes by ...

Files live in the skills directory (``skills/`` in the working directory by default; see
:class:`SkillsSettings`, ``settings.skills``), either as ``<name>.md`` or ``<name>/SKILL.md``. The tool
returns the instructions as plain text (never spilled: the model needs all of it); an unknown name is an
error that lists the skills the agent can use.

Parsing here is pure (text in, model out); the activity reads the files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agent_tools._catalog.spec import CODAI_EXECUTED, ToolSpec
from agent_tools._errors import InvalidInput

SKILL_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")
MAX_SKILL_CHARS = 50_000
_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class SkillError(InvalidInput):
    """A skill file that cannot be used (bad front matter or name)."""


class Skill(BaseModel):
    name: str
    description: str = ""
    instructions: str
    agents: list[str] | None = Field(default=None, description="Agents that see it; None: every agent")
    source: str = Field(default="", description="File it came from")

    def visible_to(self, agent: str) -> bool:
        return self.agents is None or agent in self.agents


def parse_skill(text: str, *, default_name: str, source: str = "") -> Skill:
    """A skill from its file text; the name defaults to the file (or folder) name."""
    meta: dict[str, Any] = {}
    body = text
    m = _FRONT_MATTER.match(text)
    if m:
        import yaml  # only skills with front matter need the parser; settings import this module

        try:
            loaded = yaml.safe_load(m.group(1)) or {}
        except yaml.YAMLError as exc:
            raise SkillError(f"{source or default_name}: front matter is not valid YAML: {exc}") from exc
        if not isinstance(loaded, dict):
            raise SkillError(f"{source or default_name}: front matter must be a mapping")
        meta = loaded
        body = text[m.end() :]
    name = str(meta.get("name") or default_name).strip().lower()
    if not SKILL_NAME.match(name):
        raise SkillError(f"{source or default_name}: skill name {name!r} must match {SKILL_NAME.pattern}")
    agents = meta.get("agents")
    if agents is not None and not (isinstance(agents, list) and all(isinstance(a, str) for a in agents)):
        raise SkillError(f"{source or default_name}: 'agents' must be a list of agent names")
    description = " ".join(str(meta.get("description") or "").split())
    return Skill(name=name, description=description, instructions=body.strip(), agents=agents, source=source)


def render_skill(skill: Skill) -> str:
    """What the model reads: a header, then the instructions (capped)."""
    body = skill.instructions
    if len(body) > MAX_SKILL_CHARS:
        body = body[:MAX_SKILL_CHARS] + f"\n\n[skill truncated at {MAX_SKILL_CHARS} characters]"
    head = f"SKILL {skill.name}" + (f": {skill.description}" if skill.description else "")
    return f"{head}\nFollow these instructions for the rest of the task.\n\n{body}"


def render_catalog(skills: list[Skill]) -> str:
    """The list an unknown-name error shows."""
    if not skills:
        return "No skills are available."
    lines = [f"- {s.name}" + (f": {s.description}" if s.description else "") for s in skills]
    return "Available skills:\n" + "\n".join(lines)


class UseSkillArgs(BaseModel):
    name: str = Field(min_length=1, max_length=64, description="The skill's name")


TOOLS: list[ToolSpec] = [
    ToolSpec(
        name="use_skill",
        read_only=True,
        level=CODAI_EXECUTED,
        description=(
            "Load one of your skills: stored instructions for a kind of task (a procedure, a format, a "
            "checklist). Returns the skill's instructions; follow them. Only useful when at least one skill "
            "is available: calling it with a name that does not exist returns the list of available skills."
        ),
        args_model=UseSkillArgs,
        capability="skills",
        spill_exempt=True,
        summary_arg="name",
    ),
]


class SkillsSettings(BaseModel):
    """The skills section of :class:`agent_tools.Settings` (``settings.skills``; environment
    ``AGENT_TOOLS_SKILLS__DIR``)."""

    dir: Path = Field(
        default=Path("skills"), description="The skills directory; a relative path is from the worker's working dir"
    )
