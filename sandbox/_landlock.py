"""Layers ``landlock`` and ``scoped_ipc``: a call may read only what it needs to run, write only
its own directories, and reach no other call's abstract sockets or processes.

Applied in the worker once its job names the session's workspace and the call's tmp directory.
Paths beneath the *read* rules (system directories, the Python installation, the packages of
the engine and of the loaded plugins, the engine's configured read roots) may be read and
executed; paths beneath the *write* rules (the workspace and the call's tmp) may also be
changed. Everything else, other sessions' workspaces, the engine's state directory, the host's
``/tmp`` and ``/root`` among them, cannot even be opened. Unprivileged and cheap (one ruleset,
a few rules), enforced by the kernel for the worker and every child it starts.

A plugin may be given directories of its own that outlive sessions (``ZygoteSettings
.plugin_dirs``: ``run_code``'s compile cache, which only the supervisor writes:
``sandbox._sharing``): its jobs, and no other plugin's, may read a file there by its name, and
neither list nor change anything there, so that what they know of it gives them nothing.

A job's directories (its workspace, its tmp) are the session's, which the session's programs
may change between calls: a link put in place of one must not turn a rule onto what it points
at, so they are opened without following a link anywhere on the way.

Each worker's ruleset also scopes abstract unix sockets and signals to the worker (ABI 6):
nothing it runs can connect to a socket bound, or signal a process started, outside it, so two
calls, of one session or two, have no channel between them that way.

A tool that runs code it does not trust with its own files (``run_code`` and ``code_eval``: a
compile cache, other runs' directories) confines that code further with ``confine_writes``: one
more Landlock layer, stacked on the worker's, under which it writes only its own directory
(and, asked to, reads only what it is given besides the system's).
"""

from __future__ import annotations

import ctypes
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._beneath import open_unlinked
from a2e_engine.sandbox._paths import strictly_under
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker
from a2e_engine.sandbox._profiles import PROFILES

if TYPE_CHECKING:
    from a2e_engine.sandbox._messages import Job

__all__ = [
    "ABI_SCOPED",
    "LAYER",
    "SYSTEM_READ_PATHS",
    "LandlockPlan",
    "Ruleset",
    "WriteConfinement",
    "abi_version",
    "confine_writes",
    "covering_paths",
    "guard_of",
    "readable_code_paths",
    "restrict_self",
]

#: What any program needs to run. ``/etc`` is included whole; keeping root-only files there
#: (``/etc/shadow``) out of reach is the job of the uid drop.
SYSTEM_READ_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc")


_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


#: Scopes (ABI 6): abstract unix sockets and signals end at the domain's edge.
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
#: The ABI from which a ruleset may scope.
ABI_SCOPED = 6


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class _ScopedRulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_NUMBERS: dict[str, int] = {}


def _entry(*argtypes: type) -> Callable[..., int]:
    """``syscall(2)`` with the argument types of one Landlock call declared, so that plain ints
    go straight in: a worker makes no ctypes object per argument (each would cost it pages
    copied from the zygote)."""
    function = syscalls.libc["syscall"]  # a fresh function object for each signature
    function.argtypes = (ctypes.c_long, *argtypes)
    function.restype = ctypes.c_long
    return function


_ENTRIES: dict[str, Callable[..., int]] = {
    "landlock_create_ruleset": _entry(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint32),
    "landlock_add_rule": _entry(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_uint32),
    "landlock_restrict_self": _entry(ctypes.c_int, ctypes.c_uint32),
}


