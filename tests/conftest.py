"""Shared fixtures: one real engine per test module (zygote, seccomp, namespaces and all), and
one above a sandbox without processes (``fake_engine``, ``fake_tools``: tests/fakes.py)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.engine.cluster._loopback import stay_on_loopback
from tests.fakes import FakeEngine
from tests.hostile_plugin import HostileTools

stay_on_loopback()  # before any test imports Ray; the processes it starts inherit it
ROOT = Path(__file__).resolve().parents[1]


def _tests_importable_alone() -> None:
    """Processes the tests start load plugins of ``tests`` by name (``--plugin
    tests.cli_plugins:X``) but must import the package under test from where it is installed
    (.ci/test: a wheel), never from this checkout: their ``PYTHONPATH`` gets a folder that holds
    only a link to ``tests/``. Made before any test starts a process; gone with this one."""
    folder = tempfile.mkdtemp(prefix="a2e-tests-path-")
    os.symlink(ROOT / "tests", os.path.join(folder, "tests"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    inherited = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (folder, inherited)))


_tests_importable_alone()
SECRET = "a2e-test-secret-7f3d"
os.environ["A2E_TEST_SECRET"] = SECRET  # set before any engine starts: it must never leak


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    audit = tmp_path_factory.mktemp("audit") / "audit.jsonl"
    config = EngineConfig(
        max_workers=4, prefork=2, read_roots=("/etc",), audit_path=str(audit), max_timeout=60
    )
    with Engine(plugins=[HostileTools()], config=config) as running:
        yield running


@pytest.fixture
def tools(engine: Engine) -> Iterator[ToolAPI]:
    yield from _connected(engine)


def _connected(engine: Engine) -> Iterator[ToolAPI]:
    """A client of ``engine``'s for one test, closed after it."""
    client = engine.connect(client_name="pytest")
    yield ToolAPI(client)
    client.close()


@pytest.fixture(scope="module")
def fake_engine() -> Iterator[Engine]:
    """The engine above a sandbox without processes (tests/fakes.py), for what real workers
    would prove nothing more about: the connection, the call, events, refusals."""
    with FakeEngine(plugins=[HostileTools()], config=EngineConfig(max_workers=4)) as running:
        yield running


@pytest.fixture
def fake_tools(fake_engine: Engine) -> Iterator[ToolAPI]:
    yield from _connected(fake_engine)
