"""The package's import graph: no circle among module-level imports, and every import points down the layers.

The layer table below is data: a module belongs to the layer of the longest prefix that names it (the
package itself only to the layer that names it exactly). Imports inside ``if TYPE_CHECKING:`` are not
imports at run time and are left out. Imports inside functions count for the layers (they run) and for
circles too: a module that imports another in a function still depends on it, and two modules that depend
on each other are one module split in two.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "agent_tools"

LAYERS: dict[str, tuple[str, ...]] = {
    # Deterministic orchestration: runs activities by name, imports none.
    "workflows": ("agent_tools.workflows",),
    # Every side effect: providers, web, stores, sandbox, MCP.
    "activities": ("agent_tools.activities",),
    # What a caller's process runs: sessions, the CLI, the web tools' and the humans' client faces.
    "client": (
        "agent_tools._client",
        "agent_tools._cli",
        "agent_tools._progress_poll",
        "agent_tools._progress_resume",
        "agent_tools._web_client",
    ),
    # The HTTP service (events ingress, web tools' endpoints).
    "service": ("agent_tools._service",),
    # What puts the layers together: the package's lazy face, the plugin, the worker, the embedded server.
    "wiring": (
        "agent_tools",
        "agent_tools._plugin",
        "agent_tools._worker",
        "agent_tools._embedded",
        "agent_tools._health",
        "agent_tools._devserver",
        "agent_tools._process_exit",
        "agent_tools.testing",
    ),
    # The I/O engines that activities, the client and the HTTP service all use: the store and the web engine.
    "engines": ("agent_tools._store", "agent_tools._web"),
    # Temporal-facing helpers that both workflows and activities use (search attributes, traces, user tools),
    # and the one place every process builds its Temporal connection.
    "shared": (
        "agent_tools._connection",
        "agent_tools._metrics",
        "agent_tools._search_attributes",
        "agent_tools._session_start",
        "agent_tools._tracing",
        "agent_tools._user_tools",
    ),
    # Pure: contracts and rules, no temporalio, no I/O.
    "pure": (
        "agent_tools.contracts",
        "agent_tools._catalog",
        "agent_tools._activity_io",
        "agent_tools._agents",
        "agent_tools._boundaries",
        "agent_tools._budget",
        "agent_tools._errors",
        "agent_tools._lazy",
        "agent_tools._live_text",
        "agent_tools._messages",
        "agent_tools._model_spec",
        "agent_tools._policy",
        "agent_tools._progress_text",
        "agent_tools._prompt",
        "agent_tools._retry_after",
        "agent_tools._script",
        "agent_tools._session",
        "agent_tools._session_views",
        "agent_tools._session_names",
        "agent_tools._settings",
        "agent_tools._spill",
        "agent_tools._stream_state",
        "agent_tools._version",
    ),
}

# The layers each layer must not import (at module level or inside a function).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "workflows": ("activities", "engines", "client", "service", "wiring"),
    "activities": ("workflows", "client", "service", "wiring"),
    "engines": ("workflows", "activities", "client", "service", "wiring"),
    "shared": ("workflows", "activities", "engines", "client", "service", "wiring"),
    "pure": ("workflows", "activities", "engines", "client", "service", "wiring", "shared"),
    "client": ("workflows", "activities"),
    "service": ("workflows",),
}

# Imports the rules allow although their layers say otherwise, as (importing module prefix, imported module
# prefix). None today.
ALLOWED: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool

    def __str__(self) -> str:
        where = "in a function" if self.in_function else "module level"
        return f"{_path(self.source)}:{self.line} imports {self.target} ({where})"


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _path(module: str) -> str:
    return str(MODULES[module].relative_to(ROOT))


def _is_package(module: str) -> bool:
    return MODULES[module].name == "__init__.py"


def _known(name: str) -> str | None:
    """The module of ours that ``import name`` loads last: ``name`` or its longest prefix that is one."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if (known := _known(alias.name)) is not None:
                yield known
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if _is_package(module) else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    for alias in node.names:
        # ``from package import module`` imports the module; ``from module import name`` the module.
        known = f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else _known(base)
        if known is not None:
            yield known