def _syscall(name: str, *args: object) -> int:
    number = _NUMBERS.get(name)
    if number is None:
        number = _NUMBERS[name] = syscalls.syscall_number(name)  # resolved once, in the zygote
    result = int(_ENTRIES[name](number, *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{name}: {os.strerror(err)}")
    return result


@dataclass(frozen=True)
class LandlockPlan:
    """What every worker's ruleset starts from, worked out once by the zygote."""

    abi: int
    read_paths: tuple[str, ...]  # system paths and code, the fewest rules that cover them
    private_tmp: bool  # the worker's own /tmp (sandbox._mount_template): writable all along
    #: Per plugin of the zygote (a job's ``plugin`` index): the directories of its own whose
    #: files its jobs, and no other plugin's, may read by name.
    plugin_readable: tuple[tuple[str, ...], ...] = ()
    #: The worker's run layer (``sandbox._run_root``): its own, writable all along.
    run_layer: tuple[str, ...] = ()
    #: Whether a call may list ``/`` and, as file permissions let it, what lies beneath (a rule
    #: covers all beneath it: the state directory too, whose modes keep session uids out).
    list_root: bool = False


class Landlock(Layer):
    def prepare(self, prep: Preparation) -> None:
        """In the zygote: the plan, or none (reported why); each plugin handed its own
        directories. Without a plan no plugin gets a directory of its own: nothing else keeps
        what the plugin's tools run, or other plugins' workers where they have no mount
        namespace, out of it."""
        if not prep.settings.isolation.landlock:
            for layer in ("landlock", "scoped_ipc"):
                prep.report(layer, "disabled by configuration")
            return
        abi = abi_version()
        if not abi:
            for layer in ("landlock", "scoped_ipc"):
                prep.report(layer, "the kernel has no Landlock (or it is disabled)")
            return
        read_paths = covering_paths((*SYSTEM_READ_PATHS, *prep.code_paths))
        prep.report("landlock", None, abi=abi, read=list(read_paths))
        if abi >= ABI_SCOPED:
            prep.report("scoped_ipc", None, abi=abi, scopes=["abstract_unix_socket", "signal"])
        else:
            prep.report("scoped_ipc", f"Landlock ABI {abi}: scopes need ABI {ABI_SCOPED}", abi=abi)
        root = prep.mounts.root if prep.mounts is not None else None
        run_layer = root.program_writable if root is not None else ()
        plugin_readable = tuple(
            prep.settings.plugin_dirs.get(plugin.name, ()) for plugin in prep.plugins
        )
        prep.landlock = LandlockPlan(
            abi,
            read_paths,
            private_tmp=prep.mounts is not None,
            plugin_readable=plugin_readable,
            run_layer=run_layer,
            list_root=prep.change_identity and bool(run_layer),
        )
        for plugin, dirs in zip(prep.plugins, plugin_readable, strict=True):
            if dirs:
                plugin.plugin_dirs = dirs

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the worker, while it waits for a job: the ruleset with its fixed rules in place,
        for ``on_job`` to complete."""
        plan = prep.landlock
        if plan is None:
            return
        ruleset = Ruleset(plan.abi, scoped=True)
        ruleset.allow_read(plan.read_paths)
        ruleset.allow_devices(("/dev",))
        if plan.private_tmp:
            # The worker's own tmpfs, every job's tmp_dir: its rule is off the call's path.
            ruleset.allow_write(("/tmp",))
        if plan.list_root:
            ruleset.allow_listing(("/",))
        ruleset.allow_write(plan.run_layer)
        worker.ruleset = ruleset

    def rehearse(self, prep: Preparation, worker: Worker) -> None:
        """A read rule the ruleset already has, added again: the rule's first-call costs."""
        plan = prep.landlock
        if worker.ruleset is not None and plan is not None and plan.read_paths:
            worker.ruleset.allow_read(plan.read_paths[:1])

    def on_job(self, prep: Preparation, worker: Worker, job: Job) -> None:
        """In the worker, once the job names its directories, before any tool code or thread
        runs: the job's read roots, the workspace and the call's tmp (never through a link),
        its plugin's own directories (files read by name); then enforced."""
        ruleset, plan = worker.ruleset, prep.landlock
        if ruleset is None or plan is None:
            return
        ruleset.allow_read(job.get("read_roots", ()))
        own = plan.plugin_readable
        plugin = job["plugin"]
        ruleset.allow_files(own[plugin] if 0 <= plugin < len(own) else ())
        ruleset.allow_write((job["workspace"], job["tmp_dir"]), follow=False)
        if PROFILES[worker.profile].forkable:
            # The guard directory that holds the session's: its copies' own are mounted over
            # the session's directory, and a rule on a covered directory is ignored
            # (``sandbox._forks``). Nothing but the session's directory lies in it.
            ruleset.allow_write((guard_of(job["workspace"]),), follow=False)
        ruleset.restrict()


LAYER = Landlock()


def guard_of(workspace: str) -> str:
    """``<state>/<guard>`` of a session's ``<state>/<guard>/<session>/workspace``: the one
    directory above a session's that nothing is mounted over (``sandbox._forks``)."""
    return os.path.dirname(os.path.dirname(workspace))


#: What ``confine_writes`` takes away: every right that changes the file system.
_WRITE_RIGHTS = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
    | REFER
    | TRUNCATE
)


#: What ``confine_writes(readable=...)`` takes away besides: reading, listing, executing.
_READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR


class WriteConfinement:
    """One more Landlock layer for a program a tool runs: beneath it the program, and all it
    starts, may change files only beneath the directories given (and write to ``/dev``'s
    devices), and, as any Landlock domain, trace or read the memory and descriptors of no
    process outside it (``/proc/PID/mem``, ``/proc/PID/fd``). What it may read is left as it
    was, unless ``readable`` is given: then it reads only beneath those, the system's paths
    (``SYSTEM_READ_PATHS``), ``/dev`` and the writable directories (a compiler whose output is
    shared: it must see nothing a session could change but its own directory, or the output
    would depend on more than what it is keyed by).

    The ruleset is built in the tool's process, rules and path walks included; ``enforce``
    only applies it: in a child between fork and exec (a ``preexec_fn``), or in a process that
    is about to run such code itself (``code_eval``). Close it when no more will be."""

    def __init__(
        self,
        abi: int,
        writable: Iterable[str],
        readable: Iterable[str] | None = None,
        scoped: bool = False,
    ) -> None:
        handled = _WRITE_RIGHTS if readable is None else _WRITE_RIGHTS | _READ_RIGHTS
        self._ruleset = Ruleset(abi, handled=handled, scoped=scoped)
        if readable is not None:
            self._ruleset.allow_read(covering_paths((*SYSTEM_READ_PATHS, *readable)))
        self._ruleset.allow_write(writable)
        self._ruleset.allow_devices(("/dev",))
        self.fd = self._ruleset.fd  # what another process enforces it by (``restrict_self``)

    def enforce(self) -> None:
        restrict_self(self.fd)

    def close(self) -> None:
        self._ruleset.close()

    def __enter__(self) -> WriteConfinement:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def restrict_self(ruleset_fd: int) -> None:
    """Enforce a ruleset (a ``WriteConfinement``'s ``fd``, or a copy of it another process
    sent) on the calling process: one more Landlock layer."""
    # Without no_new_privs (a worker whose seccomp layer is off) Landlock refuses.
    syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1)
    _syscall("landlock_restrict_self", ruleset_fd, 0)


