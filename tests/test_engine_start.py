"""A start that fails at any step leaves nothing behind: no state directory, no mount, no loop
thread, no zygote, no worker; the engine is not half-started, and a second ``start()`` fails
the same way instead of saying it already started."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition, ToolErrorCode
from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine import (
    Engine,
    EngineConfig,
    Isolation,
    IsolationUnavailable,
    Limits,
    LimitTooLow,
)
from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._pool import SandboxUnavailable
from a2e_engine.sandbox._quota import mount_points


class BrokenPreload(ToolPlugin):
    """Its preload (run in the zygote before anything forks) fails: the sandbox cannot start."""

    name = "broken_preload"

    def _list_tools(self) -> list[ToolDefinition]:
        return [ToolDefinition(name="never", description="never runs")]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return None

    def preload(self) -> None:
        raise RuntimeError("this plugin cannot load")


def _children() -> set[int]:
    """Our descendants (the zygotes are started without a resource tracker: there are none
    once every engine has stopped)."""
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "a2e-engine" and t.is_alive()]


def _assert_nothing_left(root: Path, children_before: set[int]) -> None:
    state = root / "state"
    assert not state.exists() or list(state.iterdir()) == []
    assert not any(under(point, str(root)) for point in mount_points())
    assert _engine_threads() == []
    deadline = time.monotonic() + 10  # a zygote that was killed is reaped by its parent
    while _children() - children_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children() - children_before == set()


CASES: dict[str, tuple[Callable[[Path], Engine], type[Exception], str]] = {
    "the audit log is a directory": (
        lambda root: Engine(
            config=EngineConfig(audit_path=str(root), state_dir=str(root / "state"))
        ),
        OSError,
        "cannot open the audit log .*: Is a directory",
    ),
    "the audit log's directory does not exist": (
        lambda root: Engine(
            config=EngineConfig(
                audit_path=str(root / "missing" / "a.jsonl"), state_dir=str(root / "state")
            )
        ),
        OSError,
        "cannot open the audit log .*: No such file or directory",
    ),
    "the state directory cannot be made": (
        lambda root: Engine(config=EngineConfig(state_dir=str(root / "a-file" / "state"))),
        OSError,
        "Not a directory",
    ),
    "the sandbox cannot start": (
        lambda root: Engine(  # its only plugin's zygote starts with it
            plugins=[BrokenPreload()],
            builtin_tools=False,
            config=EngineConfig(state_dir=str(root / "state")),
        ),
        SandboxUnavailable,
        "this plugin cannot load",
    ),
    "a required layer is missing": (
        lambda root: Engine(
            config=EngineConfig(
                state_dir=str(root / "state"),
                isolation=Isolation(namespaces=False),
                require=("pid_namespace",),
            )
        ),
        IsolationUnavailable,
        "pid_namespace",
    ),
    "the memory limit is below what a worker needs": (
        lambda root: Engine(
            config=EngineConfig(state_dir=str(root / "state"), limits=Limits(memory_mb=5))
        ),
        LimitTooLow,
        r"limits.memory_mb is 5 MiB, below what a worker needs here.*at least \d+ MiB",
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_failed_start_undoes_every_step_before_it(
    tmp_path: Path, case: tuple[Callable[[Path], Engine], type[Exception], str]
) -> None:
    make, error, message = case
    (tmp_path / "a-file").write_text("not a directory")
    before = _children()
    engine = make(tmp_path)
    for _ in range(2):  # the second start fails the same way: nothing was left half-started
        with pytest.raises(error, match=message):
            engine.start()
        assert not engine.running and engine.pool is None and engine.state_dir == ""
        _assert_nothing_left(tmp_path, before)
    engine.stop()  # harmless


def test_a_plugin_whose_zygote_cannot_start_fails_its_own_calls_only(tmp_path: Path) -> None:
    """Among other plugins, a broken one costs its own calls a clear error, and nothing
    else: the engine starts, the other plugins' calls run."""
    config = EngineConfig(prefork=1, state_dir=str(tmp_path / "state"))
    with Engine(plugins=[BrokenPreload()], config=config) as engine:
        tools = ToolAPI(engine.connect())
        for _ in range(2):  # the second one fails at once, for the same reason
            broken = tools.call(tool_name="never", arguments={})
            assert not broken.success and broken.error_code == ToolErrorCode.TOOL_ERROR
            assert "this plugin cannot load" in (broken.error or ""), broken.error
        assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
        started = {zygote["name"]: zygote["started"] for zygote in engine.zygotes}
        assert started["python_eval"] and not started["broken_preload"]


