"""Who imports whom (docs/architecture.md): the protocol (``a2e``) imports nothing of ours,
``sandbox`` nothing of ``engine`` or ``tools``, ``tools`` nothing of ``engine``, nothing imports
``benchmarks`` (``a2e bench`` finds it by its entry point); and no module, the benchmarks' and
the packages' ``__init__`` included, imports through any chain a module that imports it back.

Read from the source. Who may import whom counts every import statement, those inside
functions and ``TYPE_CHECKING`` blocks too. Cycles count what runs: every import but those
under ``TYPE_CHECKING``, and, for each, the ``__init__`` of every package above the module
imported, which Python runs first."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Folder -> the package it installs as (pyproject.toml's package-dir).
PACKAGES = {
    "a2e": "a2e",
    "engine": "a2e_engine.engine",
    "sandbox": "a2e_engine.sandbox",
    "tools": "a2e_engine.tools",
    "benchmarks": "a2e_engine.benchmarks",
}
#: For each part, the parts of ours it must never import.
FORBIDDEN = {
    "a2e": {"engine", "sandbox", "tools", "benchmarks"},
    "sandbox": {"engine", "tools", "benchmarks"},
    "tools": {"engine", "benchmarks"},
    "engine": {"benchmarks"},
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            if "assets" in path.parts:  # scripts sent into the sandbox, never imported
                continue
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
    )


def _statements(tree: ast.AST, runtime: bool) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of ``tree``; with ``runtime``, not those under ``TYPE_CHECKING``."""
    found: list[ast.Import | ast.ImportFrom] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        if runtime and _type_checking(node):
            todo.extend(getattr(node, "orelse", []))
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _imports(module: str, path: Path, runtime: bool = False) -> set[str]:
    """The modules of ours that ``module`` imports (a name imported from a package that is a
    module of its own counts as that module); with ``runtime``, those that run, with the
    packages above each."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _statements(ast.parse(path.read_text()), runtime):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        else:
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            # "from package import module" imports that module; the package itself only when
            # a name that is not a module of its own is taken from it.
            submodules = {f"{target}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(target)
    if runtime:
        found |= {
            ".".join(name.split(".")[:depth])
            for name in found
            for depth in range(1, name.count(".") + 1)
        }
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}
RUNTIME = {module: _imports(module, path, runtime=True) for module, path in MODULES.items()}


def _part(module: str) -> str:
    return next(
        folder
        for folder, package in PACKAGES.items()
        if module == package or module.startswith(package + ".")
    )


def test_each_part_imports_only_what_it_may() -> None:
    wrong = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in sorted(targets)
        if _part(target) in FORBIDDEN.get(_part(module), set())
    ]
    assert wrong == []


#: Packages whose modules only the package's own modules import: the rest of the project takes
#: what its ``__init__`` names.
CLOSED = ("a2e_engine.tools.grading",)


def test_grading_is_used_through_its_package_alone() -> None:
    """``tools/grading`` is one home (issue 54): the supervisor, the service and the other
    tools take what ``a2e_engine.tools.grading`` names, never a module of it."""
    wrong = [
        f"{module} imports {target}"
        for module, targets in GRAPH.items()
        for target in sorted(targets)
        for closed in CLOSED
        if target.startswith(closed + ".") and not module.startswith(closed)
    ]
    assert wrong == []


def test_no_module_imports_itself_back() -> None:
    circles = []
    for start in RUNTIME:
        seen: set[str] = set()
        todo: list[tuple[str, tuple[str, ...]]] = [(start, (start,))]
        while todo:
            module, path = todo.pop()
            for target in RUNTIME.get(module, ()):
                if target == start:
                    circles.append(" -> ".join((*path, start)))
                elif target not in seen:
                    seen.add(target)
                    todo.append((target, (*path, target)))
    assert circles == []


def test_the_graph_is_read_from_every_module() -> None:
    assert _part("a2e_engine.engine._engine") == "engine" and _part("a2e._codec") == "a2e"
    assert "a2e_engine.engine._engine" in GRAPH and "a2e_engine.sandbox._zygote" in GRAPH
    assert "a2e_engine.engine._connection" in GRAPH["a2e_engine.engine._engine"]
    assert "a2e_engine.sandbox._pool" in GRAPH["a2e_engine.engine._calls"]
    # What runs: the packages above a module imported, not what only a type checker reads.
    assert "a2e_engine.sandbox" in RUNTIME["a2e_engine.engine._calls"]
    assert "a2e_engine.engine._engine" in GRAPH["a2e_engine.engine"]
    assert "a2e_engine.engine._engine" not in RUNTIME["a2e_engine.engine"]
