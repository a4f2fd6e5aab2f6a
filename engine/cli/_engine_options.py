"""The engine every command runs: its flags (``add_engine_options``), the configuration file
merged under them (``engine_from_args``), and starting it with a failure said in one line."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine._config import EngineConfig
from a2e_engine.engine._config_file import ConfigError, ConfigFile, load_config_file
from a2e_engine.engine._engine import Engine
from a2e_engine.engine._plugins import PluginError, entry_point_plugins, load_plugin
from a2e_engine.engine._requirements import LimitTooLow
from a2e_engine.engine.cli._arguments import at_least
from a2e_engine.engine.cli._errors import CommandFailed, UsageError
from a2e_engine.sandbox._limits import Limits
from a2e_engine.sandbox.layers import CATALOG
from a2e_engine.tools import BUILTIN_PLUGINS

if TYPE_CHECKING:
    from a2e_engine.engine.cluster._backend import RayEngine

__all__ = ["add_engine_options", "engine_from_args", "layer_summary", "started"]


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("engine")
    group.add_argument(
        "--config", metavar="FILE", help="a TOML configuration file (flags given override it)"
    )
    group.add_argument(
        "--no-entry-points",
        action="store_true",
        help="do not load plugins installed under the a2e.tools entry point",
    )
    group.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE:CLASS",
        help="load an extra ToolPlugin (repeatable)",
    )
    group.add_argument(
        "--read-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a directory tools may read besides the workspace (repeatable)",
    )
    group.add_argument(
        "--max-workers",
        type=at_least(1),
        metavar="N",
        help="calls running at once (default: sized to the host; a2e doctor says how many); "
        "given alone, that many start whatever they do",
    )
    group.add_argument(
        "--busy-workers",
        type=at_least(1),
        metavar="N",
        help="of them, how many start whatever they do; past them, calls start while the "
        "running ones leave room by the CPU and memory they use (default: 4 per core)",
    )
    group.add_argument(
        "--prefork",
        type=at_least(0),
        metavar="N",
        help=f"hardened workers kept waiting (default {EngineConfig.prefork})",
    )
    group.add_argument(
        "--max-timeout",
        type=at_least(1),
        metavar="S",
        help=f"cap on any call's timeout (default {EngineConfig.max_timeout} s)",
    )
    group.add_argument(
        "--memory-mb",
        type=at_least(1),
        metavar="M",
        help=f"address-space limit per worker (default {Limits.memory_mb})",
    )
    group.add_argument(
        "--token",
        default=os.environ.get("A2E_TOKEN"),
        help="require this token: in the handshake, or with --http on every request but "
        "/healthz (default: $A2E_TOKEN)",
    )
    group.add_argument(
        "--audit", default=None, metavar="PATH", help="append one JSON line per call"
    )
    group.add_argument(
        "--require",
        action="append",
        default=[],
        metavar="LAYER",
        choices=sorted(CATALOG),
        help="refuse to start without this isolation layer (repeatable; see a2e doctor)",
    )
    group.add_argument(
        "--no-landlock", action="store_true", help="do not restrict workers with Landlock"
    )
    group.add_argument(
        "--no-writable-root",
        action="store_true",
        help="calls write only their workspace and /tmp, not a layer over the whole root",
    )
    group.add_argument(
        "--no-namespaces",
        action="store_true",
        help="do not use PID/mount namespaces even where available",
    )
    group.add_argument(
        "--no-cgroups", action="store_true", help="no pids or memory cgroup per worker"
    )
    group.add_argument(
        "--no-uid-drop", action="store_true", help="do not run calls as a uid per session"
    )
    group.add_argument(
        "--allow-unprotected-root",
        action="store_true",
        help="run even if workers would be root with nothing keeping them off the host's files",
    )


#: Each engine flag (its ``argparse`` name) and the configuration field it sets, a part's by
#: its path (``limits.memory_mb``): given, it overrides the file; not given, it leaves it.
FLAG_FIELDS: dict[str, str] = {
    "max_workers": "max_workers",
    "busy_workers": "busy_workers",
    "prefork": "prefork",
    "max_timeout": "max_timeout",
    "token": "token",
    "audit": "audit_path",
    "memory_mb": "limits.memory_mb",
}
#: The flags that switch an optional layer off, and the field each sets to False.
SWITCHED_OFF: dict[str, str] = {
    "no_namespaces": "isolation.namespaces",
    "no_landlock": "isolation.landlock",
    "no_writable_root": "isolation.writable_root",
    "no_cgroups": "isolation.cgroups",
    "no_uid_drop": "isolation.identity",
}


def _with(config: EngineConfig, changes: dict[str, Any]) -> EngineConfig:
    """``config`` with each field at its path (``max_workers``, ``limits.memory_mb``) changed,
    each part copied once and the whole checked once, as a file with them would be."""
    fields: dict[str, Any] = {}
    parts: dict[str, dict[str, Any]] = {}
    for path, value in changes.items():
        name, _, inner = path.partition(".")
        if inner:
            parts.setdefault(name, {})[inner] = value
        else:
            fields[name] = value
    for name, changed in parts.items():
        fields[name] = dataclasses.replace(getattr(config, name), **changed)
    return dataclasses.replace(config, **fields)


def engine_from_args(
    args: argparse.Namespace, reporting: bool = False, handshake_token: bool = True
) -> Engine:
    """The configuration file (``--config``) as the base, the flags given on top of it;
    ``reporting`` (``a2e doctor``): nothing required, and every plugin's zygote started so
    that each can be reported. Without ``handshake_token``, ``--token`` is not asked in the
    engine's handshakes (a service that checks it on every request, ``a2e serve --http``)."""
    try:
        file = load_config_file(args.config) if args.config else ConfigFile()
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    base = file.engine
    changes: dict[str, Any] = {}
    for flag, path in FLAG_FIELDS.items():
        value = getattr(args, flag)
        if value is not None and not (flag == "token" and not handshake_token):
            changes[path] = value
    changes.update({path: False for flag, path in SWITCHED_OFF.items() if getattr(args, flag)})
    if args.allow_unprotected_root:
        changes["allow_unprotected_root"] = True
    if args.read_root:
        changes["read_roots"] = (*base.read_roots, *args.read_root)
    if reporting:
        changes.update(require=(), start_all_zygotes=True)
    elif args.require:
        changes["require"] = (*base.require, *args.require)
    try:
        plugins = [load_plugin(spec, options) for spec, options in file.plugins]
        plugins += [load_plugin(spec) for spec in args.plugin]
        found: list[ToolPlugin] = []
        if not args.no_entry_points:
            found, _problems = entry_point_plugins(file.tools)  # each one logged
        builtin_names = {cls.name for cls in BUILTIN_PLUGINS}
        known = builtin_names | {p.name for p in found}
        for name in file.tools:
            if name not in known:
                raise PluginError(f"tools.{name}: no built-in or installed plugin is named so")
        changes["tool_settings"] = {k: v for k, v in file.tools.items() if k in builtin_names}
        config = _with(base, changes)
        return Engine(plugins=[*plugins, *found], config=config, policy=file.policy)
    except (PluginError, ValueError, TypeError) as exc:
        raise UsageError(str(exc)) from None


class _Startable(Protocol):
    def start(self) -> object: ...

    def stop(self) -> None: ...


#: What a command runs: the engine of this process, or one on every node of a Ray cluster.
Served = TypeVar("Served", bound=_Startable)


@contextlib.contextmanager
def started(engine: Served) -> Iterator[Served]:
    """``with engine:``, a failed start said in one line."""
    try:
        engine.start()
    except LimitTooLow as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        raise CommandFailed(f"the engine did not start: {exc.strerror or exc}{where}") from None
    except RuntimeError as exc:
        raise CommandFailed(f"the engine did not start: {exc}") from None
    try:
        yield engine
    finally:
        engine.stop()


def layer_summary(engine: Engine | RayEngine) -> str:
    layers = engine.layers
    return ", ".join(f"{name}={'on' if layers.active(name) else 'off'}" for name in layers)
