"""The plugin hooks the supervisor and the zygote call: ``preload`` (once, before workers are
forked), ``secrets_for`` (this call's worker only) and ``invalid_arguments`` (the refusal's
shape), and what happens when a plugin's hook breaks: the call is refused, the engine goes on."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition, ToolParameter
from a2e.caps.tools._plugin import SandboxProfile, ToolExecutionError, ToolPlugin
from a2e_engine.engine import Engine, EngineConfig

SECRET = "hook-secret-41aa"


class Hooked(ToolPlugin):
    name = "hooked"
    sandbox_profile = SandboxProfile.COMPUTE

    def __init__(self) -> None:
        super().__init__()
        self.preloaded = False

    def preload(self) -> None:
        import tabnanny  # noqa: F401  (any module the tests do not import otherwise)

        self.preloaded = True

    def secrets_for(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, str]:
        mode = arguments.get("mode")
        if mode == "raise":
            raise RuntimeError("the vault is closed")
        if mode == "wrong type":
            return ["not", "a", "dict"]  # type: ignore[return-value]
        if mode == "huge":
            return {"k": "x" * 100_000}
        return {"token": SECRET} if mode == "mine" else {}

    def invalid_arguments(
        self, tool_name: str, arguments: dict[str, Any], problems: list[str]
    ) -> ToolExecutionError:
        if arguments.get("broken_hook"):
            raise RuntimeError("hook bug")
        content = {"error_type": "BadArguments", "problems": problems}
        return ToolExecutionError(json.dumps(content), content)

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="hooked_probe",
                description="reports what the worker sees",
                input_parameters=[
                    ToolParameter(name="mode", type="string", description="", required=True),
                    ToolParameter(name="broken_hook", type="boolean", description=""),
                ],
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        assert self.context is not None
        return {
            "preloaded": self.preloaded,
            "module_inherited": "tabnanny" in sys.modules,
            "secrets": dict(self.context.secrets),
        }


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine(plugins=[Hooked()], builtin_tools=False) as engine:
        api = ToolAPI(engine.connect())
        yield api
        api.client.close()


def probe(tools: ToolAPI, **arguments: Any) -> Any:
    return tools.call(tool_name="hooked_probe", arguments=arguments)


def test_preload_ran_in_the_zygote_before_the_worker_was_forked(tools: ToolAPI) -> None:
    result = probe(tools, mode="none")
    assert result.success, result.error
    assert result.data["preloaded"] is True and result.data["module_inherited"] is True
    assert Hooked().preloaded is False  # not here, in the supervisor


def test_secrets_reach_only_the_call_they_were_given_for(tools: ToolAPI) -> None:
    assert probe(tools, mode="mine").data["secrets"] == {"token": SECRET}
    assert probe(tools, mode="none").data["secrets"] == {}


@pytest.mark.parametrize("mode", ["raise", "wrong type", "huge"])
def test_a_broken_secrets_hook_refuses_the_call_and_nothing_else(tools: ToolAPI, mode: str) -> None:
    result = probe(tools, mode=mode)
    assert not result.success and result.error_code == "tool_error"
    assert "could not prepare the call" in (result.error or "")
    assert "vault" not in (result.error or "")  # the plugin's own words stay in the log
    assert probe(tools, mode="none").success  # the engine goes on


def test_invalid_arguments_take_the_plugins_shape(tools: ToolAPI) -> None:
    result = tools.call(tool_name="hooked_probe", arguments={})
    assert not result.success and result.data["error_type"] == "BadArguments"
    assert json.loads(result.error or "")["problems"] == result.data["problems"]
    broken = tools.call(tool_name="hooked_probe", arguments={"broken_hook": True})
    assert not broken.success and broken.data is None
    assert (broken.error or "").startswith("invalid arguments for hooked_probe: ")


class LeavesADaemon(ToolPlugin):
    """Its preload double-forks a process that outlives it, as a library's helper might."""

    name = "leaves_a_daemon"

    def __init__(self, pid_file: str) -> None:
        super().__init__()
        self.pid_file = pid_file

    def preload(self) -> None:
        import os
        import time

        if os.fork() == 0:
            if os.fork() == 0:
                with open(self.pid_file, "w") as fh:
                    fh.write(str(os.getpid()))
                time.sleep(600)
            os._exit(0)
        os.wait()

    def _list_tools(self) -> list[ToolDefinition]:
        return [ToolDefinition(name="daemon_probe", description="nothing")]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return None


def test_what_a_preload_leaves_running_ends_with_the_zygote(tmp_path: Any) -> None:
    """The subreaper is set before the plugins preload: an orphan of a preload is the
    zygote's, and goes with it, instead of the host's init's, outliving the engine."""
    import psutil

    from tests.waiting import wait_for

    pid_file = tmp_path / "daemon.pid"
    plugin = LeavesADaemon(str(pid_file))
    with Engine(plugins=[plugin], builtin_tools=False, config=EngineConfig(prefork=1)):
        assert wait_for(lambda: pid_file.exists() and pid_file.read_text() != "")
        daemon = psutil.Process(int(pid_file.read_text()))
        assert daemon.is_running()
    daemon.wait(10)  # raises TimeoutExpired if it outlived the engine
