"""The hostile-input suite runs every case twice: with every isolation layer this host allows
(``full``), and with the optional layers switched off (``reduced``: no namespaces, Landlock,
cgroups or uid drop), where the cases expect the weaker guarantee and say so.

``A2E_SECURITY_REPORT=path.json`` writes each case's name, stopping layers and outcome per mode
(``python -m tests.security.report path.json`` renders the table).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig, Isolation
from a2e_engine.sandbox._limits import Limits
from tests.hostile_plugin import HostileNetworkTools, HostileTools
from tests.security.harness import Attacker, Canaries, Sandbox

MODES = {
    "full": {},
    "reduced": {
        "isolation": Isolation(namespaces=False, landlock=False, cgroups=False, identity=False),
        "allow_unprotected_root": True,
        "workspace_mb": 0,
    },
}


@pytest.fixture(scope="package", params=sorted(MODES))
def sandbox(request: pytest.FixtureRequest) -> Iterator[Sandbox]:
    settings: dict[str, Any] = {
        "max_workers": 4,
        "prefork": 2,
        "max_timeout": 60,
        "read_roots": ("/etc",),
        # Distinct sizes, so that each case can tell which limit stopped it.
        "limits": Limits(tmp_mb=64, file_size_mb=96),
        "workspace_mb": 80,
    }
    config = EngineConfig(**{**settings, **MODES[request.param]})
    canaries = Canaries()
    request.addfinalizer(canaries.remove)
    with Engine(plugins=[HostileTools(), HostileNetworkTools()], config=config) as engine:
        victim = ToolAPI(engine.connect(client_name="victim"))
        written = victim.call(
            tool_name="python_eval",
            arguments={
                "code": "import os\nopen('victim.txt', 'w').write('untouched')\n"
                "os.path.abspath('victim.txt')"
            },
        )
        assert written.success, written.error
        yield Sandbox(engine, request.param, victim, written.data["value"], canaries)
        victim.client.close()


@pytest.fixture
def attacker(sandbox: Sandbox) -> Iterator[Attacker]:
    client = sandbox.engine.connect(client_name="attacker")
    yield Attacker(sandbox, client)
    client.close()


_REPORT: list[dict[str, Any]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report = outcome.get_result()
    marker = item.get_closest_marker("attack")
    if marker is None or (report.when != "call" and not report.skipped):
        return
    if report.when == "setup" and not report.skipped:
        return
    mode = item.callspec.params.get("sandbox", "?") if hasattr(item, "callspec") else "?"
    _REPORT.append({"test": item.nodeid, "mode": mode, "outcome": report.outcome, **marker.kwargs})


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("A2E_SECURITY_REPORT")
    if path and _REPORT:
        with open(path, "w") as fh:
            json.dump(_REPORT, fh, indent=1)
