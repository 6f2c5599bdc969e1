"""The public faces: ``agent_tools``, ``agent_tools.testing`` and ``agent_tools.contracts``.

Every name they export imports, has a docstring, and so does every public method a public class defines;
the API reference documents only names of these faces.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
FACES = ("agent_tools", "agent_tools.testing", "agent_tools.contracts")


def _face(name: str) -> ModuleType:
    return importlib.import_module(name)


def _exports() -> list[tuple[str, str, Any]]:
    return [(face, name, getattr(_face(face), name)) for face in FACES for name in _face(face).__all__]


def _own_methods(cls: type) -> list[tuple[str, Any]]:
    """The public methods and properties ``cls`` itself defines (pydantic's and the SDK's have their own)."""
    found = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        fn = value.__func__ if isinstance(value, classmethod | staticmethod) else value
        if isinstance(fn, property):
            fn = fn.fget
        if inspect.isfunction(fn):
            found.append((name, fn))
    return found


def test_every_face_has_an_all_of_names_it_defines_or_loads() -> None:
    for face in FACES:
        module = _face(face)
        assert module.__all__, face
        assert len(set(module.__all__)) == len(module.__all__), face
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert missing == [], face


def test_no_public_name_is_also_a_submodule() -> None:
    """Importing ``agent_tools.x`` sets the package's attribute ``x`` to the module, hiding a lazy name ``x``."""
    submodules = {p.stem for p in (ROOT / "agent_tools").iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    assert sorted(submodules & set(_face("agent_tools").__all__)) == []


def test_every_public_name_has_a_docstring() -> None:
    # A constant's docstring is the one below it in its module, which the API reference renders.
    # A type alias (``FunctionDef``) is documented like a constant, by the docstring below it.
    named = [
        (face, name, value)
        for face, name, value in _exports()
        if (inspect.isclass(value) or callable(value)) and typing.get_origin(value) is None
    ]
    assert len(named) > 50
    undocumented = [f"{face}.{name}" for face, name, value in named if not inspect.getdoc(value)]
    assert undocumented == []


def test_every_public_method_of_a_public_class_has_a_docstring() -> None:
    classes = [(face, name, value) for face, name, value in _exports() if inspect.isclass(value)]
    assert {"AgentToolsClient", "SessionHandle", "AgentToolsPlugin"} <= {name for _, name, _ in classes}
    undocumented = [
        f"{face}.{name}.{method}"
        for face, name, cls in classes
        for method, fn in _own_methods(cls)
        # A method that overrides a documented one keeps its contract (a plugin's configure_worker).
        if not (fn.__doc__ or "").strip() and not _documented_upstream(cls, method)
    ]
    assert undocumented == []


def _documented_upstream(cls: type, method: str) -> bool:
    return any((getattr(base, method, None).__doc__ or "").strip() for base in cls.__mro__[1:] if hasattr(base, method))


def test_the_faces_are_lazy() -> None:
    """Importing the package (as a workflow importing a contract does) loads neither the client nor the plugin."""
    import subprocess
    import sys

    code = (
        "import sys, agent_tools, agent_tools.contracts\n"
        "heavy = [m for m in ('agent_tools._client', 'agent_tools._plugin', 'agent_tools.activities', 'temporalio')"
        " if m in sys.modules]\n"
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def _api_names() -> list[str]:
    """Every name the API reference renders: ``::: path`` lines and the members they list."""
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    names: list[str] = []
    for block in re.finditer(r"^::: *(\S+)\n((?:[ \t]+.*\n)*)", text, re.M):
        path, options = block.group(1), block.group(2)
        members = re.search(r"members:\s*\[([^\]]*)\]", options)
        if members:
            names.extend(f"{path}.{m.strip()}" for m in members.group(1).split(",") if m.strip())
        else:
            names.append(path)
    return names


def test_the_api_reference_names_only_public_names() -> None:
    names = _api_names()
    assert len(names) > 30  # the reader found the entries
    wrong = []
    for dotted in names:
        face, _, name = dotted.rpartition(".")
        if face not in FACES or name not in _face(face).__all__:
            wrong.append(dotted)
    assert wrong == []


@pytest.mark.parametrize("face", FACES)
def test_the_api_reference_documents_every_public_name(face: str) -> None:
    documented = {dotted.rpartition(".")[2] for dotted in _api_names() if dotted.rpartition(".")[0] == face}
    assert sorted(set(_face(face).__all__) - documented) == []