class HoldsMemory(ToolPlugin):
    """Its zygote maps 256 MiB (untouched) in preload: every worker it forks starts with it,
    so it needs a far larger ``memory_mb`` than a lean plugin's."""

    name = "holds_memory"

    def _list_tools(self) -> list[ToolDefinition]:
        return [ToolDefinition(name="fat", description="runs in the large zygote")]

    def preload(self) -> None:
        import mmap

        self.held = mmap.mmap(-1, 256 << 20)

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> Any:
        return {"ran": True}


def test_a_zygote_started_later_is_held_to_the_engines_limits(tmp_path: Path) -> None:
    """The engine's start checks the zygote it starts with (a lean one here); a plugin whose
    zygote starts on its first call and needs more memory than ``memory_mb`` gives fails its
    calls with the reason, instead of running workers that cannot start."""
    with pytest.raises(LimitTooLow) as refused:
        Engine(config=EngineConfig(limits=Limits(memory_mb=5))).start()
    least = int(str(refused.value).rsplit("at least ", 1)[1].split()[0])
    config = EngineConfig(
        prefork=1, limits=Limits(memory_mb=least + 32), state_dir=str(tmp_path / "state")
    )
    with Engine(plugins=[HoldsMemory()], config=config) as engine:
        tools = ToolAPI(engine.connect())
        fat = tools.call(tool_name="fat", arguments={})
        assert not fat.success and "give it at least" in (fat.error or ""), fat.error
        assert "holds_memory" in (fat.error or ""), fat.error
        assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
        started = {zygote["name"]: zygote["started"] for zygote in engine.zygotes}
        assert started == {**started, "python_eval": True, "holds_memory": False}


def test_the_least_memory_limit_named_is_one_that_works(tmp_path: Path) -> None:
    from a2e.caps.tools._client import ToolAPI

    with pytest.raises(LimitTooLow) as refused:
        Engine(config=EngineConfig(limits=Limits(memory_mb=5))).start()
    least = int(str(refused.value).rsplit("at least ", 1)[1].split()[0])
    config = EngineConfig(prefork=1, limits=Limits(memory_mb=least))
    with Engine(config=config) as engine:
        tools = ToolAPI(engine.connect())
        # python_eval and run_shell start a thread each: with less, "can't start new thread".
        for tool, arguments in (
            ("python_eval", {"code": "sum(range(1000))"}),
            ("run_shell", {"command": "echo fine"}),
        ):
            result = tools.call(tool_name=tool, arguments=arguments, timeout=30)
            assert result.success, (tool, result.error)


def _broken(*args: object, **kwargs: object) -> None:
    raise RuntimeError("this step broke")


#: Steps of Engine.start that no configuration makes fail, broken by hand: each undoes the
#: steps before it all the same.
BROKEN_STEPS = {
    "the loop thread": ("a2e_engine.engine._loop.EngineLoop.start", _broken),
    "the requirements": ("a2e_engine.engine._engine.refusal", _broken),
    "making up for missing layers": ("a2e_engine.engine._engine.protect_supervisor", _broken),
    "the sessions": ("a2e_engine.engine._engine.Sessions", _broken),
}


@pytest.mark.parametrize("step", BROKEN_STEPS.values(), ids=BROKEN_STEPS.keys())
def test_a_step_that_breaks_undoes_every_step_before_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: tuple[str, Callable[..., None]]
) -> None:
    target, replacement = step
    monkeypatch.setattr(target, replacement)
    before = _children()
    audit = tmp_path / "audit.jsonl"
    engine = Engine(config=EngineConfig(state_dir=str(tmp_path / "state"), audit_path=str(audit)))
    for _ in range(2):
        with pytest.raises(RuntimeError, match="this step broke"):
            engine.start()
        assert not engine.running and engine.pool is None
        _assert_nothing_left(tmp_path, before)
    monkeypatch.undo()
    with engine:  # and once mended, the same engine starts
        assert engine.running and audit.exists()


def test_an_engine_without_plugins_still_starts_its_sandbox(tmp_path: Path) -> None:
    """Nothing to call, but the layers are still there to report (``a2e doctor``)."""
    with Engine(builtin_tools=False, config=EngineConfig(prefork=0)) as engine:
        assert engine.layers["seccomp"]["active"]
        assert [z["name"] for z in engine.zygotes] == ["no plugins"]
        assert ToolAPI(engine.connect()).list() == []
