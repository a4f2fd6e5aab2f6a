"""``ZygoteSettings``: what the zygote and its workers are set up from, as one typed value.

The engine makes it from its configuration; it reaches the zygote serialized once (JSON, as
the zygote is a fresh interpreter) and is read there as the same type: each setting is named,
typed and given its default in this one place.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from a2e_engine.sandbox._frames import DEFAULT_MAX_FRAME
from a2e_engine.sandbox._limits import Limits
from a2e_engine.sandbox._profiles import PROFILES

__all__ = ["DEFAULT_UID_RANGE", "Isolation", "ZygoteSettings"]

#: Unnamed ids (no ``/etc/passwd`` entry): far above login users, system users and the usual
#: ``/etc/subuid`` ranges. The gid of a session is its uid.
DEFAULT_UID_RANGE = (1_500_000_000, 4096)


@dataclass(frozen=True)
class Isolation:
    """Which of the optional layers the sandbox may use: each is used where the host allows
    it (``EngineConfig.require`` makes one mandatory), and off here, it is off everywhere."""

    namespaces: bool = True  # PID, mount, IPC and network namespaces (sandbox._namespaces...)
    landlock: bool = True
    #: A call writes into a layer of its own (sandbox._run_root); without it, only its
    #: workspace and its /tmp.
    writable_root: bool = True
    cgroups: bool = True  # a pids and a memory cgroup per worker (sandbox._cgroups)
    #: Each session's calls as a uid of its own, from ``uid_range`` (first uid, how many),
    #: when the engine runs as root (sandbox._identity).
    identity: bool = True
    uid_range: tuple[int, int] = DEFAULT_UID_RANGE
    idle_priority: bool = True  # fork and harden the next workers on spare CPU only

    def __post_init__(self) -> None:
        first, count = self.uid_range
        if first <= 0 or count <= 0:
            raise ValueError(
                f"Isolation.uid_range must be two positive integers, got {self.uid_range}"
            )


@dataclass(frozen=True)
class ZygoteSettings:
    limits: Limits = field(default_factory=Limits)
    isolation: Isolation = field(default_factory=Isolation)
    profiles: tuple[str, ...] = tuple(PROFILES)  # the seccomp profiles workers are forked for
    max_frame: int = DEFAULT_MAX_FRAME
    writable_paths: tuple[str, ...] = ()  # the engine's state directory
    #: Directories the engine made for one plugin, by the plugin's name, beneath the writable
    #: paths and outliving sessions (``run_code``'s compile cache, which the supervisor alone
    #: writes: ``sandbox._sharing``): the jobs of that plugin, and of no other, may read a file
    #: there by name (``sandbox._landlock``), and the zygote hands them to the plugin as its
    #: ``plugin_dirs``. Only where Landlock is on: nothing else would keep the other plugins'
    #: workers out.
    plugin_dirs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: What this zygote's workers must not reach at all: other plugins' directories (the
    #: pool fills it in, ``WorkerPool._settings_for``), covered in their mount namespace.
    hidden_paths: tuple[str, ...] = ()
    read_roots: tuple[str, ...] = ()  # read by calls: must stay reachable for a session uid
    receive_mounts: tuple[str, ...] = ()  # shared mounts whose later sub-mounts workers see
    #: The engine's memory group, where the zygote makes its sandbox group (empty: its own
    #: group), and the bound it has (``sandbox._cgroups.create_sandbox_memory``).
    memory_parent: str = ""
    sandbox_memory_mb: int = 0
    #: How many calls may run at once (the engine's worker bound; 0: not known): the
    #: sandbox's cap on processes is theirs together (``sandbox._limits.process_shares``).
    max_workers: int = 0

    def __post_init__(self) -> None:
        unknown = set(self.profiles) - set(PROFILES)
        if unknown:
            raise ValueError(
                f"unknown sandbox profiles {sorted(unknown)}; known: {sorted(PROFILES)}"
            )

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ZygoteSettings:
        values: dict[str, Any] = json.loads(text)
        values["limits"] = Limits(**values["limits"])
        isolation = values["isolation"]
        values["isolation"] = Isolation(**{**isolation, "uid_range": tuple(isolation["uid_range"])})
        for setting in fields(cls):
            if isinstance(values.get(setting.name), list):
                values[setting.name] = tuple(values[setting.name])
        dirs = values.get("plugin_dirs") or {}
        values["plugin_dirs"] = {name: tuple(paths) for name, paths in dirs.items()}
        return cls(**values)
