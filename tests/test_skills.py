"""use_skill: parsing, the skills directory, the tool contract, and a real session loading a skill."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agent_tools._activity_io import SessionRef
from agent_tools._agents import AgentDefinition
from agent_tools._errors import ToolFailure
from agent_tools._session import SessionStatus
from agent_tools._settings import Settings
from agent_tools.activities._context import BuiltinContext
from agent_tools.activities._skills import load_skills, use_skill
from agent_tools.contracts._skills import TOOLS, SkillError, SkillsSettings, UseSkillArgs, parse_skill, render_skill
from tests.support.fixture_types import Script, WorkerFor

SKILLS = Path(__file__).parent / "fixtures" / "skills"


def ctx(agent: str = "assistant", directory: Path = SKILLS) -> BuiltinContext:
    # use_skill only reads ``services.settings.skills``; a namespace stands in for the worker's services.
    services = SimpleNamespace(settings=Settings(skills=SkillsSettings(dir=directory)))
    ref = SessionRef(
        session_id="s1", run_id="r1", agent=agent, organisation="o", project="p", user="u", root_id="s1", model="m"
    )
    return BuiltinContext(services=cast(Any, services), session=ref, call_id="c1", tool="use_skill")


def test_parse_front_matter_and_defaults() -> None:
    skill = parse_skill("---\nname: Alpha\ndescription: |\n  Two\n  lines\n---\nDo X.\n", default_name="file")
    assert (skill.name, skill.description, skill.instructions, skill.agents) == ("alpha", "Two lines", "Do X.", None)
    bare = parse_skill("Just instructions", default_name="from-file")
    assert bare.name == "from-file" and bare.instructions == "Just instructions" and bare.description == ""
    with pytest.raises(SkillError, match="must match"):
        parse_skill("---\nname: has spaces\n---\nx", default_name="f")
    with pytest.raises(SkillError, match="not valid YAML"):
        parse_skill("---\nname: [x\n---\nx", default_name="f")
    with pytest.raises(SkillError, match="agents"):
        parse_skill("---\nagents: writer\n---\nx", default_name="f")


def test_render_caps_long_skills() -> None:
    text = render_skill(parse_skill("x" * 60_000, default_name="big"))
    assert text.startswith("SKILL big\n") and text.endswith("[skill truncated at 50000 characters]")


def test_directory_layouts_and_bad_files_are_skipped() -> None:
    names = [s.name for s in load_skills(SKILLS)]
    # <name>.md and <name>/SKILL.md; README.md is not a skill; broken.md is skipped, not fatal.
    assert names == ["internal-only", "release-notes", "sql-review"]
    assert load_skills(SKILLS / "missing") == []


def test_duplicate_names_keep_the_first(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\nname: same\n---\nfirst")
    (tmp_path / "b.md").write_text("---\nname: same\n---\nsecond")
    [only] = load_skills(tmp_path)
    assert only.instructions == "first"


async def test_use_skill_returns_the_instructions() -> None:
    text = await use_skill(UseSkillArgs(name="release-notes"), ctx())
    assert text.startswith("SKILL release-notes: Write release notes")
    assert "RELEASE-NOTES-SKILL-V1" in text and "---" not in text
    assert "SQL-REVIEW-SKILL" in await use_skill(UseSkillArgs(name="SQL-Review"), ctx())


async def test_unknown_skill_lists_the_available_ones() -> None:
    with pytest.raises(ToolFailure) as err:
        await use_skill(UseSkillArgs(name="nope"), ctx())
    assert "Unknown skill 'nope'" in str(err.value)
    assert "- release-notes: Write release notes" in str(err.value)
    assert err.value.data == {"available": ["release-notes", "sql-review"]}  # internal-only is not visible


async def test_agent_restricted_skills() -> None:
    with pytest.raises(ToolFailure):
        await use_skill(UseSkillArgs(name="internal-only"), ctx(agent="assistant"))
    assert "Writer-only" in await use_skill(UseSkillArgs(name="internal-only"), ctx(agent="writer"))


async def test_no_skills_at_all(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match="No skills are available"):
        await use_skill(UseSkillArgs(name="x"), ctx(directory=tmp_path))


def test_contract() -> None:
    spec = TOOLS[0]
    assert spec.name == "use_skill" and spec.spill_exempt and spec.runs_in == "activity"
    assert "at least one skill" in spec.description
    assert spec.parameters_schema()["required"] == ["name"]


async def test_use_skill_in_a_session(settings: Settings, script: Script, worker_for: WorkerFor) -> None:
    settings.skills = SkillsSettings(dir=SKILLS)
    settings.model = script(
        [
            {
                "tool_calls": [
                    {"name": "use_skill", "arguments": {"name": "release-notes"}},
                    {"name": "use_skill", "arguments": {"name": "missing"}},
                ]
            },
            {"say": "done"},
        ]
    )
    agent = AgentDefinition(name="assistant", profile=None, tools=["use_skill"])
    async with worker_for(agents=[agent]) as client:
        handle = await client.start_session("write the notes")
        assert (await handle.result()).status == SessionStatus.completed
        tool_msgs = [e.content for e in await handle.transcript() if e.role == "tool"]
        assert "RELEASE-NOTES-SKILL-V1" in tool_msgs[0]
        assert "Unknown skill 'missing'" in tool_msgs[1] and "sql-review" in tool_msgs[1]