def confine_writes(
    writable: Iterable[str], readable: Iterable[str] | None = None, scoped: bool = False
) -> WriteConfinement | None:
    """A ``WriteConfinement`` to ``writable`` (and reads to ``readable``, when given), or
    ``None`` where the kernel has no Landlock: the caller must then not rely on it.
    ``scoped``: nor may it signal a process outside it or reach its abstract unix sockets,
    where the ABI has scopes (``ABI_SCOPED``)."""
    abi = abi_version()
    return WriteConfinement(abi, writable, readable, scoped) if abi else None


def abi_version() -> int:
    """The kernel's Landlock ABI (0 when it has none or it is disabled). Resolves the system
    call numbers too, so that forked workers inherit them."""
    try:
        for name in ("landlock_add_rule", "landlock_restrict_self"):
            _NUMBERS[name] = syscalls.syscall_number(name)
        return _syscall("landlock_create_ruleset", None, 0, _CREATE_RULESET_VERSION)
    except OSError:
        return 0


def readable_code_paths(modules: Iterable[object]) -> list[str]:
    """The Python installation and the directories of ``modules`` (packages or files): what a
    worker may need to import lazily. Deliberately *not* every ``sys.path`` entry, which would
    include the host application's own directory (and its ``.env`` files)."""
    import site
    import sys

    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    paths.update(site.getsitepackages())
    for module in modules:
        file = getattr(module, "__file__", None)
        if not file:
            continue
        is_package = os.path.basename(file) == "__init__.py"
        paths.add(os.path.dirname(file) if is_package else file)
    return sorted(p for p in paths if p)


