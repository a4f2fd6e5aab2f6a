"""Third-party plugins (``--plugin``, the ``a2e.tools`` entry point, ``[[plugins]]``) and the
TOML configuration file, through the ``a2e`` command as a user runs it."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from a2e_engine.engine._config_file import ConfigError, parse_config
from a2e_engine.sandbox._limits import Limits

GREETER = """
from a2e.caps.tools._models import ToolDefinition
from a2e.caps.tools._plugin import ToolPlugin


class Greeter(ToolPlugin):
    name = "greeter"

    def __init__(self, greeting: str = "hello") -> None:
        super().__init__()
        if not isinstance(greeting, str):
            raise ValueError("greeting must be a string")
        self.greeting = greeting

    def _list_tools(self):
        return [ToolDefinition(name="greet", description="says its greeting")]

    def _execute_tool(self, tool_name, arguments):
        return {"said": self.greeting}
"""


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A directory on PYTHONPATH with a plugin module and an installed distribution's metadata
    declaring it (and a broken one) under the a2e.tools entry point."""
    (tmp_path / "greeter_mod.py").write_text(GREETER)
    dist = tmp_path / "a2e_greeter-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: a2e-greeter\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[a2e.tools]\ngreeter = greeter_mod:Greeter\nbroken = no_such_module_xyz:Thing\n"
    )
    return tmp_path


