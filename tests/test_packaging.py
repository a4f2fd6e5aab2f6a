"""What the install puts on ``sys.path``, and that it cannot drift from the tree: every folder of
modules is a regular package listed in ``pyproject.toml``, the built wheel holds exactly the
tree's modules, and every third-party module the code and the tests import is a declared
dependency. Nothing here is a list to keep up to date by hand."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
FOLDERS = {"a2e": "a2e", "engine": "a2e_engine.engine", "sandbox": "a2e_engine.sandbox",
           "tools": "a2e_engine.tools", "benchmarks": "a2e_engine.benchmarks"}  # fmt: skip
#: Our own top-level names: never a third party's.
FIRST_PARTY = {"a2e", "a2e_engine", "tests"}
#: What the suite's own runner sets (.ci/test) when the package under test is a wheel installed
#: in a virtual environment rather than this checkout.
INSTALLED = os.environ.get("A2E_TEST_INSTALLED") == "1"


def _modules_in(folder: str) -> list[Path]:
    """The modules of a package folder: every ``.py`` but the scripts an ``assets/`` folder ships
    as data (sent into the sandbox, never imported)."""
    return [path for path in (ROOT / folder).rglob("*.py") if "assets" not in path.parts]


def _source_folders() -> dict[Path, str]:
    """Every folder under a package folder that holds a module, or a folder that does, by the
    package name it must install as."""
    found: dict[Path, str] = {}
    for folder, name in FOLDERS.items():
        for module in _modules_in(folder):
            parent = module.parent
            while True:
                parts = parent.relative_to(ROOT / folder).parts
                found[parent] = ".".join((name, *parts))
                if not parts:
                    break
                parent = parent.parent
    return found


def _source_modules() -> set[str]:
    modules = set()
    for folder, name in FOLDERS.items():
        for module in _modules_in(folder):
            parts = module.relative_to(ROOT / folder).with_suffix("").parts
            modules.add(".".join((name, *parts)))
    return modules


def test_every_folder_of_modules_is_a_regular_package_listed_in_pyproject() -> None:
    """A folder without ``__init__.py`` imports from a checkout (a namespace package) and is
    left out of the wheel: the install would lack it while every test of the tree passes."""
    folders = _source_folders()
    plain = sorted(
        str(path.relative_to(ROOT)) for path in folders if not (path / "__init__.py").exists()
    )
    assert not plain, f"folders of modules without __init__.py: {plain}"
    setuptools = PYPROJECT["tool"]["setuptools"]
    assert sorted(setuptools["packages"]) == sorted(folders.values())
    mapped = {name: folder for folder, name in FOLDERS.items() if name != folder}
    assert setuptools["package-dir"] == mapped


def test_the_built_wheel_holds_exactly_the_trees_modules(tmp_path: Path) -> None:
    """Built from a copy of the tree, as ``pip install .`` builds it."""
    source = tmp_path / "source"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in (*FOLDERS, "a2e_engine"):
        shutil.copytree(ROOT / folder, source / folder, symlinks=True, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assets = {name for name in names if "/assets/" in name}
    modules = {n.removesuffix(".py").replace("/", ".") for n in names if n.endswith(".py")} - {
        n.removesuffix(".py").replace("/", ".") for n in assets
    }
    assert modules == _source_modules()
    # Beyond modules, only the data the package declares: the engine's own LuaUnit, its Kotlin
    # script launcher, its C# assertion listener with the configuration that names it, and
    # grading's assets (testlib.h for checkers and interactors, LiveCodeBench's judge).
    others = sorted(
        n for n in names if (not n.endswith(".py") or n in assets) and ".dist-info/" not in n
    )
    data = sorted(
        f"a2e_engine/tools/{path.relative_to(ROOT / 'tools')}"
        for pattern in (
            "lua/*.lua",
            "kotlin/*.kt",
            "csharp/*.cs",
            "csharp/*.config",
            "grading/assets/*",
        )
        for path in (ROOT / "tools").glob(pattern)
    )
    assert others == data and len(data) == 6, others


def _requirement_name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match, requirement
    return _normalized(match.group())


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> set[str]:
    """Every distribution the project names: its dependencies and every extra's."""
    project = PYPROJECT["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    own = _normalized(project["name"])
    return {_requirement_name(r) for r in requirements} - {own}


def _optional(handlers: list[ast.ExceptHandler]) -> bool:
    """``try: import x`` / ``except ImportError``: code that works without ``x``."""
    for handler in handlers:
        caught = handler.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(
            isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
            for n in names
        ):
            return True
    return False


class _Imports(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: set[str] = set()
        self.optional = 0

    def visit_Try(self, node: ast.Try) -> None:
        optional = _optional(node.handlers)
        self.optional += optional
        for statement in node.body:
            self.visit(statement)
        self.optional -= optional
        for part in (*node.handlers, *node.orelse, *node.finalbody):
            self.visit(part)

    def visit_Import(self, node: ast.Import) -> None:
        if not self.optional:
            self.found.update(alias.name.split(".")[0] for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not self.optional and node.level == 0 and node.module:
            self.found.add(node.module.split(".")[0])


def _third_party_imports() -> dict[str, list[str]]:
    """Top-level module -> the files that import it, outside ``try ... except ImportError``."""
    importers: dict[str, list[str]] = {}
    for folder in (*FOLDERS, "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            visitor = _Imports()
            visitor.visit(ast.parse(path.read_text()))
            for top in visitor.found - FIRST_PARTY - set(sys.stdlib_module_names):
                importers.setdefault(top, []).append(str(path.relative_to(ROOT)))
    return importers


def test_every_third_party_import_is_a_declared_dependency() -> None:
    """Imported directly, declared directly: a package that is only here because another one
    needs it today is gone the day that one stops needing it."""
    providers = importlib.metadata.packages_distributions()
    declared = _declared()
    wrong = []
    for module, files in sorted(_third_party_imports().items()):
        names = {_normalized(d) for d in providers.get(module, [])}
        if not names & declared:
            given = f"installed from {sorted(names)}" if names else "not installed"
            wrong.append(f"{module} ({given}), imported by {', '.join(files)}")
    assert not wrong, "imports no declared dependency provides:\n" + "\n".join(wrong)


def test_the_checkout_has_the_installed_names_as_links() -> None:
    """a2e_engine/ links each installed name to its folder, so that the checkout imports (and
    mypy reads) the code under the names it is installed with."""
    links = {p.name: p for p in (ROOT / "a2e_engine").iterdir()}
    assert set(links) == {name.split(".")[1] for name in FOLDERS.values() if "." in name}
    for name, link in links.items():
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve()
        assert not link.readlink().is_absolute()  # the checkout can move


def test_the_installed_packages_import_from_anywhere_and_nothing_generic(tmp_path: Path) -> None:
    code = (
        "import sys, a2e, a2e_engine.engine, a2e_engine.sandbox._zygote, a2e_engine.tools\n"
        "import a2e_engine.engine.cli, a2e_engine.benchmarks.bench\n"
        "generic = [m for m in sys.modules if m.split('.')[0] in "
        "('engine', 'sandbox', 'tools', 'benchmarks')]\n"
        "print(a2e_engine.engine.Engine.__module__, generic)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["a2e_engine.engine._engine", "[]"]


@pytest.mark.skipif(not INSTALLED, reason="the suite runs on this checkout (editable install)")
def test_the_suite_imports_the_installed_wheel_not_the_checkout() -> None:
    """Under .ci/test every module comes from the virtual environment, in this process and in
    the ones the tests start, so that a file the wheel lacks fails a test."""
    import a2e
    import a2e_engine.engine

    for module in (a2e, a2e_engine.engine):
        assert not Path(module.__file__ or "").resolve().is_relative_to(ROOT), module.__file__
    code = "import a2e_engine.engine.mcp._stdio as m, a2e; print(m.__file__); print(a2e.__file__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for path in out.stdout.split():
        assert not Path(path).resolve().is_relative_to(ROOT), path
    direct_url = importlib.metadata.distribution("a2e-engine").read_text("direct_url.json")
    assert not json.loads(direct_url or "{}").get("dir_info", {}).get("editable"), direct_url
