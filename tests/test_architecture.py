"""Layering rules that keep workflows deterministic and the public API small."""

from __future__ import annotations

import ast
from pathlib import Path

import agent_tools

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / "agent_tools" / "workflows"
IO_MODULES = {
    "httpx",
    "sqlalchemy",
    "aiosqlite",
    "asyncpg",
    "socket",
    "requests",
    "urllib.request",
    "subprocess",
    "agent_tools.activities",
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
        str(p.relative_to(ROOT)): sorted(_imports(p) & (IO_MODULES | NONDETERMINISTIC)) for p in WORKFLOWS.rglob("*.py")
    }
    assert {k: v for k, v in offenders.items() if v} == {}


# The pure layer: contracts, the catalog and the shared rules. Plain functions and models, tested without
# Temporal; no I/O, no workflow code, and no environment reading (settings come in through ``Settings``).
PURE = [
    ROOT / "agent_tools" / "contracts",
    ROOT / "agent_tools" / "_catalog",
    ROOT / "agent_tools" / "_boundaries.py",
    ROOT / "agent_tools" / "_errors.py",
    ROOT / "agent_tools" / "_policy.py",
    ROOT / "agent_tools" / "_session_names.py",
]


def _files(paths: list[Path]) -> list[Path]:
    found = [f for p in paths for f in (p.rglob("*.py") if p.is_dir() else [p])]
    assert all(p.exists() for p in paths) and len(found) > len(paths), "the pure layer moved: update PURE"
    return found


def test_pure_modules_import_no_temporal_or_io() -> None:
    offenders = {
        str(p.relative_to(ROOT)): sorted(
            _imports(p) & (IO_MODULES | {"temporalio", "agent_tools.workflows", "pydantic_settings", "os"})
        )
        for p in _files(PURE)
    }
    assert {k: v for k, v in offenders.items() if v} == {}


def test_only_settings_reads_the_environment_into_settings() -> None:
    """One settings tree: no other module builds a settings class from the environment."""
    readers = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "agent_tools").rglob("*.py") if "pydantic_settings" in _imports(p)
    )
    assert readers == ["agent_tools/_settings.py"]


# Calls that differ between a workflow's first run and its replay, or reach outside the workflow. The engine's
# workflows run unsandboxed, so no sandbox catches them at run time: every module they load is checked here.
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
            # The workflow's own clock and ids, directly or through the port a capability part holds.
            if ast.unparse(f.value) not in {"workflow", "self.port"}:
                found.append(f"line {node.lineno}: {ast.unparse(f)}()")
    return found


def test_workflow_code_makes_no_nondeterministic_calls() -> None:
    offenders = {
        str(p.relative_to(ROOT)): calls for p in WORKFLOWS.rglob("*.py") if (calls := _nondeterministic_calls(p))
    }
    assert offenders == {}


def _dispatch_by_name(path: Path) -> list[str]:
    """``getattr``/``setattr`` on ``self``: a method or attribute chosen by a string at run time."""
    return [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in {"getattr", "setattr"}
        and node.args
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "self"
    ]


def test_the_workflow_layer_dispatches_by_no_method_name(tmp_path: Path) -> None:
    """Native tools, resumed waits and handlers are typed bound callables, never a method named by a string."""
    offenders = {str(p.relative_to(ROOT)): found for p in WORKFLOWS.rglob("*.py") if (found := _dispatch_by_name(p))}
    assert offenders == {}
    bad = tmp_path / "bad.py"
    bad.write_text("def f(self, m):\n    return getattr(self, m)(1)\n")
    assert _dispatch_by_name(bad) == ["line 2: getattr(self, m)"]


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


