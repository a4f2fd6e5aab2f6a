"""The isolation layers' catalog: their names, what each one stops, what the host must allow,
and the module that holds its whole life (the order they run in is ``sandbox._contain``'s).

One source for three readers: the zygote and the engine report each layer under these names
(``engine.layers``: active or not, and why not); ``a2e doctor`` prints them for this host;
docs/isolation.md's table is ``python -m a2e_engine.sandbox.layers`` (a test keeps the two
equal).
``EngineConfig.require`` names the ones the engine must refuse to start without.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Required, TypedDict, cast

from a2e_engine.sandbox._frames import DEFAULT_MAX_FRAME
from a2e_engine.sandbox._limits import Limits

__all__ = [
    "CATALOG",
    "Entry",
    "Facts",
    "LayerReport",
    "LayerReports",
    "markdown_table",
    "merge_reports",
    "missing_layers",
]


@dataclass(frozen=True)
class Entry:
    stops: str  # what it stops, for people
    needs: str  # what the host must allow ("always": nothing)
    module: str  # where it lives, its whole life (sandbox.<module>, a private module)


_L = Limits()

CATALOG: dict[str, Entry] = {
    "fresh_process": Entry(
        "state leaking between calls: each call runs in a new, single-use worker process",
        "always",
        "_forking",
    ),
    "deadline": Entry(
        "hangs: at the call's timeout the worker and every process in its namespace are "
        "SIGKILLed, partial output returned",
        "always",
        "_run",
    ),
    "frames": Entry(
        "a hostile worker forging, flooding or corrupting its result: length-framed JSON, "
        f"never unpickled, {DEFAULT_MAX_FRAME >> 20} MiB per frame, 64 MiB and 10,000 events per "
        "call (ten times that and the worker is killed)",
        "always",
        "_run",
    ),
    "clean_start": Entry(
        "reaching the zygote's control socket, the host's stdout, or the supervisor's "
        "environment: inherited fds closed, stdio on /dev/null, environment scrubbed and the "
        "inherited environment block zeroed; own session, parent-death signal",
        "always",
        "_clean_start",
    ),
    "seccomp": Entry(
        "ptrace, process_vm_*, mount and friends, setns/unshare, namespace flags on clone "
        "(clone3 gets ENOSYS), bpf, perf_event_open, keyrings, userfaultfd, io_uring, "
        "swapon/off, raising rlimits, device mknod, TIOCSTI, PR_SET_MM, F_SETPIPE_SZ, "
        "kill(-1), setuid/setgid bits in chmod: EPERM (32-bit argument checks); kexec, module "
        "loading, reboot, iopl/ioperm, open_by_handle_at and every 32-bit or x32 system call "
        "kill the worker. Per tool profile: `compute` also refuses socket(), bind, connect, "
        "SO_PASSCRED, new processes, exec, memfd and SysV/POSIX IPC; `process` refuses "
        "socket(), bind, connect and SO_PASSCRED; `network` nothing more; `session` (a kept "
        "interpreter) is `compute` but may fork itself, without exec, and unshare a user and a "
        "mount namespace together: how a sandbox is copied",
        "always (libseccomp)",
        "_seccomp",
    ),
    "rlimits": Entry(
        f"memory bombs (address space {_L.memory_mb} MiB: a catchable MemoryError; for "
        "profiles that start programs only without the memory cgroup, which caps them instead: "
        "JVMs, Go and V8 reserve more), runaway CPU "
        f"({_L.cpu_seconds} s), fd exhaustion ({_L.open_files}), one huge file "
        f"({_L.file_size_mb} MiB); no core dumps; processes per session uid ({_L.processes})",
        "always",
        "_rlimits",
    ),
    "no_capabilities": Entry(
        "a uid-0 worker bypassing file permissions, reconfiguring the network, signalling or "
        "reading other users' processes; setuid programs give nothing back (no_new_privs, "
        "empty bounding set)",
        "always",
        "_capabilities",
    ),
    "identity": Entry(
        "reading root-only files (/etc/shadow) and other sessions' files: each session's calls "
        "run as a uid and gid of their own, no supplementary groups",
        "root; a mount namespace where the interpreter lives under a closed directory",
        "_identity",
    ),
    "subreaper": Entry(
        "orphans escaping the tree when PID namespaces are missing: re-parented to the zygote "
        "and killed",
        "always",
        "_subreaper",
    ),
    "user_namespace": Entry(
        "an engine that is not root going without namespaces: its zygote runs in a user "
        "namespace of its own, where it may create the PID, mount, IPC and network ones",
        "not root; unprivileged user namespaces allowed",
        "_userns",
    ),
    "pid_namespace": Entry(
        "processes that outlive the call (double fork + setsid, daemons, stopped or "
        "SIGTERM-ignoring children): the worker is pid 1 of its own namespace",
        "root, or the user namespace",
        "_namespaces",
    ),
    "private_proc": Entry(
        "seeing other processes, reading the supervisor's /proc/<pid>/environ",
        "the PID namespace",
        "_mount_template",
    ),
    "ipc_namespace": Entry(
        "SysV and POSIX IPC objects outliving the call or crossing calls",
        "the PID namespace",
        "_mount_template",
    ),
    "minimal_dev": Entry(
        "host devices (disks, loop devices, /dev/kvm, /dev/kmsg, consoles): /dev holds only "
        "null, zero, full, random, urandom, tty",
        "the PID namespace",
        "_mount_template",
    ),
    "readonly_filesystem": Entry(
        "rewriting the host (/proc/sys/kernel/core_pattern, cgroup release_agent, .pth files, "
        "sources, /etc): every mount read-only except the engine's state directory; another "
        "plugin's own directories (the compile cache) covered by an empty tmpfs",
        "the PID namespace (mount_setattr, Linux 5.12+)",
        "_mount_template",
    ),
    "writable_root": Entry(
        f"a call changing the host or what the next call runs, yet free to write anywhere its "
        f"uid may (SandboxFusion's overlay): what it writes lands in a layer of its own, one "
        f"tmpfs ({_L.tmp_mb} MiB with /tmp) over overlays of the directories it reads, gone "
        f"with the worker; fresh empty /mnt, /home, /root...",
        "the PID namespace, overlayfs",
        "_run_root",
    ),
    "private_tmp": Entry(
        f"the host's /tmp, what an earlier call left there, filling it: each worker gets its "
        f"own tmpfs on /tmp ({_L.tmp_mb} MiB)",
        "the PID namespace",
        "_mount_template",
    ),
    "disk_quota": Entry(
        "filling the disk from the workspace: each session's directory is a tmpfs of its own "
        "(1024 MiB by default, EngineConfig.workspace_mb)",
        "root",
        "_quota",
    ),
    "network_namespace": Entry(
        "any network access even if a socket slipped past seccomp: tools without the network "
        "profile join one empty namespace (a down loopback)",
        "root, or the user namespace",
        "_network",
    ),
    "landlock": Entry(
        "reading anything but system paths, the Python installation and the engine's and "
        "plugins' code, or writing anything but the session's workspace and the call's tmp "
        "(other sessions, the state directory, /root, the host application's directory); "
        "a plugin's own directories (the compile cache) for its jobs alone",
        "a kernel with Landlock",
        "_landlock",
    ),
    "scoped_ipc": Entry(
        "a call reaching another's abstract unix socket (to pass it a descriptor of its own "
        "workspace, say) or signalling another's processes, of its session or another: each "
        "worker's Landlock domain ends both at its own edge. Without it `compute` and "
        "`process` tools still cannot name a unix socket to be reached by (seccomp refuses "
        "bind, connect and SO_PASSCRED), and PID namespaces keep processes apart",
        "Landlock ABI 6 (Linux 6.12)",
        "_landlock",
    ),
    "pids_cgroup": Entry(
        f"fork and thread bombs: {_L.processes} processes and threads per call, and for the "
        "sandbox every call's cap together (so that no call's bomb fails another's fork), "
        "within half the host's pid space (each call's cut to fit); the zygote stays outside "
        "and can always fork",
        "root, cgroup v1",
        "_cgroups",
    ),
    "cpu_cgroup": Entry(
        "one call taking the others' CPU by starting many processes or sessions (the kernel's "
        "autogroup gives each session a share): each call's processes share one equal weight",
        "root, cgroup v1",
        "_cgroups",
    ),
    "memory_cgroup": Entry(
        f"memory outside RLIMIT_AS (children, memfd, shared memory, tmpfs pages): "
        f"{_L.call_memory_mb} MiB per call, an overrun killed and reported as out of memory; "
        "the whole sandbox (running calls, resident workers, every workspace's pages) under "
        "one bound derived from the host's memory, new sessions refused with overloaded "
        "before it",
        "root, cgroup v1",
        "_cgroups",
    ),
    "case_cgroup": Entry(
        "a program a tool runs (a test case, a compile, a run) outliving its step or hiding "
        "what it spends: each joins its worker's case group before it executes, which is "
        "frozen and emptied at the step's end (no process can fork away from the kill), whose "
        "CPU time counts every member, exited ones too, and whose memory counts memfd, shmem "
        "and tmpfs pages, limited by the kernel",
        "root, cgroup v1 with a freezer",
        "_cgroups",
    ),
}


def markdown_table() -> str:
    """The isolation table of docs/isolation.md."""
    rows = ["| layer | what it stops | needs | module |", "|---|---|---|---|"]
    rows += [
        f"| `{name}` | {layer.stops} | {layer.needs} | `sandbox/{layer.module}.py` |"
        for name, layer in CATALOG.items()
    ]
    return "\n".join(rows) + "\n"


class Facts(TypedDict, total=False):
    """What a layer states of itself besides whether it is on, each by the layer that says it."""

    path: str  # pids_cgroup, memory_cgroup: the sandbox's group
    per_call: int  # pids_cgroup: processes and threads of one call
    total: int  # pids_cgroup: of all calls together
    per_call_mb: int  # memory_cgroup
    per_call_shares: int  # cpu_cgroup: each call's weight
    total_mb: int  # memory_cgroup: what the whole sandbox may hold
    controllers: list[str]  # case_cgroup: the hierarchies the case group is in
    paths: list[str]  # case_cgroup: the sandbox groups made for it (freezer, cpuacct)
    first_uid: int  # identity
    opened: list[str]  # identity: the closed directories opened on the way to the interpreter
    abi: int  # landlock, scoped_ipc
    scopes: list[str]  # scoped_ipc: what ends at each worker's edge
    read: list[str]  # landlock: what every call may read
    size_mb: int  # private_tmp, writable_root
    writable: list[str]  # readonly_filesystem: what stays writable
    hidden: list[str]  # readonly_filesystem: other plugins' directories
    overlays: list[str]  # writable_root
    read_only: list[str]  # writable_root
    program_writable: list[str]  # writable_root
    profiles: list[str]  # seccomp: compiled; network_namespace: closed
    joined_by: str  # network_namespace: "workers", "zygote" or ""
    limits: dict[str, int]  # rlimits
    address_space_uncapped: list[str]  # rlimits: profiles the memory cgroup caps instead
    least_memory_mb: int  # rlimits: the least memory_mb a worker runs under
    fork: str  # fresh_process
    prepared_at_idle_priority: bool  # fresh_process
    idle_priority_reason: str  # fresh_process
    workspace_mb: int  # disk_quota


class LayerReport(Facts, total=False):
    """One layer's report: on or not, why not, and its facts (JSON as it stands)."""

    active: Required[bool]
    reason: Required[str]


