"""``ZygoteSettings``: what the zygote and its workers are set up from, as one typed value.

The engine makes it from its configuration; it reaches the zygote serialized once (JSON, as
the zygote is a fresh interpreter) and is read there as the same type: each setting is named,
typed and given its default in this one place.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from a2e_engine.sandbox.frames import DEFAULT_MAX_FRAME
from a2e_engine.sandbox.limits import Limits
from a2e_engine.sandbox.profiles import PROFILES

__all__ = ["DEFAULT_UID_RANGE", "ZygoteSettings"]

#: Unnamed ids (no ``/etc/passwd`` entry): far above login users, system users and the usual
#: ``/etc/subuid`` ranges. The gid of a session is its uid.
DEFAULT_UID_RANGE = (1_500_000_000, 4096)


@dataclass(frozen=True)
class ZygoteSettings:
    limits: Limits = field(default_factory=Limits)
    profiles: tuple[str, ...] = tuple(PROFILES)  # the seccomp profiles workers are forked for
    namespaces: bool = True  # PID, mount, IPC and network namespaces, where the host allows
    landlock: bool = True
    writable_root: bool = True  # a call writes into a layer of its own (sandbox.run_root)
    identity: bool = True  # calls run as their session's uid (when root; sandbox.identity)
    first_uid: int = DEFAULT_UID_RANGE[0]  # the uid the identity probe becomes
    memory_cgroup: bool = True  # a memory cgroup per worker, where cgroups are writable
    max_processes: int = 4096  # all workers and their children together; 0: no pids cgroup
    max_frame: int = DEFAULT_MAX_FRAME
    writable_paths: tuple[str, ...] = ()  # the engine's state directory
    #: Directories the engine made for one plugin, by the plugin's name, beneath the writable
    #: paths and outliving sessions (``run_code``'s compile cache): the jobs of that plugin,
    #: and of no other, may write them (``sandbox.landlock``), and the zygote hands them to
    #: the plugin as its ``plugin_dirs``. Only where Landlock is on: nothing else would keep
    #: the other plugins' workers out.
    plugin_dirs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: What this zygote's workers must not reach at all: other plugins' directories (the
    #: pool fills it in, ``WorkerPool._settings_for``), covered in their mount namespace.
    hidden_paths: tuple[str, ...] = ()
    read_roots: tuple[str, ...] = ()  # read by calls: must stay reachable for a session uid
    receive_mounts: tuple[str, ...] = ()  # shared mounts whose later sub-mounts workers see
    idle_priority: bool = True  # fork and harden the next workers on spare CPU only

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
        for setting in fields(cls):
            if isinstance(values.get(setting.name), list):
                values[setting.name] = tuple(values[setting.name])
        dirs = values.get("plugin_dirs") or {}
        values["plugin_dirs"] = {name: tuple(paths) for name, paths in dirs.items()}
        return cls(**values)
