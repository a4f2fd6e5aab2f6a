"""The engine's configuration file (TOML), read by the CLI (``--config``) or by hosts.

    [engine]                 # any EngineConfig field
    max_workers = 8
    read_roots = ["/etc"]

    [engine.limits]          # and each of its parts: Limits
    memory_mb = 512

    [engine.isolation]       # Isolation: the optional layers
    landlock = false

    [engine.admission]       # Admission (also [engine.output], [engine.retry],
    max_pending_calls = 500  # [engine.resident])

    [tools.http]             # settings of the plugin named "http" (built-in or entry point)
    allow = ["127.0.0.1"]

    [[plugins]]              # more plugins, by module:Class, with their settings
    spec = "my_package.tools:MyTools"
    settings = { api_root = "/srv/data" }

    [policy]                 # which tools any session may call (ToolPolicy)
    deny = ["run_shell", "http_*"]
    allow = ["*"]            # optional: only these (deny still wins)

Every error names the key it is about (``engine.max_workers: expected an integer, got 'four'``)
and nothing is half-applied: the file is checked whole before anything starts.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from dataclasses import dataclass, field
from typing import Any

from a2e_engine.engine._config import EngineConfig
from a2e_engine.engine._policy import ToolPolicy
from a2e_engine.sandbox._limits import InvalidLimit, Limits

__all__ = ["ConfigError", "ConfigFile", "load_config_file", "parse_config"]


class ConfigError(ValueError):
    """The configuration file is wrong; the message names the key."""


@dataclass
class ConfigFile:
    engine: dict[str, Any] = field(default_factory=dict)  # EngineConfig keyword arguments
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)  # settings per plugin name
    plugins: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # (spec, settings)
    policy: ToolPolicy | None = None


def load_config_file(path: str) -> ConfigFile:
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    try:
        return parse_config(document)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse_config(document: dict[str, Any]) -> ConfigFile:
    unknown = set(document) - {"engine", "tools", "plugins", "policy"}
    if unknown:
        raise ConfigError(
            f"{sorted(unknown)[0]}: unknown section; known: engine, tools, plugins, policy"
        )
    result = ConfigFile()
    engine = _table(document.get("engine", {}), "engine")
    if "tool_settings" in engine:
        raise ConfigError("engine.tool_settings: set tools in [tools.<name>] tables")
    result.engine = _fields_of(EngineConfig, engine, "engine")
    tools = _table(document.get("tools", {}), "tools")
    result.tools = {name: dict(_table(value, f"tools.{name}")) for name, value in tools.items()}
    plugins = document.get("plugins", [])
    if not isinstance(plugins, list):
        raise ConfigError("plugins: expected an array of tables ([[plugins]])")
    for index, entry in enumerate(plugins):
        where = f"plugins[{index}]"
        entry = _table(entry, where)
        extra = set(entry) - {"spec", "settings"}
        if extra:
            raise ConfigError(f"{where}.{sorted(extra)[0]}: unknown key; known: spec, settings")
        spec = entry.get("spec")
        if not isinstance(spec, str) or ":" not in spec:
            raise ConfigError(f"{where}.spec: expected 'module:Class'")
        result.plugins.append((spec, dict(_table(entry.get("settings", {}), f"{where}.settings"))))
    if "policy" in document:
        result.policy = _policy(_table(document["policy"], "policy"))
    try:
        EngineConfig(**result.engine)  # the dataclass's own checks, with the key named
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"engine: {exc}") from None
    return result


def _policy(table: dict[str, Any]) -> ToolPolicy:
    extra = set(table) - {"allow", "deny"}
    if extra:
        raise ConfigError(f"policy.{sorted(extra)[0]}: unknown key; known: allow, deny")
    lists = {}
    for key in ("allow", "deny"):
        value = table.get(key)
        if value is not None and (
            not isinstance(value, list) or not all(isinstance(v, str) for v in value)
        ):
            raise ConfigError(f"policy.{key}: expected an array of tool names or patterns")
        lists[key] = value
    return ToolPolicy(allow=lists["allow"], deny=tuple(lists["deny"] or ()))


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expected a table")
    return value


def _fields_of(cls: type, table: dict[str, Any], where: str) -> dict[str, Any]:
    """``table`` checked against the dataclass ``cls`` and converted to its field types."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    converted: dict[str, Any] = {}
    for key, value in table.items():
        if key not in hints:
            part = _part_with(hints, key)
            if part is not None:
                raise ConfigError(f"{where}.{key}: set it in [{where}.{part}] now")
            raise ConfigError(f"{where}.{key}: unknown key; known: {', '.join(names)}")
        converted[key] = _convert(hints[key], value, f"{where}.{key}")
    return converted


def _part_with(hints: dict[str, Any], key: str) -> str | None:
    """The part (a field that is itself a dataclass) that has a field ``key``: where a key of
    an older, flat ``[engine]`` table lives now (``landlock`` in ``[engine.isolation]``)."""
    for name, hint in hints.items():
        if dataclasses.is_dataclass(hint) and key in {f.name for f in dataclasses.fields(hint)}:
            return name
    return None


def _convert(hint: Any, value: Any, where: str) -> Any:
    if hint is Limits:
        try:
            return Limits(**_fields_of(Limits, _table(value, where), where))
        except InvalidLimit as exc:
            raise ConfigError(f"{where}.{exc.name}: {exc.problem}") from None
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        fields = _fields_of(hint, _table(value, where), where)
        try:
            return hint(**fields)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or str(origin) == "<class 'types.UnionType'>":
        if value is None:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(inner, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{where}: expected an array, got {value!r}")
        items = args[:1] * len(value) if args[-1] is Ellipsis else args
        if len(items) != len(value):
            raise ConfigError(f"{where}: expected {len(items)} values, got {len(value)}")
        pairs = enumerate(zip(items, value, strict=True))
        return tuple(_convert(t, v, f"{where}[{i}]") for i, (t, v) in pairs)
    if origin is dict:
        return dict(_table(value, where))
    expected = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    if hint in expected:
        ok = isinstance(value, hint) and not (hint is int and isinstance(value, bool))
        if hint is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            raise ConfigError(f"{where}: expected {expected[hint]}, got {value!r}")
        return value
    raise ConfigError(f"{where}: cannot be set from a file")
