"""Layering rules that keep workflows deterministic and the public API small."""

from __future__ import annotations

import ast
from pathlib import Path

import agent_tools

ROOT = Path(__file__).resolve().parents[1]
IO_MODULES = {
    "httpx",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "socket",
    "requests",
    "urllib.request",
    "subprocess",
    "activities",
}
NONDETERMINISTIC = {"random", "time", "uuid", "datetime.datetime.now"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                names.update(_prefixes(a.name))
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(_prefixes(node.module))
    return names


def _prefixes(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[: i + 1]) for i in range(len(parts))}


def test_workflows_do_no_io() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(_imports(p) & (IO_MODULES | NONDETERMINISTIC))
        for p in (ROOT / "workflows").rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_pure_contract_modules_import_no_temporal_or_io() -> None:
    for p in (ROOT / "agent_tools" / "tools").rglob("*.py"):
        bad = _imports(p) & (IO_MODULES | {"temporalio", "workflows"})
        assert not bad, f"{p}: {bad}"


def test_public_api() -> None:
    for name in agent_tools.__all__:
        assert getattr(agent_tools, name) is not None
