"""The tools the engine offers: which plugin serves each name, under which profile, and which
zygote forks its workers (one per plugin, or per group of plugins that declare they may share
one: ``ToolPlugin.zygote_group``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

from a2e.caps.tools._arguments import Arguments, arguments_of
from a2e.caps.tools._models import ToolDefinition, ToolListRequest
from a2e.caps.tools._plugin import SandboxProfile, ToolPlugin, select_tools
from a2e_engine.engine._search import ToolIndex

__all__ = ["RegisteredTool", "ToolRegistry", "ZygoteGroup"]


@dataclass(frozen=True)
class RegisteredTool:
    definition: ToolDefinition
    plugin: ToolPlugin
    profile: str
    zygote: str  # the name of its plugin's zygote
    zygote_index: int  # its plugin's place in that zygote's list

    @property
    def name(self) -> str:
        return self.definition.name

    @functools.cached_property
    def arguments(self) -> Arguments:
        """The model its calls' arguments are checked against, built on its first call."""
        return arguments_of(self.definition.input_parameters)


@dataclass(frozen=True)
class ZygoteGroup:
    """Plugins whose workers one zygote forks, and the profiles their tools run under."""

    name: str
    plugins: tuple[int, ...]  # indices into ``ToolRegistry.plugins``
    profiles: tuple[str, ...]


class ToolRegistry:
    """Built once from the plugins; tool names must be unique across all of them."""

    def __init__(self, plugins: Sequence[ToolPlugin]) -> None:
        self.plugins = list(plugins)
        self._tools: dict[str, RegisteredTool] = {}
        for plugin in self.plugins:
            if not isinstance(plugin, ToolPlugin):
                raise TypeError(f"plugin {plugin!r} is not a ToolPlugin instance")
        homes = _zygote_homes(self.plugins)
        for plugin, (zygote, zygote_index) in zip(self.plugins, homes, strict=True):
            for definition in plugin._list_tools():
                if definition.name in self._tools:
                    other = self._tools[definition.name].plugin
                    raise ValueError(
                        f"tool {definition.name!r} is defined by both {type(other).__name__} "
                        f"and {type(plugin).__name__}; tool names must be unique"
                    )
                profile = plugin.profile_for(definition.name)
                if profile not in SandboxProfile.ALL:
                    raise ValueError(
                        f"tool {definition.name!r} asks for sandbox profile {profile!r}; "
                        f"known profiles: {', '.join(SandboxProfile.ALL)}"
                    )
                self._tools[definition.name] = RegisteredTool(
                    definition, plugin, profile, zygote, zygote_index
                )
        self.index = ToolIndex(self.definitions)
        self.zygotes = self._groups(homes)

    def _groups(self, homes: list[tuple[str, int]]) -> list[ZygoteGroup]:
        """The zygotes in the order of their first plugin's, with what each must prepare."""
        groups: dict[str, list[int]] = {}
        for index, (zygote, _) in enumerate(homes):
            groups.setdefault(zygote, []).append(index)
        return [
            ZygoteGroup(
                name,
                tuple(members),
                tuple(sorted({t.profile for t in self._tools.values() if t.zygote == name})),
            )
            for name, members in groups.items()
        ]

    def get(self, name: str) -> RegisteredTool | None:
        return self._tools.get(name)

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def definitions(self) -> list[ToolDefinition]:
        return [t.definition for t in self._tools.values()]

    @property
    def profiles(self) -> tuple[str, ...]:
        return tuple(sorted({t.profile for t in self._tools.values()}))

    def select(self, request: ToolListRequest) -> list[ToolDefinition]:
        """The spec's list/search rules over all plugins. A query is answered by the BM25
        ranking (``engine._search``); a plugin that overrides ``_search_tools`` adds what its
        own search finds after the ranked tools."""

        def search(query: str, tags: list[str], pool: list[ToolDefinition]) -> list[ToolDefinition]:
            allowed = {t.name: t for t in pool}
            found = [allowed[name] for name in self.index.rank(query) if name in allowed]
            seen = {t.name for t in found}
            for plugin in self.plugins:
                if type(plugin)._search_tools is ToolPlugin._search_tools:
                    continue
                own = [t for t in pool if self._tools[t.name].plugin is plugin]
                for tool in plugin._search_tools(query, tags, own) if own else []:
                    if tool.name not in seen:
                        seen.add(tool.name)
                        found.append(tool)
            return found

        return select_tools(request, self.definitions, search)


def _zygote_homes(plugins: list[ToolPlugin]) -> list[tuple[str, int]]:
    """Each plugin's zygote and its place there: its ``zygote_group``, or a zygote of its own
    named after it (``name``, ``name-2``, ... for several of one name)."""
    homes: list[tuple[str, int]] = []
    members: dict[str, int] = {}
    for plugin in plugins:
        group = plugin.zygote_group
        if group:
            name = f"group {group}"
        else:
            name, n = plugin.name, 1
            while name in members:
                n += 1
                name = f"{plugin.name}-{n}"
        homes.append((name, members.get(name, 0)))
        members[name] = members.get(name, 0) + 1
    return homes
