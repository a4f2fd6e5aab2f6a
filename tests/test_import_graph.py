"""Who imports whom (docs/architecture.md): the protocol (``a2e``) imports nothing of ours,
``sandbox`` nothing of ``engine`` or ``tools``, ``tools`` nothing of ``engine``; nothing imports
``benchmarks`` but its own entry point (``a2e bench``); and no library module imports, through
any chain, a module that imports it back. Read from the source, every import statement
counted, those inside functions and ``TYPE_CHECKING`` blocks too."""

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
#: The one place outside benchmarks that may import it: the command that runs it.
BENCHMARKS_ENTRY = ("a2e_engine.engine.cli", "a2e_engine.benchmarks.bench")


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in PACKAGES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((package, *parts))] = path
    return found


MODULES = _modules()


def _imports(module: str, path: Path) -> set[str]:
    """The modules of ours that ``module`` imports (a name imported from a package that is a
    module of its own counts as that module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
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
    return {name for name in found if name in MODULES and name != module}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


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
        and (module, target) != BENCHMARKS_ENTRY
    ]
    assert wrong == []


def test_no_library_module_imports_itself_back() -> None:
    library = {m: t for m, t in GRAPH.items() if _part(m) != "benchmarks"}
    circles = []
    for start in library:
        seen: set[str] = set()
        todo: list[tuple[str, tuple[str, ...]]] = [(start, (start,))]
        while todo:
            module, path = todo.pop()
            for target in library.get(module, ()):
                if target == start:
                    circles.append(" -> ".join((*path, start)))
                elif target not in seen and _part(target) != "benchmarks":
                    seen.add(target)
                    todo.append((target, (*path, target)))
    assert circles == []


def test_the_graph_is_read_from_every_module() -> None:
    assert _part("a2e_engine.engine.engine") == "engine" and _part("a2e.codec") == "a2e"
    assert "a2e_engine.engine.engine" in GRAPH and "a2e_engine.sandbox.zygote" in GRAPH
    assert "a2e_engine.engine.connection" in GRAPH["a2e_engine.engine.engine"]
    assert "a2e_engine.sandbox.pool" in GRAPH["a2e_engine.engine.calls"]
