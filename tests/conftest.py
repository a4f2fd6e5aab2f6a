"""Shared fixtures: one real engine per test module (zygote, seccomp, namespaces and all)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from a2e.caps.tools.client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.engine.cluster.loopback import stay_on_loopback
from tests.hostile_plugin import HostileTools

stay_on_loopback()  # before any test imports Ray; the processes it starts inherit it
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
    client = engine.connect(client_name="pytest")
    yield ToolAPI(client)
    client.close()