def test_the_package_imports_only_itself_of_the_repository() -> None:
    """One installed name: nothing in agent_tools imports the repository's worker.py, tests or benches, nor
    the old top-level layer packages."""
    foreign = {"worker", "workflows", "activities", "tests", "bench", "examples"}
    offenders = {str(p.relative_to(ROOT)): sorted(_imports(p) & foreign) for p in (ROOT / "agent_tools").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_every_exception_of_the_package_is_an_agent_tools_error() -> None:
    """One error tree: callers can catch AgentToolsError for anything the package raises."""
    import importlib
    import inspect
    import pkgutil

    from agent_tools._errors import AgentToolsError

    outside: list[str] = []
    for info in pkgutil.walk_packages(agent_tools.__path__, "agent_tools."):
        if info.name.startswith("agent_tools._store.migrations.") or info.name.endswith("__main__"):
            # Alembic loads these itself (env.py needs its context); __main__ runs the CLI.
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                if not issubclass(obj, AgentToolsError):
                    outside.append(f"{info.name}.{name}")
    assert outside == []


def test_retry_policies_name_error_classes_that_exist() -> None:
    from agent_tools import _errors as errors

    for name in (*errors.NON_RETRYABLE_MODEL_ERRORS, *errors.NON_RETRYABLE_TOOL_ERRORS):
        assert issubclass(getattr(errors, name), errors.AgentToolsError)


# ---- the engine's workflows run outside the sandbox -------------------------------------------------------
# They are defined with ``sandboxed=False`` (docs/design-notes.md, "Workflow sandbox"), so nothing checks
# them at run time: everything their modules import when loaded is checked here instead, as the workflow
# layer is above.


def _module_path(module: str) -> Path | None:
    base = ROOT / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def _loaded_with(path: Path) -> set[str]:
    """The agent_tools modules that loading ``path`` imports (module level, type-checking imports aside)."""
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.With, ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)

    visit(ast.parse(path.read_text()).body)
    modules: set[str] = set()
    for name in found:
        parts = name.split(".")
        # A package's __init__ runs before its submodule; the top-level one is lazy (its own test).
        modules.update(".".join(parts[:i]) for i in range(2, len(parts) + 1) if parts[0] == "agent_tools")
    return {m for m in modules if _module_path(m) is not None}


def _workflow_closure() -> set[str]:
    from agent_tools.workflows._registry import all_workflows

    todo = [cls.__module__ for cls in all_workflows()]
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            path = _module_path(module)
            assert path is not None, module
            todo.extend(_loaded_with(path))
    return seen


def test_the_engine_workflows_run_unsandboxed() -> None:
    from temporalio.workflow import _Definition

    from agent_tools.workflows._registry import all_workflows

    for cls in all_workflows():
        defn = _Definition.must_from_class(cls)
        assert defn.sandboxed is False, f"{defn.name}: the engine's workflows run unsandboxed"


def test_everything_the_workflows_load_is_deterministic_and_does_no_io() -> None:
    closure = _workflow_closure()
    # The closure really follows imports: the session loads its contracts, and no activity or client code.
    assert {"agent_tools._session", "agent_tools._messages", "agent_tools.workflows._base"} <= closure
    assert not any(m.startswith(("agent_tools.activities", "agent_tools._cli")) for m in closure), sorted(closure)
    assert "agent_tools._client" not in closure and "agent_tools._plugin" not in closure
    offenders = {}
    for module in sorted(closure):
        path = _module_path(module)
        assert path is not None
        found = _nondeterministic_calls(path) + sorted(_imports(path) & (IO_MODULES | NONDETERMINISTIC))
        if found:
            offenders[module] = found
    assert offenders == {}


def test_the_closure_check_follows_imports(tmp_path: Path) -> None:
    mod = tmp_path / "mod.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\nfrom agent_tools._session import SessionState\n"
        "if TYPE_CHECKING:\n    from agent_tools._client import AgentToolsClient\n"
        "with workflow.unsafe.imports_passed_through():\n    import agent_tools._messages\n"
        "def f():\n    from agent_tools._plugin import AgentToolsPlugin\n"
    )
    assert _loaded_with(mod) == {"agent_tools._session", "agent_tools._messages"}


_COMPLETE_MODELS_CHECK = """
import importlib, pkgutil, sys
import agent_tools
from pydantic import BaseModel
for info in pkgutil.walk_packages(agent_tools.__path__, "agent_tools."):
    if not (info.name.startswith("agent_tools._store.migrations.") or info.name.endswith("__main__")):
        importlib.import_module(info.name)
todo, seen = [BaseModel], set()
while todo:
    for sub in todo.pop().__subclasses__():
        if sub not in seen:
            seen.add(sub)
            todo.append(sub)
ours = [c for c in seen if c.__module__.startswith("agent_tools")]
print(len(ours))
for c in sorted(ours, key=lambda c: (c.__module__, c.__qualname__)):
    if not c.__pydantic_complete__:
        print(f"{c.__module__}.{c.__qualname__}")
"""


def test_every_model_is_complete_once_its_module_is_imported() -> None:
    """A model whose annotations name a class its module defines later stays incomplete: pydantic then builds
    its validator again for every ``TypeAdapter`` of it, and the SDK's payload converter (one per workflow
    instance, each with its own adapter cache) did that for every session it ran (SessionInput: 22 ms each,
    and 20-25 KiB of every cached one). Checked in a fresh interpreter: a later use in this process could have completed it."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _COMPLETE_MODELS_CHECK], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split()
    assert int(out[0]) > 200, out[:1]  # the walk found the package's models
    assert out[1:] == [], f"incomplete pydantic models (define what they name first): {out[1:]}"
