"""A plugin's workers are forked from a zygote of its own: tool code (``python_eval`` here)
looks for every other plugin the engine has (the test's ``HostileTools``, the built-in shell,
files, HTTP and A2A tools) in every way a worker's memory can be searched, and finds nothing:
no object (``gc``, after ``gc.unfreeze()``: the zygote's ``gc.freeze()`` only hides objects
from the collector), no frame that holds one or its serialised bytes (``sys._current_frames``
and each frame's ``f_back``), no imported module."""

from __future__ import annotations

import json

from a2e.caps.tools.client import ToolAPI

OTHERS = ("HostileTools", "Shell", "FileTools", "HttpTools", "A2APeers", "RunCode", "CodeEval")
OTHER_MODULES = (
    "tests.hostile_plugin",
    "a2e_engine.tools.shell",
    "a2e_engine.tools.files",
    "a2e_engine.tools.http",
    "a2e_engine.tools.a2a_peers",
    "a2e_engine.tools.run_code",
    "a2e_engine.tools.code_eval",
)

SEARCH = f"""
import gc, json, sys
others, modules = {OTHERS!r}, {OTHER_MODULES!r}
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
    "own": "PythonEval" in {{type(o).__name__ for o in gc.get_objects()}},
}}))
"""


def test_a_worker_finds_no_other_plugin_in_its_memory(tools: ToolAPI) -> None:
    assert tools.call(tool_name="sleep", arguments={"seconds": 0}).success  # HostileTools runs
    result = tools.call(tool_name="python_eval", arguments={"code": SEARCH})
    assert result.success, result.error
    found = json.loads(result.data["stdout"])
    assert found["own"]  # the search works: it finds its own plugin
    assert found == {"objects": [], "frames": [], "modules": [], "own": True}, found
