"""What the install puts on ``sys.path``: ``a2e`` and ``a2e_engine``, nothing named ``engine``,
``sandbox``, ``tools`` or ``benchmarks`` that could clash with another project's packages."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"a2e": "a2e", "engine": "a2e_engine.engine", "sandbox": "a2e_engine.sandbox",
           "tools": "a2e_engine.tools", "benchmarks": "a2e_engine.benchmarks"}  # fmt: skip


def test_every_package_folder_is_installed_under_its_name() -> None:
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    expected = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            expected.add(".".join((name, *parts)))
    assert set(setuptools["packages"]) == expected
    mapped = {name: folder for folder, name in FOLDERS.items() if name != folder}
    assert setuptools["package-dir"] == mapped


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
        "import sys, a2e, a2e_engine.engine, a2e_engine.sandbox.zygote, a2e_engine.tools\n"
        "import a2e_engine.engine.cli, a2e_engine.benchmarks.bench\n"
        "generic = [m for m in sys.modules if m.split('.')[0] in "
        "('engine', 'sandbox', 'tools', 'benchmarks')]\n"
        "print(a2e_engine.engine.Engine.__module__, generic)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["a2e_engine.engine.engine", "[]"]
