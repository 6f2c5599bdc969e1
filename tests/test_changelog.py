"""The changelog names every workflow patch id in the code, so that whoever upgrades can see which
behaviour each one guards (and a new patch cannot land unlisted)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _patch_ids(root: Path) -> dict[str, str]:
    """Every patch id in the package, by where it is: ``PATCH_*`` constants and literals passed to ``patched``."""
    found: dict[str, str] = {}
    for path in sorted((root / "agent_tools").rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any(n.startswith("PATCH_") for n in names) and isinstance(node.value.value, str):
                    found[node.value.value] = f"{path.relative_to(root)}:{node.lineno}"
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "patched":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found[arg.value] = f"{path.relative_to(root)}:{node.lineno}"
    return found


def test_the_scan_finds_patch_ids(tmp_path: Path) -> None:
    """A scan that found nothing would pass any changelog: it finds both spellings in a module."""
    package = tmp_path / "agent_tools"
    package.mkdir()
    (package / "m.py").write_text('PATCH_X = "x-constant"\nif workflow.patched("x-literal"):\n    pass\n')
    assert set(_patch_ids(tmp_path)) == {"x-constant", "x-literal"}


def test_no_patch_id_predates_the_baseline() -> None:
    """1.0.0 folded every earlier patch into its baseline: none of their ids may come back."""
    folded = {
        "bounded-inputs", "strict-tool-arguments", "prepare-as-local-activity", "continue-as-new-mid-wait",
        "loop-interval-floor", "tool-approvals", "approval-parked-wait", "load-event-local", "inline-event",
        "router-batched-delivery", "lean-start", "lean-start-2", "todo-several-in-progress",
    }  # fmt: skip
    assert folded.isdisjoint(_patch_ids(ROOT)), sorted(folded & set(_patch_ids(ROOT)))


def test_every_patch_id_is_in_the_changelog() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    listed = set(re.findall(r"^- `([a-z0-9-]+)`:", text, flags=re.MULTILINE))
    missing = {pid: where for pid, where in _patch_ids(ROOT).items() if pid not in listed}
    assert missing == {}, f"patch ids the changelog does not list (add each with the change it guards): {missing}"


def test_the_changelog_keeps_its_format() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert text.startswith("# Changelog\n")
    releases = re.findall(r"^## \[([^\]]+)\]", text, flags=re.MULTILINE)
    assert releases, "no release sections"
    assert releases[0] == "Unreleased" or re.fullmatch(r"\d+\.\d+\.\d+", releases[0]), releases
