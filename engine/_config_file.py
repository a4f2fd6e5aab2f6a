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

The file is read by one declaration: ``_Document`` below, whose ``engine`` is ``EngineConfig``
itself, so its dataclasses and their own checks are the schema and nothing copies them field by
field. It is checked strictly, as JSON is (an integer is not a string of digits, a flag is not
1), and whole before anything starts. Every error names the key it is about
(``engine.max_workers: input should be a valid integer, got 'four'``).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import tomllib
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import ErrorDetails

from a2e_engine.engine._config import EngineConfig
from a2e_engine.engine._policy import ToolPolicy
from a2e_engine.sandbox._limits import InvalidLimit

__all__ = ["ConfigError", "ConfigFile", "load_config_file", "parse_config"]


class ConfigError(ValueError):
    """The configuration file is wrong; the message names the key."""


@dataclass
class ConfigFile:
    """What a file configures: the engine, the settings of plugins by name, more plugins by
    ``module:Class`` with their settings, and a policy."""

    engine: EngineConfig = field(default_factory=EngineConfig)
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    plugins: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    policy: ToolPolicy | None = None


class _Strict(BaseModel):
    # The config reaches the standard dataclasses inside (EngineConfig and its parts) too;
    # built on the first file read, not on every import of the CLI.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class _Plugin(_Strict):
    spec: str = Field(pattern=r"^[^:]+:[^:]+$")
    settings: dict[str, Any] = Field(default_factory=dict)


class _Policy(_Strict):
    allow: list[str] | None = None
    deny: list[str] = Field(default_factory=list)


class _Document(_Strict):
    engine: EngineConfig = Field(default_factory=EngineConfig)
    tools: dict[str, dict[str, Any]] = Field(default_factory=dict)
    plugins: list[_Plugin] = Field(default_factory=list)
    policy: _Policy | None = None


_TOO_DEEP = "nested too deeply to be a configuration"


def load_config_file(path: str) -> ConfigFile:
    try:
        with open(path, "rb") as fh:
            document = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: {_TOO_DEEP}") from None
    try:
        return parse_config(document)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def parse_config(document: dict[str, Any]) -> ConfigFile:
    """``document`` (a TOML file's tables) checked whole and made the typed parts."""
    if not isinstance(document, dict):
        raise ConfigError("the file: expected a table of sections")
    engine = document.get("engine")
    if isinstance(engine, dict) and "tool_settings" in engine:
        raise ConfigError("engine.tool_settings: set tools in [tools.<name>] tables")
    try:
        dated = _date_in(document, "")
        if dated is not None:
            raise ConfigError(f"{dated}: a date or time is not a setting")
        # As JSON, which is what TOML's values are once dates are out: arrays become the
        # tuples the dataclasses hold, and nothing is coerced (strict).
        parsed = _Document.model_validate_json(json.dumps(document))
    except RecursionError:
        raise ConfigError(_TOO_DEEP) from None
    except TypeError as exc:  # a host's dict holding what no TOML file can (a set, a path)
        raise ConfigError(f"the file: {exc}") from None
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ConfigError(
            _TOO_DEEP if error["type"] == "json_invalid" else _sentence(error)
        ) from None
    policy = parsed.policy
    return ConfigFile(
        engine=parsed.engine,
        tools=parsed.tools,
        plugins=[(plugin.spec, plugin.settings) for plugin in parsed.plugins],
        policy=None if policy is None else ToolPolicy(policy.allow, tuple(policy.deny)),
    )


def _date_in(value: object, where: str) -> str | None:
    """The key of the first TOML date or time in ``value``, if any."""
    if isinstance(value, datetime.date | datetime.time):
        return where
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, inner in items:
        found = _date_in(
            inner, f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}".lstrip(".")
        )
        if found is not None:
            return found
    return None


_UNKNOWN = ("extra_forbidden", "unexpected_keyword_argument")


def _sentence(error: ErrorDetails) -> str:
    """One error as ``where: what``, the key by its dotted path (``engine.limits.memory_mb``,
    ``plugins[0].spec``)."""
    loc = error["loc"]
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)
    where = where.lstrip(".") or "the file"
    kind = error["type"]
    if kind == "value_error":  # a dataclass's own check, which says it in full
        problem = error.get("ctx", {}).get("error", error["msg"])
        if isinstance(problem, InvalidLimit):
            return f"{where}.{problem.name}: {problem.problem}"
        return f"{where}: {problem}"
    if kind in _UNKNOWN:
        return f"{where}: {_unknown(loc)}"
    given = repr(error.get("input"))
    given = given if len(given) <= 80 else given[:77] + "..."
    if kind == "string_pattern_mismatch":
        return f"{where}: expected 'module:Class', got {given}"
    what = error["msg"][:1].lower() + error["msg"][1:]
    return f"{where}: {what}" if kind == "missing" else f"{where}: {what}, got {given}"


def _unknown(loc: tuple[int | str, ...]) -> str:
    """Why a key is unknown, with the keys its table knows; a key of an older, flat
    ``[engine]`` table says which part it lives in now (``landlock``: ``[engine.isolation]``)."""
    table: Any = _Document
    for part in loc[:-1]:
        table = _field_types(table).get(str(part), dict) if isinstance(part, str) else _Plugin
    known = _field_types(table)
    if table is EngineConfig:
        for name, hint in known.items():
            if dataclasses.is_dataclass(hint) and loc[-1] in _field_types(hint):
                return f"set it in [engine.{name}] now"
    if table is _Document:
        return f"unknown section; known: {', '.join(known)}"
    return f"unknown key; known: {', '.join(known)}"


def _field_types(table: Any) -> dict[str, Any]:
    if typing.get_origin(table) in (typing.Union, types.UnionType):
        (table,) = [arg for arg in typing.get_args(table) if arg is not type(None)]
    if isinstance(table, type) and issubclass(table, BaseModel):
        return {name: info.annotation for name, info in table.model_fields.items()}
    if dataclasses.is_dataclass(table):
        return typing.get_type_hints(table)
    return {}
