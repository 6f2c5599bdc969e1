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


# Calls that differ between a workflow's first run and its replay, or reach outside the workflow. The sandbox
# catches them at run time only in the modules it re-imports; the passed-through helpers are checked here.
_NONDETERMINISTIC_ATTRS = {"now", "utcnow", "today", "time", "time_ns", "monotonic", "perf_counter", "uuid1", "uuid4"}
_OUTSIDE_BUILTINS = {"open", "print", "input", "exec", "eval"}


def _nondeterministic_calls(path: Path) -> list[str]:
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Global):
            found.append(f"line {node.lineno}: global {', '.join(node.names)}")
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in _OUTSIDE_BUILTINS:
            found.append(f"line {node.lineno}: {f.id}()")
        if isinstance(f, ast.Attribute) and f.attr in _NONDETERMINISTIC_ATTRS:
            owner = f.value.id if isinstance(f.value, ast.Name) else ""
            if owner != "workflow":
                found.append(f"line {node.lineno}: {ast.unparse(f)}()")
    return found


def test_workflow_code_makes_no_nondeterministic_calls() -> None:
    offenders = {
        str(p.relative_to(ROOT)): calls
        for p in (ROOT / "workflows").rglob("*.py")
        if (calls := _nondeterministic_calls(p))
    }
    assert offenders == {}


def test_nondeterministic_call_check_catches_the_usual_mistakes(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from datetime import datetime\nimport uuid\n\n"
        "def f():\n    global X\n    print(datetime.now(), uuid.uuid4(), workflow.now())\n"
    )
    assert [c.split(": ", 1)[1] for c in _nondeterministic_calls(bad)] == [
        "global X",
        "print()",
        "datetime.now()",
        "uuid.uuid4()",
    ]


def _defines_workflow(path: Path) -> bool:
    return "@workflow.defn" in path.read_text()


def test_passed_through_workflow_modules_are_helpers_only() -> None:
    from agent_tools.plugin import PASSTHROUGH_MODULES, WORKFLOW_HELPER_MODULES

    assert set(WORKFLOW_HELPER_MODULES) <= set(PASSTHROUGH_MODULES)
    modules = {f"workflows.{p.stem}": p for p in (ROOT / "workflows").glob("*.py") if p.stem != "__init__"}
    for name in WORKFLOW_HELPER_MODULES:
        assert name in modules, f"{name} does not exist"
        assert not _defines_workflow(modules[name]), f"{name} defines a workflow class: it must be re-imported per run"
        helper_imports = _imports(modules[name])
        assert not any(m in helper_imports for m, p in modules.items() if _defines_workflow(p)), (
            f"{name} imports a workflow module"
        )
    # Every other module defines a workflow class (re-imported per run) or is the registry the worker uses.
    rest = set(modules) - set(WORKFLOW_HELPER_MODULES) - {"workflows.registry"}
    assert all(_defines_workflow(modules[m]) for m in rest), sorted(
        m for m in rest if not _defines_workflow(modules[m])
    )
