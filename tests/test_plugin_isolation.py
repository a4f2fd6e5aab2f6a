"""A plugin's workers are forked from a zygote of its own: tool code (``python_eval`` here)
looks for every other plugin the engine has (the test's ``HostileTools``, the built-in shell,
files, HTTP and A2A tools) in every way a worker's memory can be searched, and finds nothing:
no object (``gc``, after ``gc.unfreeze()``: the zygote's ``gc.freeze()`` only hides objects
from the collector), no frame that holds one or its serialised bytes (``sys._current_frames``
and each frame's ``f_back``), no imported module. Nor does it find what only the supervisor
needs (pydantic, the TLS stack): a compute tool's worker carries the worker runtime and its own
plugin, and what its zygote reports says the same."""

from __future__ import annotations

import json
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition
from a2e.caps.tools._plugin import SandboxProfile, ToolPlugin
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.sandbox.layers import LayerReport, merge_reports

OTHERS = ("HostileTools", "Shell", "FileTools", "HttpTools", "A2APeers", "RunCode", "CodeEval")
#: What a compute tool's worker has no use for: the supervisor's models, the TLS stack, and
#: what spawning and unpickling the zygote would drag in if it were done with their help.
HEAVY = ("pydantic", "pydantic_core", "ssl", "_ssl", "multiprocess", "dill", "email", "http")
OTHER_MODULES = (
    "tests.hostile_plugin",
    "a2e_engine.tools._shell",
    "a2e_engine.tools._files",
    "a2e_engine.tools._http",
    "a2e_engine.tools._a2a_peers",
    "a2e_engine.tools._run_code",
    "a2e_engine.tools.grading._code_eval",
)

SEARCH = f"""
import gc, json, sys
others, modules, heavy = {OTHERS!r}, {OTHER_MODULES!r}, {HEAVY!r}
gc.unfreeze()
objects = sorted({{type(o).__name__ for o in gc.get_objects()}} & set(others))
in_frames = set()
for frame in sys._current_frames().values():
    while frame is not None:
        for value in list(frame.f_locals.values()):
            items = value if isinstance(value, (list, tuple)) else (value,)
            for item in items:
                if type(item).__name__ in others:
                    in_frames.add(type(item).__name__)
                if isinstance(item, (bytes, bytearray)):
                    in_frames.update(name for name in others if name.encode() in item)
        frame = frame.f_back
print(json.dumps({{
    "objects": objects,
    "frames": sorted(in_frames),
    "modules": sorted(m for m in sys.modules if m.startswith(modules)),
    "heavy": sorted(m for m in sys.modules if m.partition(".")[0] in heavy),
    "own": "PythonEval" in {{type(o).__name__ for o in gc.get_objects()}},
}}))
"""


def test_a_worker_finds_no_other_plugin_in_its_memory(tools: ToolAPI) -> None:
    assert tools.call(tool_name="sleep", arguments={"seconds": 0}).success  # HostileTools runs
    result = tools.call(tool_name="python_eval", arguments={"code": SEARCH})
    assert result.success, result.error
    found = json.loads(result.data["stdout"])
    assert found["own"]  # the search works: it finds its own plugin
    assert found == {"objects": [], "frames": [], "modules": [], "heavy": [], "own": True}, found


def test_python_evals_zygote_reports_itself_lean(engine: Engine, tools: ToolAPI) -> None:
    assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
    (zygote,) = [z for z in engine.zygotes if z["plugins"] == ["python_eval"]]
    assert zygote["started"] and zygote["modules"] > 0, zygote
    assert not set(zygote["packages"]) & set(HEAVY), zygote["packages"]
    others = {m.partition(".")[0] for m in OTHER_MODULES} - {"a2e_engine"}
    assert not set(zygote["packages"]) & others, zygote["packages"]


class _Named(ToolPlugin):
    """A plugin with one tool that says which plugin ran it."""

    sandbox_profile = SandboxProfile.COMPUTE

    def _list_tools(self) -> list[ToolDefinition]:
        return [ToolDefinition(name=f"{self.name}_who", description="which plugin ran this")]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"plugin": self.name}


class _Left(_Named):
    name = "left"
    zygote_group = "pair"


class _Right(_Named):
    name = "right"
    zygote_group = "pair"


class _Alone(_Named):
    name = "alone"


def test_plugins_of_one_zygote_group_share_a_zygote_and_each_runs_its_own_tools() -> None:
    plugins = [_Left(), _Alone(), _Right()]
    with Engine(plugins=plugins, builtin_tools=False, config=EngineConfig(prefork=0)) as engine:
        tools = ToolAPI(engine.connect())
        for name in ("left", "right", "alone"):
            result = tools.call(tool_name=f"{name}_who", arguments={})
            assert result.success and result.data == {"plugin": name}, result
        zygotes = {z["name"]: (z["plugins"], z["started"]) for z in engine.zygotes}
    assert zygotes == {"group pair": (["left", "right"], True), "alone": (["alone"], True)}


def test_each_zygote_reports_its_own_layers_and_the_engine_the_weakest_of_them(
    engine: Engine, tools: ToolAPI
) -> None:
    assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
    assert tools.call(tool_name="run_shell", arguments={"command": "true"}).success
    started = {z["name"]: z["layers"] for z in engine.zygotes if z["started"]}
    # Each compiles the filters of its own tools' profiles only, and a zygote without the
    # network joins the empty namespace itself.
    assert started["python_eval"]["seccomp"]["profiles"] == ["compute", "session"]
    assert started["shell"]["seccomp"]["profiles"] == ["process"]
    if started["python_eval"]["network_namespace"]["active"]:
        assert started["python_eval"]["network_namespace"]["joined_by"] == "zygote"
    union = sorted({p for layers in started.values() for p in layers["seccomp"]["profiles"]})
    assert engine.layers["seccomp"]["profiles"] == union
    least = max(layers["rlimits"]["least_memory_mb"] for layers in started.values())
    assert engine.layers["rlimits"]["least_memory_mb"] == least


def test_a_layer_off_in_one_zygote_is_off_for_the_engine_and_names_it() -> None:
    on: LayerReport = {"active": True, "reason": "", "profiles": ["compute"]}
    reports: dict[str, dict[str, LayerReport]] = {
        "a": {
            "landlock": on,
            "seccomp": on,
            "rlimits": {"active": True, "reason": "", "least_memory_mb": 48},
        },
        "b": {
            "landlock": {"active": False, "reason": "no ABI"},
            "seccomp": {**on, "profiles": ["process"]},
            "rlimits": {"active": True, "reason": "", "least_memory_mb": 64},
        },
    }
    merged = merge_reports(reports)
    assert merged["landlock"]["active"] is False
    assert merged["landlock"]["reason"] == "no ABI (in the zygote of b)"
    assert merged["seccomp"] == {"active": True, "reason": "", "profiles": ["compute", "process"]}
    assert merged["rlimits"]["least_memory_mb"] == 64
    everywhere = merge_reports(
        {"a": {"x": {"active": False, "reason": "r"}}, "b": {"x": {"active": False, "reason": "r"}}}
    )
    assert everywhere["x"]["reason"] == "r"  # off in all of them: no zygote to single out