def a2e(site: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", *args, "--prefork", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_entry_point_plugins_load_and_a_broken_one_is_skipped(site: Path) -> None:
    proc = a2e(site, "call", "greet", "--json", "{}")
    assert json.loads(proc.stdout)["data"] == {"said": "hello"}
    assert "entry point broken (no_such_module_xyz:Thing) skipped" in proc.stderr
    listed = a2e(site, "list", "--json", "--no-entry-points").stdout
    assert "greet" not in {tool["name"] for tool in json.loads(listed)}


def test_the_config_file_configures_engine_tools_and_plugins(site: Path) -> None:
    config = site / "a2e.toml"
    config.write_text(
        "[engine]\nmax_timeout = 30\n[engine.limits]\nmemory_mb = 512\ntmp_mb = 64\n"
        '[tools.greeter]\ngreeting = "hi from the file"\n'
    )
    out = json.loads(a2e(site, "call", "greet", "--json", "{}", "--config", str(config)).stdout)
    assert out["data"] == {"said": "hi from the file"}
    doctor = json.loads(a2e(site, "doctor", "--json", "--config", str(config)).stdout)
    assert doctor["limits"]["memory_mb"] == 512
    flag = json.loads(
        a2e(site, "doctor", "--json", "--config", str(config), "--memory-mb", "768").stdout
    )
    assert flag["limits"]["memory_mb"] == 768  # a flag given overrides the file
    assert flag["limits"]["tmp_mb"] == 64  # and leaves the rest of the file's part


def test_plugins_by_spec_from_the_file_and_the_flag(site: Path) -> None:
    config = site / "plugins.toml"
    config.write_text('[[plugins]]\nspec = "greeter_mod:Greeter"\nsettings = { greeting = "yo" }\n')
    out = a2e(site, "call", "greet", "--json", "{}", "--config", str(config), "--no-entry-points")
    assert json.loads(out.stdout)["data"] == {"said": "yo"}
    proc = a2e(site, "list", "--plugin", "greeter_mod:Nope", check=False)
    assert proc.returncode != 0 and "'greeter_mod:Nope' is not a ToolPlugin class" in proc.stderr


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        (
            '[tools.greeter]\ngreting = "x"\n',
            "tools.greeter.greting: unknown setting; known: greeting",
        ),
        ("[tools.greeter]\ngreeting = 3\n", "tools.greeter: greeting must be a string"),
        ("[tools.nothing]\nx = 1\n", "tools.nothing: no built-in or installed plugin"),
        (
            "[engine]\nmax_workers = 'four'\n",
            "engine.max_workers: input should be a valid integer, got 'four'",
        ),
        ("[engine]\nmax_workers = 0\n", "max_workers must be at least 1 and prefork at least 0"),
        ("[engine\n", "not valid TOML"),
    ],
)
def test_config_errors_name_the_key(site: Path, toml: str, message: str) -> None:
    config = site / "bad.toml"
    config.write_text(toml)
    proc = a2e(site, "list", "--config", str(config), check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr


def test_config_parsing_errors_without_an_engine() -> None:
    cases: dict[str, dict[str, Any]] = {
        "engine.limits.memroy: unknown key": {"engine": {"limits": {"memroy": 1}}},
        "engine.landlock: set it in [engine.isolation] now": {"engine": {"landlock": False}},
        "engine.max_pending_calls: set it in [engine.admission] now": {
            "engine": {"max_pending_calls": 5}
        },
        "engine.read_roots: input should be a valid array": {"engine": {"read_roots": "/etc"}},
        "engine.isolation.uid_range[1]: field required": {
            "engine": {"isolation": {"uid_range": [1]}}
        },
        "engine.limits.memory_mb: must be a positive integer, got 0": {
            "engine": {"limits": {"memory_mb": 0}}
        },
        # Strict: text of digits is not a number, 1 is not a flag, a float is not a count.
        "engine.prefork: input should be a valid integer, got '2'": {"engine": {"prefork": "2"}},
        "engine.isolation.landlock: input should be a valid boolean, got 1": {
            "engine": {"isolation": {"landlock": 1}}
        },
        "engine.max_timeout: input should be a valid integer, got 2.5": {
            "engine": {"max_timeout": 2.5}
        },
        "engine.token: a date or time is not a setting": {
            "engine": {"token": datetime.date(2026, 1, 1)}
        },
        "tools.http.allow[1]: a date or time is not a setting": {
            "tools": {"http": {"allow": ["x", datetime.time(1, 2)]}}
        },
        "engine.tool_settings: set tools in": {"engine": {"tool_settings": {}}},
        "engine: input should be an object, got 3": {"engine": 3},
        "plugins[0].extra: unknown key; known: spec, settings": {
            "plugins": [{"spec": "a:B", "extra": 1}]
        },
        "plugins[0].spec: expected 'module:Class'": {"plugins": [{"spec": "x"}]},
        "toolz: unknown section": {"toolz": {}},
        "policy.alow: unknown key; known: allow, deny": {"policy": {"alow": ["x"]}},
        "policy.deny: input should be a valid array": {"policy": {"deny": "run_shell"}},
        "^engine.resident.limit: input should be a valid integer": {
            "engine": {"resident": {"limit": "x"}}
        },
        "engine.resident: resident workers: the limit must be >= 0": {
            "engine": {"resident": {"limit": -1}}
        },
    }
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    cases["nested too deeply to be a configuration"] = {"tools": {"http": {"allow": deep}}}
    cases[r"engine.read_roots: input should be a valid array, got 'aaaa.*\.\.\.$"] = {
        "engine": {"read_roots": "a" * 10_000}  # what was given, shortened
    }
    for message, document in cases.items():
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            parse_config(document)
    parsed = parse_config({"engine": {"read_roots": ["/etc"], "limits": {"tmp_mb": 64}}})
    assert parsed.engine.read_roots == ("/etc",) and parsed.engine.limits.tmp_mb == 64
    assert parsed.engine.limits.memory_mb == Limits().memory_mb  # the part's other defaults
    resident = parse_config({"engine": {"resident": {"limit": 2, "idle_s": 5}}}).engine.resident
    assert (resident.limit, resident.idle_s, resident.lifetime_s) == (2, 5.0, 3600.0)
    policy = parse_config({"policy": {"deny": ["run_*"]}}).policy
    assert policy is not None
    assert "denied by policy" in (policy.check(None, "run_shell") or "")  # type: ignore[arg-type]
    assert policy.check(None, "python_eval") is None  # type: ignore[arg-type]
