"""Layers ``pids_cgroup``, ``memory_cgroup``, ``cpu_cgroup`` and ``case_cgroup``: per-call
cgroups, caps on processes (pids) and memory that no fork, thread, memfd or shared memory
segment gets around, plus a pids cap on the whole sandbox that every call's cap fits in; one
equal weight of the CPU per call; and beneath each call's, the case group that each program the
call runs joins (``sandbox._case_group``: what it spends, and the one way to end all of it).

A fork bomb, a thread bomb or memory held outside ``RLIMIT_AS`` in one call must neither harm
the host nor starve the other calls. Nor may all of them together: the supervisor makes one
memory group for the whole sandbox (``create_sandbox_memory``), with the engine's bound, and
every zygote makes its sandbox group inside it. What a worker writes to a tmpfs (a session's
workspace, its own ``/tmp``) is charged to it and stays charged after the worker exits, so
that group holds everything the sandbox holds: running calls, resident workers and the pages
of every workspace; the kernel keeps it under the bound, and the engine refuses new sessions
before it gets there (``engine._memory_bound``).

For each controller the zygote creates one group for the sandbox and, below it, reusable
*slot* groups with the per-call limits. Each worker joins the slots the zygote assigned it
once its inherited fds are closed, while it is pre-forked (a join is slow, and off the call's
path there); a slot goes to a new worker once the previous one and everything it started are
gone. The zygote itself stays outside, so it can always fork
replacements. Workers see ``/sys`` read-only and cannot lift the caps. Groups that a zygote
killed together with its supervisor left behind go when the next one starts
(``sandbox._leftovers``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Unpack

from a2e_engine.sandbox._case_group import CASE, open_case_group
from a2e_engine.sandbox._leftovers import dead_owners, owner_tag
from a2e_engine.sandbox._limits import SANDBOX_PROCESSES, process_shares
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._profiles import PROFILES

if TYPE_CHECKING:
    from a2e_engine.sandbox.layers import Facts, LayerReports

__all__ = [
    "LAYER",
    "SLOT_PREFIX",
    "Slot",
    "SlotGroups",
    "cgroup_root",
    "create_sandbox_memory",
    "join_cgroup",
    "kill_members",
    "made_by",
    "memory_of_process",
    "memory_usage",
    "move_lone_thread",
    "own_path",
    "remove_cgroup_tree",
    "thaw_slots",
]

_ROOT = "/sys/fs/cgroup"
#: Each worker's group in a hierarchy's sandbox group is named so, and numbered.
SLOT_PREFIX = "slot"
_PREFIX = "a2e-sandbox-"
#: One engine's memory group, holding its zygotes' sandbox groups.
_ENGINE_PREFIX = "a2e-engine-"
#: A released memory slot still charged with more than this is retired (see ``release_slot``).
RETIRE_ABOVE_BYTES = 32 << 20
#: Each call's weight in the CPU controller (the kernel's default for a group).
CALL_CPU_SHARES = 1024


@dataclass
class Slot:
    path: str
    oom_kills: int  # the group's OOM-kill count when the slot was handed out


class SlotGroups:
    """Zygote-side owner of one hierarchy's sandbox group and its slots."""

    def __init__(self, path: str, slot_settings: dict[str, str], events: str | None) -> None:
        self.path = path
        self.slot_settings = slot_settings
        self.events = events  # file with the "oom_kill N" counter, for memory
        self._free: list[Slot] = []
        self._count = 0
        #: Whether each slot has a case group beneath it (``sandbox._case_group``).
        self.cases = False

    @classmethod
    def create(
        cls,
        controller: str,
        sandbox_settings: dict[str, str],
        slot_settings: dict[str, str],
        parent: str = "",
    ) -> SlotGroups:
        """One controller's groups (cgroup v1 layout), in ``parent`` (a group's path; by
        default this process's own group). Raise ``OSError`` saying why not."""
        path = _new_group(parent or _own_group(controller), _PREFIX, sandbox_settings)
        events = "memory.oom_control" if controller == "memory" else None
        return cls(path, slot_settings, events)

    def take_slot(self) -> Slot:
        if self._free:
            return self._free.pop()  # its OOM count was read when it was released
        self._count += 1
        path = os.path.join(self.path, f"{SLOT_PREFIX}{self._count}")
        os.mkdir(path)
        for name, value in self.slot_settings.items():
            _write(os.path.join(path, name), value)
        if self.cases:
            os.mkdir(os.path.join(path, CASE))
        return Slot(path, self.oom_kills(path))

    def release_slot(self, slot: Slot) -> bool:
        """Only once the worker and its whole tree are gone. True if the kernel's OOM killer
        struck in this slot while the worker had it.

        Memory the call left charged to its slot (files it wrote to a session's tmpfs outlive
        it) would count against the next call there: such a slot is retired, not reused."""
        kills = self.oom_kills(slot.path)
        oom, slot.oom_kills = kills > slot.oom_kills, kills  # empty now: it cannot change
        if self._still_charged(slot.path):
            remove_cgroup_tree(slot.path)
            if not os.path.exists(slot.path):
                return oom  # retired
        self._free.append(slot)
        return oom

    def _still_charged(self, path: str) -> bool:
        if self.events is None:  # only the memory controller carries charges
            return False
        try:
            return int(_read(os.path.join(path, "memory.usage_in_bytes"))) > RETIRE_ABOVE_BYTES
        except (OSError, ValueError):
            return False

    def oom_kills(self, path: str) -> int:
        if self.events is None:
            return 0
        try:
            for line in _read(os.path.join(path, self.events)).splitlines():
                key, _, value = line.partition(b" ")
                if key == b"oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0


