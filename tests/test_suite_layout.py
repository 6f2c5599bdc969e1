"""The test suite's own layout: shared helpers live in ``tests/support/``, and no test module imports
another test module (nor ``conftest``), so a test file can be moved, split or deleted on its own."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# Scripts run as ``python -m tests.<name>`` (the README and docs/extending.md name them); tests may import
# them, they hold no tests.
SCRIPTS = {"tests.record_histories", "tests.ui_screens"}


def module_name(path: Path) -> str:
    return ".".join(("tests", *path.relative_to(TESTS).with_suffix("").parts)).removesuffix(".__init__")


def imported(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """The ``tests.*`` modules that ``source`` (the text of ``module``) imports, at any depth."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            # ``from tests import test_x`` names a module, not an attribute.
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return {n for n in names if n.startswith("tests.") and not n.startswith("tests.support.")} - {"tests.support"}


def allowed(name: str) -> bool:
    """``from tests.support.x import y`` also yields ``tests.support.x.y``: anything under support is fine."""
    return name in SCRIPTS or name.startswith(tuple(f"{s}." for s in SCRIPTS))


def test_no_test_module_imports_another() -> None:
    offences = [
        f"{path.relative_to(TESTS.parent)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        if "fixtures" not in path.relative_to(TESTS).parts
        for name in sorted(imported(path.read_text(), module_name(path), is_package=path.name == "__init__.py"))
        if not allowed(name)
    ]
    assert not offences, "shared helpers belong in tests/support/:\n" + "\n".join(offences)


def test_the_check_sees_each_form_of_import() -> None:
    forms = {
        "from tests.test_human import x": "tests.test_human",
        "import tests.test_human": "tests.test_human",
        "def f():\n    from tests.conftest import skip_time": "tests.conftest",
        "from tests import test_human": "tests.test_human",
        "from .. import test_human": "tests.test_human",
        "from .test_tools import x": "tests.hostile.test_tools",
    }
    for source, expected in forms.items():
        names = imported(source, "tests.hostile.test_probe")
        assert expected in names and not allowed(expected), (source, names)
    fine = "from tests.support.polling import eventually\nfrom tests.record_histories import HISTORIES"
    assert not {n for n in imported(fine, "tests.test_probe") if not allowed(n)}


def test_every_test_the_fast_lane_leaves_out_exists() -> None:
    """A renamed module or test must not drop out of the slow list unseen (and into the fast lane)."""
    lists = {
        target.id: ast.literal_eval(node.value)
        for node in ast.parse((TESTS / "conftest.py").read_text()).body
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id in {"SLOW_MODULES", "SLOW_TESTS"}
    }
    slow_modules, slow_tests = lists["SLOW_MODULES"], lists["SLOW_TESTS"]
    missing = [m for m in sorted(slow_modules) if not (TESTS / m).is_file()]
    for entry in sorted(slow_tests):
        module, _, name = entry.partition("::")
        path = TESTS / module
        defined = (
            {
                n.name
                for n in ast.walk(ast.parse(path.read_text()))
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            }
            if path.is_file()
            else set()
        )
        if name not in defined:
            missing.append(entry)
    assert not missing, f"named in tests/conftest.py but not found: {missing}"
