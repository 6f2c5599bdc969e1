"""The tool catalog: every built-in tool contract plus the user's own tools, and who gets which.

Built-in contracts are declared in the pure modules of :mod:`agent_tools.contracts` (one per capability) and
imported here by name: a missing module is an import error, never a silently smaller catalog. User tools join through :class:`agent_tools.AgentToolsPlugin`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypedDict, Unpack

from agent_tools._catalog.profiles import PROFILES
from agent_tools._catalog.spec import ToolLevel, ToolSpec
from agent_tools._errors import ConfigurationError
from agent_tools.contracts import (
    _delegation as delegation,
)
from agent_tools.contracts import (
    _history as history,
)
from agent_tools.contracts import (
    _human as human,
)
from agent_tools.contracts import (
    _planning as planning,
)
from agent_tools.contracts import (
    _results as results,
)
from agent_tools.contracts import (
    _sandbox as sandbox,
)
from agent_tools.contracts import (
    _skills as skills,
)
from agent_tools.contracts._events import contract as events
from agent_tools.contracts._memory import contract as memory
from agent_tools.contracts._web import tools as web

# Every capability's contracts, in the order the catalog lists them. A capability joins by being imported here.
BUILTIN_MODULES = (planning, human, delegation, web, memory, results, history, events, sandbox, skills)


# Profiles that include every discovered MCP tool.
MCP_PROFILES: frozenset[str] = frozenset({"codai", "all"})


def builtin_specs() -> list[ToolSpec]:
    """Every built-in contract (each capability module's ``TOOLS``)."""
    return [spec for module in BUILTIN_MODULES for spec in module.TOOLS]


class ToolChoice(TypedDict, total=False):
    """What chooses an agent's tools besides its profile (:meth:`ToolCatalog.resolve`, :meth:`~ToolCatalog.offer`)."""

    tools: Iterable[str]
    """Assigned explicitly, on top of the profile's."""
    exclude: Iterable[str]
    level: ToolLevel
    """The agent's tool level; ``l1_http`` when omitted."""
    disabled: Iterable[str]
    """Switched off for the organisation."""
    extra_profiles: Mapping[str, list[str]] | None
    home_profile: str | None
    """The agent's own profile when a request's tool list replaced it: its faces of the capabilities that come
    without being named (memory, saved-result readers) are the ones that join."""


class ToolCatalog:
    """Name -> contract, with the rules that choose an agent's tools."""

    def __init__(self, specs: Iterable[ToolSpec] = ()) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs:
            self.register(spec)

    @classmethod
    def builtin(cls) -> ToolCatalog:
        return cls(builtin_specs())

    def register(self, spec: ToolSpec) -> None:
        if spec.name in self._specs and self._specs[spec.name] is not spec:
            raise ConfigurationError(f"tool {spec.name!r} is registered twice")
        self._specs[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def names(self) -> list[str]:
        return sorted(self._specs)

    def specs(self, names: Iterable[str]) -> list[ToolSpec]:
        return [self._specs[n] for n in names if n in self._specs]

    def offer(
        self,
        *,
        profile: str | None,
        memory: bool = True,
        unavailable: Iterable[str] = (),
        **choice: Unpack[ToolChoice],
    ) -> list[str]:
        """The tools a session is offered: :meth:`resolve`, then FYAI's automatic tools and the deployment.

        * Memory off: no memory face at all (FYAI: memory tools exist only for agents with Memory ticked).
        * Automatic tools (FYAI's chip) join: remember/recall when memory is on; the three result readers when
          the agent has at least one tool of its own (a reader alone has nothing to read). Not where the
          agent already has another dialect's face of the same capability (RTC's saveMemory..., codai's
          memory_* or read_artifact): a user of that platform gets the faces they know, not two dialects.
        * ``unavailable``: tools this deployment cannot serve (no search engine, fewer than two callable
          models, ...) are not offered rather than offered to fail.
        Exclusions, organisation switches and the level apply to automatic tools too.
        """
        blocked = {*choice.get("exclude", ()), *choice.get("disabled", ()), *unavailable}
        tools = list(choice.get("tools", ()))
        level = choice.get("level", ToolLevel.l1_http)
        extra_profiles = choice.get("extra_profiles")
        names = self.resolve(profile=profile, tools=tools, exclude=blocked, level=level, extra_profiles=extra_profiles)
        # The dialects the agent asked for, before its level or switches removed any: a codai agent at level
        # none has no memory face, and must not get FYAI's instead.
        profiles = {**PROFILES, **(extra_profiles or {})}
        listed = profiles.get(profile, []) if profile else []
        home = self._home_faces(profiles, choice.get("home_profile")) if profile is None else []
        dialects = {
            self._specs[n].capability
            for n in [*listed, *tools, *home]
            if n in self._specs and not self._specs[n].automatic
        }
        if not memory:
            names = [n for n in names if self._specs[n].capability != "memory"]
        own = [n for n in names if not self._specs[n].automatic]
        # The agent's own faces of what comes unnamed (a request list replaced its profile), under FYAI's
        # conditions: memory faces with memory on, readers when the agent has a tool whose results they read.
        for name in home:
            spec = self._specs[name]
            if name in names or name in blocked or not level.allows(spec.level):
                continue
            if (spec.capability == "memory" and memory) or (spec.capability == "results" and own):
                names.append(name)
        for spec in self._specs.values():
            if not spec.automatic or spec.name in names or spec.name in blocked or not level.allows(spec.level):
                continue
            if spec.capability in dialects:
                continue
            if (spec.capability == "memory" and memory) or (spec.capability == "results" and own):
                names.append(spec.name)
        if not own:
            names = [n for n in names if not (self._specs[n].automatic and self._specs[n].capability == "results")]
        return names

    def host_tools(self) -> list[str]:
        """The ``@tool`` functions the host registered on the plugin (MCP servers' tools follow MCP_PROFILES)."""
        return [n for n, s in self._specs.items() if s.capability == "user"]

    def _home_faces(self, profiles: Mapping[str, list[str]], home: str | None) -> list[str]:
        """The faces of ``home``'s profile for the capabilities FYAI attaches unnamed (memory, readers).
        ``all`` names every dialect at once and so has no dialect of its own: FYAI's rule applies there."""
        if not home or home == "all" or home not in profiles:
            return []
        automatic = {s.capability for s in self._specs.values() if s.automatic}
        return [n for n in profiles[home] if n in self._specs and self._specs[n].capability in automatic]

    def carries_client_tools(self, request_tools: Iterable[str] | None) -> bool:
        """Whether a session request brings tools of its own: a request tool list naming one of the host's
        tools (``@tool`` functions, capability ``user``), not only built-ins. codai: "if you send `tools`,
        you own the loop and the gateway stays out", so such a session gets no ``spawn_agent``."""
        return any((spec := self._specs.get(n)) is not None and spec.capability == "user" for n in request_tools or ())

    def is_automatic(self, name: str, profile: str | None) -> bool:
        """Whether ``name`` comes to an agent of ``profile`` without being assigned (the "Automatic" chip)."""
        spec = self._specs.get(name)
        if spec is None or not spec.automatic:
            return False
        listed = [self._specs[n] for n in PROFILES.get(profile, []) if n in self._specs] if profile else []
        return not any(s.capability == spec.capability and not s.automatic for s in listed)

    def resolve(self, *, profile: str | None, **choice: Unpack[ToolChoice]) -> list[str]:
        """The tool names an agent sees.

        The profile's faces plus the explicitly assigned tools, minus exclusions, minus tools switched off
        for the organisation, minus tools above the agent's level. Unknown names are a configuration error
        so that a typo does not silently drop a tool.
        """
        profiles = {**PROFILES, **(choice.get("extra_profiles") or {})}
        level = choice.get("level", ToolLevel.l1_http)
        wanted: list[str] = []
        if profile:
            if profile not in profiles:
                raise ConfigurationError(f"unknown tool profile {profile!r}; known: {sorted(profiles)}")
            wanted.extend(profiles[profile])
            if profile in MCP_PROFILES:
                # codai: the tools of the deployment's MCP servers come with any level above none.
                wanted.extend(n for n, s in self._specs.items() if s.capability == "mcp")
        wanted.extend(choice.get("tools", ()))
        unknown = [n for n in wanted if n not in self._specs]
        if unknown:
            raise ConfigurationError(f"unknown tools {unknown}; known: {self.names()}")
        blocked = {*choice.get("exclude", ()), *choice.get("disabled", ())}
        seen: set[str] = set()
        result: list[str] = []
        for name in wanted:
            spec = self._specs.get(name)
            if spec is None or name in seen or name in blocked or not level.allows(spec.level):
                continue
            seen.add(name)
            result.append(name)
        return result