class Cgroups(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: the sandbox group and its slots' settings per controller that can
        be had (each reported, active or why not)."""
        limits, enabled = prep.settings.limits, prep.settings.isolation.cgroups
        per_call, total = limits.processes, SANDBOX_PROCESSES
        if prep.settings.max_workers:
            per_call, total = process_shares(limits.processes, prep.settings.max_workers)
        _prepare(
            prep,
            "pids",
            "pids_cgroup",
            enabled=enabled,
            sandbox={"pids.max": str(total)},
            slot={"pids.max": str(per_call)},
            per_call=per_call,
            total=total,
        )
        # Each call one equal weight of the CPU, however many processes and sessions it
        # makes (without a group, the kernel's autogroup gives each session one).
        _prepare(
            prep,
            "cpu",
            "cpu_cgroup",
            enabled=enabled,
            sandbox={},
            slot={"cpu.shares": str(CALL_CPU_SHARES)},
            per_call_shares=CALL_CPU_SHARES,
        )
        parent = prep.settings.memory_parent
        _prepare(
            prep,
            "memory",
            "memory_cgroup",
            enabled=enabled,
            sandbox={},
            slot={"memory.limit_in_bytes": str(limits.call_memory_mb << 20)},
            parent=parent,
            per_call_mb=limits.call_memory_mb,
            total_mb=prep.settings.sandbox_memory_mb if parent else 0,
        )
        _prepare_cases(prep, enabled)

    def spawning(self, prep: Preparation, worker: Worker) -> None:
        """In the zygote: a slot of each controller's group for the worker to join."""
        for controller, groups in prep.cgroups.items():
            try:
                worker.slots[controller] = groups.take_slot()
            except OSError as exc:
                why = f"cgroup: a {controller} slot: {exc.strerror}"
                raise OSError(exc.errno, why, exc.filename) from None

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker, right after its fds are closed: everything below, and every child,
        counts against the slots it was given; and its case group opened, while it still may
        (``sandbox._case_group``)."""
        for slot in worker.slots.values():
            join_cgroup(slot.path)
        cases = [c for c, groups in prep.cgroups.items() if groups.cases and c in worker.slots]
        if cases and PROFILES[worker.profile].allow_processes:  # none to run, none to hold
            open_case_group({c: worker.slots[c].path for c in cases})

    def reaped(self, prep: Preparation, worker: Worker, alive: Collection[int]) -> None:
        """Its slots back, for the next worker; ``worker.oom`` if the OOM killer struck in
        one while it had it."""
        slots, worker.slots = worker.slots, {}
        for controller, slot in slots.items():
            worker.oom |= prep.cgroups[controller].release_slot(slot)

    def stop(self, prep: Preparation, alive: Collection[int]) -> None:
        """The sandbox groups, empty now (the supervisor may be gone)."""
        for groups in prep.cgroups.values():
            remove_cgroup_tree(groups.path)


LAYER = Cgroups()


#: The hierarchies a case group is made in: ``memory`` and ``pids`` beneath the call's slots,
#: ``freezer`` and ``cpuacct`` in groups of their own for it.
CASE_CONTROLLERS = ("freezer", "cpuacct", "memory", "pids")


def _prepare_cases(prep: Preparation, enabled: bool) -> None:
    """In the zygote: the case group beneath every slot (``sandbox._case_group``): in the
    freezer and cpuacct hierarchies, sandbox groups and slots of their own made for it."""
    if enabled:
        for controller in ("freezer", "cpuacct"):
            try:
                prep.cgroups[controller] = SlotGroups.create(controller, {}, {})
            except OSError:
                continue
    made = [c for c in CASE_CONTROLLERS if c in prep.cgroups]
    for controller in made:  # without a freezer, still what they count
        prep.cgroups[controller].cases = True
    paths = [prep.cgroups[c].path for c in made if c in ("freezer", "cpuacct")]
    why = None
    if "freezer" not in made:
        why = "disabled by configuration" if not enabled else "no freezer cgroup hierarchy"
    prep.report("case_cgroup", why, controllers=made, paths=paths)


def _prepare(
    prep: Preparation,
    controller: str,
    layer: str,
    enabled: bool,
    sandbox: dict[str, str],
    slot: dict[str, str],
    parent: str = "",
    **facts: Unpack[Facts],
) -> None:
    try:
        if not enabled:
            raise OSError("disabled by configuration")
        made = SlotGroups.create(controller, sandbox, slot, parent)
    except OSError as exc:
        prep.report(layer, exc.strerror or str(exc))
        return
    prep.cgroups[controller] = made
    facts["path"] = made.path
    prep.report(layer, None, **facts)


def thaw_slots(prep: Preparation) -> None:
    """Every slot of the freezer hierarchy thawed (a paused session's, ``sandbox._freezing``):
    a frozen process can be killed, but not reaped, until it is."""
    groups = prep.cgroups.get("freezer")
    if groups is None:
        return
    for slot in _slots_of(groups.path):
        with contextlib.suppress(OSError):
            _write(os.path.join(slot, "freezer.state"), "THAWED")


def join_cgroup(path: str) -> None:
    """Move the calling process into the group at ``path``.

    Plain ``os`` calls: each worker joins its groups first thing, and a text-mode ``open`` (an
    io stack, an encoding lookup) would cost it pages copied from the zygote."""
    fd = os.open(os.path.join(path, "cgroup.procs"), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)


def move_lone_thread(path: str, pid: int) -> None:
    """Move process ``pid``, which has one thread (a stopped copy of a kept worker,
    ``sandbox._adoption``), into the group at ``path``, by that thread. Moves made one right
    after another are cheap (0.03 ms here); one after a pause waits for a read-copy-update
    grace period (0.6 to 0.9 ms), so the caller makes them in one go."""
    fd = os.open(os.path.join(path, "tasks"), os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, str(pid).encode())
    finally:
        os.close(fd)


def _read(path: str) -> bytes:
    """A small control file, with plain ``os`` calls: the zygote reads two per call (no text
    io stack, whose objects it would also copy from the workers it shares pages with)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 65536)
    finally:
        os.close(fd)


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


def _own_group(controller: str) -> str:
    """The directory of this process's own group of ``controller`` (v1); ``OSError`` where
    there is no such hierarchy."""
    base = os.path.join(_ROOT, controller)
    if not os.path.isfile(os.path.join(base, "cgroup.procs")):
        if os.path.isfile(os.path.join(_ROOT, "cgroup.controllers")):
            raise OSError("cgroup v2 (unified) hierarchy: only v1 is supported so far")
        raise OSError(f"no {controller} cgroup hierarchy is mounted")
    return os.path.join(base, own_path(controller).lstrip("/"))


def create_sandbox_memory(limit_mb: int) -> str:
    """In the supervisor, before its zygotes start: the memory group every zygote's sandbox
    group goes in, capped at ``limit_mb``, beside this process's own; its path. What dead
    engines left there is cleared first. ``OSError`` saying why it cannot be made."""
    limit = {"memory.limit_in_bytes": str(limit_mb << 20)}
    return _new_group(_own_group("memory"), _ENGINE_PREFIX, limit)


def _new_group(parent: str, prefix: str, settings: dict[str, str]) -> str:
    """``<parent>/<prefix><owner tag>`` made with ``settings``, once what owners of the same
    prefix that are gone left there is cleared: a zygote or an engine killed outright, maybe
    with a worker that outlived them (one whose tool cleared its parent-death signal)."""
    for leftover in dead_owners(parent, prefix):
        kill_members(leftover.path)
        remove_cgroup_tree(leftover.path)
    path = os.path.join(parent, prefix + owner_tag())
    os.mkdir(path)
    try:
        for name, value in settings.items():
            _write(os.path.join(path, name), value)
    except OSError:
        os.rmdir(path)
        raise
    return path


def memory_of_process(pid: int) -> int:
    """In the supervisor: what the memory group of process ``pid`` (a worker's slot) holds, in
    bytes: everything its processes hold, memfd and shmem pages too; the process's resident
    memory where it is in no group of ours; 0 once it is gone."""
    try:
        path = own_path("memory", pid)
    except OSError:
        return 0
    if _PREFIX in path:
        try:
            return memory_usage(_ROOT + "/memory" + path)
        except (OSError, ValueError):
            pass
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def memory_usage(path: str) -> int:
    """What the memory group at ``path`` holds, in bytes, its descendants included."""
    return int(_read(os.path.join(path, "memory.usage_in_bytes")))


def cgroup_root() -> str:
    """Where the cgroup hierarchies are mounted (v1: one directory per controller)."""
    return _ROOT


def own_path(controller: str, pid: int | str = "self") -> str:
    """The cgroup path of process ``pid`` (this one unless told) for ``controller`` (v1), or
    in the unified hierarchy (v2) for ``""``."""
    with open(f"/proc/{pid}/cgroup") as fh:
        for line in fh:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if controller in controllers.split(","):
                return path
    return "/"


def made_by(layers: LayerReports) -> list[str]:
    """The cgroups a zygote's layer report says it made: the supervisor removes them when it
    stops, since a zygote killed outright cannot."""
    made = ("pids_cgroup", "memory_cgroup", "cpu_cgroup")
    paths = [layers.fact(name, "path") for name in made if layers.active(name)]
    return paths + list(layers.fact("case_cgroup", "paths") or [])


def kill_members(path: str, wait_s: float = 2.0) -> None:
    """SIGKILL every process in a group and the groups beneath it, and wait (a little) until
    the kernel has taken them out, so that the groups can be removed."""
    deadline = time.monotonic() + wait_s
    while True:
        members = [pid for group in _tree(path) for pid in _pids_in(group)]
        if not members or time.monotonic() > deadline:
            return
        for pid in members:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def _slots_of(path: str) -> list[str]:
    try:
        return [entry.path for entry in os.scandir(path) if entry.is_dir()]
    except OSError:
        return []


def _tree(path: str) -> list[str]:
    """``path`` and every group beneath it, the deepest last."""
    groups = [path]
    for group in groups:
        groups.extend(_slots_of(group))
    return groups


def _pids_in(group: str) -> list[int]:
    try:
        return [int(pid) for pid in _read(os.path.join(group, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


def remove_cgroup_tree(path: str) -> None:
    """Remove a group and the (empty) groups beneath it, the deepest first, once nothing runs
    in them; best effort."""
    for group in reversed(_tree(path)):
        try:
            os.rmdir(group)
        except OSError:
            pass