class LayerReports(dict[str, LayerReport]):
    """Each layer's report by its name, as ``Preparation.report`` makes them, asked by name:
    whether a layer is on, why not, one of its facts."""

    def active(self, name: str) -> bool:
        return bool(self.fact(name, "active"))

    def reason(self, name: str) -> str:
        return str(self.fact(name, "reason") or "not reported by the sandbox")

    def fact(self, name: str, key: str) -> Any:
        return cast(dict[str, Any], self.get(name, {})).get(key)


def missing_layers(required: tuple[str, ...], layers: LayerReports) -> list[str]:
    """One sentence per required layer that is not active, saying why."""
    return [f"{name} ({layers.reason(name)})" for name in required if not layers.active(name)]


def merge_reports(reports: dict[str, dict[str, LayerReport]]) -> LayerReports:
    """One report for the engine from each zygote's (by zygote name), as weak as the weakest:
    a layer is active only where every zygote has it active; off in some of them, it carries
    the first one's reason and names those zygotes. Lists of names (the profiles a layer
    covers, the paths Landlock opens) are the union of all; ``least_memory_mb`` is the largest,
    the limit under which every plugin's worker starts; any other fact is the first zygote's."""
    merged: dict[str, dict[str, Any]] = {}
    off: dict[str, list[str]] = {}
    for zygote, report in reports.items():
        for name, layer in report.items():
            facts = cast(dict[str, Any], layer)
            if not facts.get("active"):
                off.setdefault(name, []).append(zygote)
            mine = merged.setdefault(name, dict(facts))
            if mine.get("active") and not facts.get("active"):
                mine.update(active=False, reason=facts.get("reason", ""))
            for key, value in facts.items():
                if _names(value) and _names(mine.get(key)):
                    mine[key] = sorted(set(mine[key]) | set(value))
                elif key == "least_memory_mb" and isinstance(value, int):
                    mine[key] = max(value, mine.get(key) or 0)
    for name, zygotes in off.items():
        if len(zygotes) < len(reports):
            merged[name]["reason"] += f" (in the zygote of {', '.join(zygotes)})"
    return LayerReports(cast(dict[str, LayerReport], merged))


def _names(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


if __name__ == "__main__":
    print(markdown_table(), end="")
