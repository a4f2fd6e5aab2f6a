"""The tools the engine offers: which plugin serves each name, and under which profile."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from a2e.caps.tools.models import ToolDefinition, ToolListRequest
from a2e.caps.tools.plugin import SandboxProfile, ToolPlugin, select_tools
from a2e_engine.engine.search import ToolIndex

__all__ = ["RegisteredTool", "ToolRegistry"]


@dataclass(frozen=True)
class RegisteredTool:
    definition: ToolDefinition
    plugin: ToolPlugin
    plugin_index: int
    profile: str

    @property
    def name(self) -> str:
        return self.definition.name


class ToolRegistry:
    """Built once from the plugins; tool names must be unique across all of them."""

    def __init__(self, plugins: Sequence[ToolPlugin]) -> None:
        self.plugins = list(plugins)
        self._tools: dict[str, RegisteredTool] = {}
        for index, plugin in enumerate(self.plugins):
            if not isinstance(plugin, ToolPlugin):
                raise TypeError(f"plugin {plugin!r} is not a ToolPlugin instance")
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
                self._tools[definition.name] = RegisteredTool(definition, plugin, index, profile)
        self.index = ToolIndex(self.definitions)

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
        ranking (``engine.search``); a plugin that overrides ``_search_tools`` adds what its
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