def _imports_of(module: str) -> list[Import]:
    found: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                for other in child.orelse:
                    visit_node(other, in_function)
            else:
                visit_node(child, in_function)

    def visit_node(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.extend(Import(module, t, node.lineno, in_function) for t in _targets(module, node) if t != module)
        else:
            visit(node, in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(ast.parse(MODULES[module].read_text(encoding="utf-8")), False)
    return found


IMPORTS = [imp for module in MODULES for imp in _imports_of(module)]


def _within(module: str, prefix: str) -> bool:
    return module == prefix or (prefix != "agent_tools" and module.startswith(prefix + "."))


def layer_of(module: str) -> str | None:
    matches = [(len(p), layer) for layer, prefixes in LAYERS.items() for p in prefixes if _within(module, p)]
    return max(matches)[1] if matches else None


def test_the_parser_sees_imports_of_every_kind() -> None:
    """A check that cannot see imports would pass on any graph: these are known to be there."""
    seen = {(i.source, i.target, i.in_function) for i in IMPORTS}
    assert ("agent_tools._client", "agent_tools._store.db", True) in seen  # inside a function
    assert ("agent_tools._session", "agent_tools.contracts._output", False) in seen  # module level
    assert ("agent_tools._service.app", "agent_tools._service.tools_routes", False) in seen  # from package import
    # `if TYPE_CHECKING:` imports are not run: web_client names the store there and imports it in a function.
    web_client = [i for i in IMPORTS if i.source == "agent_tools._web_client" and i.target.endswith("store.db")]
    assert [i.in_function for i in web_client] == [True]


def test_every_module_has_a_layer() -> None:
    assert [m for m in MODULES if layer_of(m) is None] == []


def _circles(imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted, in sorted order (Tarjan)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for imp in imports:
        graph[imp.source].add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while (member := stack.pop()) != module:
                component.append(member)
            component.append(module)
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return sorted(found)


def _shortest_path(imports: list[Import], start: str, goal: str) -> list[Import]:
    """The fewest imports that lead from ``start`` to ``goal`` (breadth first; empty when none do)."""
    came: dict[str, Import | None] = {start: None}
    queue = [start]
    for module in queue:
        for imp in imports:
            if imp.source == module and imp.target not in came:
                came[imp.target] = imp
                queue.append(imp.target)
    path: list[Import] = []
    while goal != start and (step := came.get(goal)) is not None:
        path.insert(0, step)
        goal = step.source
    return path


def test_the_circle_check_finds_a_circle() -> None:
    """A circle of three modules closed by imports inside functions, the way back it reports, and the chain
    left when one import goes, which is no circle."""
    a, b, c = sorted(MODULES)[:3]
    circle = [Import(a, b, 1, False), Import(b, c, 1, True), Import(c, a, 1, True)]
    assert _circles(circle) == [sorted([a, b, c])]
    assert _shortest_path(circle, b, a) == circle[1:]
    assert _circles(circle[:2]) == []


def test_no_circle_counting_imports_inside_functions() -> None:
    """Each circle is reported with its modules and, for each import made inside a function in it, the way
    back that closes it: one of those imports is usually the one to turn around."""
    report = []
    for circle in _circles(IMPORTS):
        members = set(circle)
        inside = [i for i in IMPORTS if i.source in members and i.target in members]
        lines = [f"circle of {len(circle)} modules: {', '.join(circle)}"]
        closing = {(i.source, i.target): i for i in inside if i.in_function} or {
            (inside[0].source, inside[0].target): inside[0]
        }
        for imp in closing.values():
            lines.append(f"  {imp}")
            lines += [f"    back: {step}" for step in _shortest_path(inside, imp.target, imp.source)]
        report.append("\n".join(lines))
    assert not report, "modules that import each other, counting imports inside functions:\n" + "\n".join(report)


def test_imports_point_down_the_layers() -> None:
    wrong = []
    for imp in IMPORTS:
        source, target = layer_of(imp.source), layer_of(imp.target)
        if source is None or target not in FORBIDDEN.get(source, ()):
            continue
        if any(_within(imp.source, s) and _within(imp.target, t) for s, t in ALLOWED):
            continue
        wrong.append(str(imp))
    assert wrong == []


def test_every_allowed_exception_is_still_used() -> None:
    """An exception the code no longer needs goes, so the table says what is true."""
    unused = [(s, t) for s, t in ALLOWED if not any(_within(i.source, s) and _within(i.target, t) for i in IMPORTS)]
    assert unused == []
