"""The names hosts import are the contract: each package exports exactly what ``__all__`` says."""

from __future__ import annotations

import importlib

import pytest

PUBLIC = {
    "a2e": ["A2EClient", "A2ECapability", "A2EError", "ErrorCode", "decode", "encode"],
    "a2e.caps.tools": [
        "AsyncToolAPI",
        "ENDED_BY_WHAT_RAN",
        "FailureReason",
        "PendingCall",
        "SandboxProfile",
        "ToolAPI",
        "ToolContext",
        "ToolDefinition",
        "ToolErrorCode",
        "ToolExecutionError",
        "ToolParameter",
        "ToolPlugin",
        "ToolResult",
        "input_schema",
    ],
    "a2e.adapters": ["EngineTool", "engine_tools"],
    "a2e.transports": ["StdioTransport", "WebSocketTransport", "AsyncWebSocketTransport"],
    "a2e_engine.engine.service": ["HttpService", "ServiceConfig"],
    "a2e_engine.engine.cluster": ["RayEngine", "stay_on_loopback"],
    "a2e_engine.engine": [
        "Engine",
        "EngineConfig",
        "Limits",
        "RayEngine",
        "entry_point_plugins",
        "load_config_file",
        "RetryPolicy",
        "ToolPolicy",
    ],
    "a2e_engine.sandbox": [
        "WorkerPool",
        "PoolConfig",
        "Job",
        "Limits",
        "Outcome",
    ],
    "a2e_engine.tools": ["PythonEval", "FileTools", "BUILTIN_PLUGINS"],
    "a2e_engine.tools.grading": ["CodeEval", "compiled_sources", "MAX_CASES"],
}


@pytest.mark.parametrize("module_name", sorted(PUBLIC))
def test_exports(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert set(PUBLIC[module_name]) <= set(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), f"{module_name}.__all__ names missing {name}"


def test_the_protocol_package_does_not_import_the_engine() -> None:
    import subprocess
    import sys

    code = (
        "import sys, a2e, a2e.caps.tools, a2e.transports\nfrom a2e.caps.tools import ToolAPI\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'a2e_engine'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_no_export_is_shadowed_by_a_submodule_of_its_name() -> None:
    """Importing ``package.name`` sets ``package.name`` to that module: a lazily exported
    ``name`` would then be the module for everyone who imports it after (``cli.main`` was)."""
    import pkgutil
    import subprocess
    import sys

    packages = []
    for root in ("a2e", "a2e_engine"):
        top = importlib.import_module(root)
        packages.append(root)
        for info in pkgutil.walk_packages(top.__path__, f"{root}."):
            if info.ispkg:
                packages.append(info.name)
    clashes = []
    for name in packages:
        package = importlib.import_module(name)
        submodules = {info.name for info in pkgutil.iter_modules(package.__path__)}
        clashes += [
            f"{name}.{export}" for export in getattr(package, "__all__", ()) if export in submodules
        ]
    assert clashes == []
    # And for real, in a fresh interpreter: the submodule first, then the export.
    code = "import a2e_engine.engine.cli._app\nfrom a2e_engine.engine.cli import main\nprint(callable(main))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr


#: Modules run as commands (``python -m ...``, ``a2e bench``), public by name for that alone.
COMMANDS = {
    "benchmarks/bench.py",
    "benchmarks/bounds.py",
    "benchmarks/breakdown.py",
    "benchmarks/compare.py",
    "benchmarks/cpu_limits.py",
    "benchmarks/jury.py",
    "benchmarks/layer_costs.py",
    "benchmarks/layer_throughput.py",
    "benchmarks/load.py",
    "benchmarks/path_files.py",
    "benchmarks/ray_scaling.py",
    "benchmarks/reward_batch.py",
    "benchmarks/sandboxes.py",
    "benchmarks/sandboxfusion_standin.py",
    "benchmarks/tool_search.py",
    # The files verl's configuration names (custom_reward_function.path, and a tool's
    # class_name).
    "a2e/adapters/verl.py",
    "a2e/adapters/verl_sandbox_tool.py",
    "sandbox/layers.py",
}


def test_every_other_module_is_private() -> None:
    """What a package offers is its ``__init__``'s names; every module behind it is ``_named``,
    so that moving code between modules breaks nobody who imports the packages."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    public = {
        str(path.relative_to(root))
        for folder in ("a2e", "engine", "sandbox", "tools", "benchmarks")
        for path in (root / folder).rglob("*.py")
        if not path.name.startswith("_") and "assets" not in path.parts
    }
    assert public == COMMANDS, public ^ COMMANDS
