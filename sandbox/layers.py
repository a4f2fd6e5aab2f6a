"""The isolation layers, by the names the zygote reports them under, and what each one stops.

``engine.layers`` (and ``a2e doctor``) say which are active on this host and why not where not;
``EngineConfig.require`` names the ones the engine must refuse to start without.
"""

from __future__ import annotations

__all__ = ["LAYERS", "missing_layers"]

LAYERS: dict[str, str] = {
    "seccomp": "system-call filter per profile: dangerous calls fail with EPERM or kill",
    "rlimits": "address space, CPU time, open files, file size, no core dumps",
    "no_capabilities": "a uid-0 worker without any capability",
    "subreaper": "orphans re-parented to the zygote and killed",
    "pid_namespace": "each worker is pid 1 of its own namespace: its whole tree dies with it",
    "private_proc": "/proc shows only the worker's own processes",
    "ipc_namespace": "SysV and POSIX IPC objects private to the call",
    "minimal_dev": "/dev with null, zero, full, random, urandom, tty only",
    "private_tmp": "each call has its own size-capped /tmp; the host's /tmp is out of sight",
    "identity": "a call runs as its session's own uid: root's files, other sessions' files",
    "readonly_filesystem": "every mount read-only except the engine's state directory",
    "network_namespace": "tools without the network profile see only a down loopback",
    "pids_cgroup": "processes and threads capped per call and for the whole sandbox",
    "memory_cgroup": "all memory of a call (processes, memfd, shared memory) capped",
    "landlock": "a call reads only system and code paths, writes only its workspace and tmp",
}


def missing_layers(required: tuple[str, ...], active: dict[str, dict[str, object]]) -> list[str]:
    """One sentence per required layer that is not active, saying why."""
    missing = []
    for name in required:
        info = active.get(name) or {}
        if not info.get("active"):
            reason = info.get("reason") or "not reported by the sandbox"
            missing.append(f"{name} ({reason})")
    return missing
