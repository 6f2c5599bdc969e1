"""``use_skill``: read the deployment's skills directory and hand one skill's instructions to the model.

The directory is read on every call (it is small, and an edited skill should apply to the next call without
a worker restart). Files that fail to parse are skipped, not fatal: one bad skill must not hide the others;
they are logged.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from agent_tools._errors import ToolFailure
from agent_tools.activities._context import BuiltinContext, ToolImpl
from agent_tools.contracts._skills import Skill, SkillError, UseSkillArgs, parse_skill, render_catalog, render_skill

log = logging.getLogger(__name__)

_MAX_FILE_BYTES = 1_000_000


def load_skills(directory: Path) -> list[Skill]:
    """Every skill in ``directory``: ``<name>.md`` files and ``<name>/SKILL.md`` folders, sorted by name.

    When two files claim the same name, the first in path order wins and the other is logged.
    """
    if not directory.is_dir():
        return []
    candidates: list[tuple[Path, str]] = []
    for path in sorted(directory.iterdir()):
        if path.is_file() and path.suffix.lower() == ".md" and path.name.upper() != "README.MD":
            candidates.append((path, path.stem))
        elif path.is_dir() and (path / "SKILL.md").is_file():
            candidates.append((path / "SKILL.md", path.name))
    skills: dict[str, Skill] = {}
    for path, default_name in candidates:
        try:
            if path.stat().st_size > _MAX_FILE_BYTES:
                raise SkillError(f"{path}: larger than {_MAX_FILE_BYTES} bytes")
            skill = parse_skill(path.read_text(encoding="utf-8"), default_name=default_name.lower(), source=str(path))
        except (OSError, UnicodeDecodeError, SkillError) as exc:
            log.warning("skipping skill file %s: %s", path, exc)
            continue
        if skill.name in skills:
            log.warning("skill %r in %s is already defined in %s", skill.name, path, skills[skill.name].source)
            continue
        skills[skill.name] = skill
    return sorted(skills.values(), key=lambda s: s.name)


def skills_dir(ctx: BuiltinContext) -> Path:
    return ctx.services.settings.skills.dir


async def visible_skills(directory: Path, agent: str) -> list[Skill]:
    """The skills an agent may load."""
    return [s for s in await asyncio.to_thread(load_skills, directory) if s.visible_to(agent)]


async def use_skill(args: UseSkillArgs, ctx: BuiltinContext) -> str:
    skills = await visible_skills(skills_dir(ctx), ctx.session.agent)
    wanted = args.name.strip().lower()
    for skill in skills:
        if skill.name == wanted:
            return render_skill(skill)
    raise ToolFailure(
        f"Unknown skill {args.name!r}. {render_catalog(skills)}",
        data={"available": [s.name for s in skills]},
    )


IMPLEMENTATIONS: dict[str, ToolImpl] = {"use_skill": use_skill}