def covering_paths(paths: Iterable[str]) -> tuple[str, ...]:
    """Fewer paths whose rules allow exactly what rules on ``paths`` would: each resolved (a
    rule follows symbolic links when it is made, and an access is checked on the resolved
    path), missing ones dropped, and one beneath another dropped (a rule covers everything
    beneath it). The zygote works this out once; each rule saved spares every worker an
    ``open`` and a system call (on a merged-/usr system ``/lib``, ``/bin``... are ``/usr``)."""
    resolved = dict.fromkeys(os.path.realpath(p) for p in paths if os.path.exists(p))
    return tuple(
        path for path in resolved if not any(strictly_under(path, other) for other in resolved)
    )


def _handled(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class Ruleset:
    """A ruleset built in two steps: the fixed rules while the worker waits (off the call's
    path), the job's directories and ``restrict`` when the job arrives. ``scoped``: abstract
    unix sockets and signals scoped too, where the ABI has scopes."""

    def __init__(self, abi: int, handled: int | None = None, scoped: bool = False) -> None:
        self.handled = _handled(abi) if handled is None else handled & _handled(abi)
        self.writable: set[str] = set()
        attr: ctypes.Structure
        if scoped and abi >= ABI_SCOPED:
            attr = _ScopedRulesetAttr(self.handled, 0, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
        else:
            attr = _RulesetAttr(self.handled)
        self.fd = _syscall(
            "landlock_create_ruleset", ctypes.addressof(attr), ctypes.sizeof(attr), 0
        )

    def allow_read(self, paths: Iterable[str]) -> None:
        for path in paths:
            _allow(self.fd, path, (EXECUTE | READ_FILE | READ_DIR) & self.handled)

    def allow_write(self, paths: Iterable[str], follow: bool = True) -> None:
        """``follow=False``: a link anywhere on a path is refused (``OSError``), not followed."""
        for path in paths:
            if path not in self.writable:  # a repeated rule costs a path walk for nothing
                _allow(self.fd, path, self.handled & ~(MAKE_CHAR | MAKE_BLOCK), follow)
                self.writable.add(path)

    def allow_files(self, paths: Iterable[str]) -> None:
        """Files beneath ``paths`` may be read by name; nothing there listed or changed."""
        for path in paths:
            _allow(self.fd, path, READ_FILE & self.handled)

    def allow_listing(self, paths: Iterable[str]) -> None:
        for path in paths:
            _allow(self.fd, path, READ_DIR & self.handled)

    def allow_devices(self, paths: Iterable[str]) -> None:
        for path in paths:
            _allow(self.fd, path, (READ_DIR | READ_FILE | WRITE_FILE | IOCTL_DEV) & self.handled)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def restrict(self) -> None:
        """Enforce on this thread and what it starts later. Run it before any other thread
        exists: Landlock binds the calling thread only."""
        try:
            _syscall("landlock_restrict_self", self.fd, 0)
        finally:
            os.close(self.fd)
            self.fd = -1


def _allow(ruleset: int, path: str, rights: int, follow: bool = True) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC) if follow else open_unlinked(path, os.O_PATH)
    except FileNotFoundError:
        return  # nothing there to allow
    except OSError:
        if not follow:
            raise  # a link where the engine made a directory: the job must not start
        return
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):  # an O_PATH fd can be fstat'ed
            rights &= _FILE_RIGHTS  # a rule on a file may only carry file rights
        rule = _PathBeneath(rights, fd)
        _syscall("landlock_add_rule", ruleset, _RULE_PATH_BENEATH, ctypes.addressof(rule), 0)
    finally:
        os.close(fd)
