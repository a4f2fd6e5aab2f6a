"""Layer ``writable_root``: a call may write anywhere its uid may, and all it writes lands in a
layer of its own, capped and gone with the worker; the host's files stay as they are beneath.

Why: programs graded the way SandboxFusion grades them write where they like (``/mnt/data``,
a home directory, a file next to a system one) and ask for those files back by absolute path.
A read-only root fails them where SandboxFusion, which runs each program in an overlay of its
own, passes them; a writable host root would let one call change what the next one runs.

How: each worker mounts one tmpfs of ``Limits.tmp_mb`` that holds everything a call can
write: the skeleton of a new root, its ``/tmp``, fresh empty top-level directories (``/mnt``,
``/home``, ``/root``... mode ``1777``, nothing of the host's in them) and the upper layers of
overlays that show the directories a call may read (the system's, the Python installation,
the plugins' code, the engine's read roots) with the host's files beneath. Writing over a host
file copies it up into the tmpfs; the host's stays untouched. The engine's own writable paths
(the state directory: the sessions' workspaces, quotas and all) are bound in as they are:
sharing them is their purpose. The worker then moves the new root onto ``/`` and ``chroot``s
into it: ``pivot_root`` took 17 to 19 ms on our machines (it visits every task of the host),
the move and ``chroot`` a few hundredths of one. Every byte counts against the one cap (and,
being tmpfs pages, against the call's memory cgroup); ``ENOSPC`` past it.

What a tool runs under a Landlock layer of its own (``sandbox.landlock.confine_writes``) may
write the directories of ``program_writable()`` besides its own: the run layer's top-level
directories that hold none of the engine's shared paths. With the state directory under
``/tmp`` (the default), ``/tmp`` itself is not among them: the compile cache lives there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from a2e_engine.sandbox import syscalls
from a2e_engine.sandbox.landlock import SYSTEM_READ_PATHS, covering_paths
from a2e_engine.sandbox.preparation import Preparation
from a2e_engine.sandbox.probe import Answer, in_child
from a2e_engine.sandbox.quota import mount_points, under

__all__ = ["RunRoot", "enter", "plan", "prepare", "program_writable", "report_off"]

MS_MOVE = 8192

#: Top-level directories every run layer has, empty, besides the host's own top-level names.
FRESH = ("home", "mnt", "opt", "root", "srv", "media", "var", "run")
#: Not fresh: the worker's own /proc and /dev are bound in, and /sys is nobody's to read.
_SPECIAL = ("proc", "dev", "sys", "tmp")

_program_writable: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunRoot:
    """What every worker's run layer is made of, worked out once by the zygote."""

    size_mb: int
    #: Host directories shown beneath the layer, writes copied up; a parent before its children.
    overlays: tuple[str, ...]
    #: Host files mounted beneath an overlay (a container's ``/etc/hosts``): bound as they are.
    file_binds: tuple[str, ...]
    #: The engine's writable paths: bound as they are, with what is mounted beneath them.
    shared: tuple[str, ...]
    fresh: tuple[str, ...]  # empty top-level directories, mode 1777
    #: Symbolic links, path and target: the host's top-level ones (``/bin``) and those on the
    #: way to what a call reads.
    links: tuple[tuple[str, str], ...]
    #: The run layer's directories that hold none of ``shared``: writable by the programs a
    #: tool runs, as by the worker.
    program_writable: tuple[str, ...]


def prepare(prep: Preparation, template_fd: int) -> RunRoot | None:
    """In the zygote, once the workers' mount template exists: the run layer every worker
    gets, tried once in a child; ``None`` (reported why) where the host cannot have it."""
    settings = prep.settings
    if not settings.writable_root:
        report_off(prep, "disabled by configuration")
        return None
    named = (*SYSTEM_READ_PATHS, *prep.code_paths, *settings.read_roots)
    root, why_not = plan(
        covering_paths(named), settings.writable_paths, settings.limits.tmp_mb, named
    )
    if root is None:
        report_off(prep, why_not or "")
        return None
    ready = root

    def attempt() -> Answer:
        syscalls.setns(template_fd, syscalls.CLONE_NEWNS)
        syscalls.unshare(syscalls.CLONE_NEWNS)
        enter(ready)
        return Answer()

    try:
        in_child(attempt)
    except OSError as exc:
        report_off(prep, f"the run layer could not be built: {exc}")
        return None
    prep.report(
        "writable_root",
        None,
        size_mb=root.size_mb,
        shown=list(root.overlays),
        program_writable=list(root.program_writable),
    )
    return root


def report_off(prep: Preparation, why_not: str) -> None:
    prep.report("writable_root", why_not)


def plan(
    readable: Iterable[str], writable: Iterable[str], size_mb: int, named: Iterable[str] = ()
) -> tuple[RunRoot | None, str | None]:
    """In the zygote: the run layer over the ``readable`` paths (files or directories, each
    resolved, none beneath another) with the engine's ``writable`` paths bound in as they are; or
    ``None`` and why not. The symbolic links on the way to the ``named`` paths (as they were
    given, before they were resolved) are made again in the layer."""
    readable = [p for p in readable if not under(p, "/proc")]
    kept = [os.path.abspath(p) for p in writable if os.path.exists(p)]
    shared = tuple(dict.fromkeys(p for p in kept if os.path.isdir(p)))
    if "/" in readable:
        return None, "a read root is / itself: no layer can be laid over the whole host"
    directories = [p for p in readable if os.path.isdir(p)]
    files = [p for p in (*readable, *kept) if not os.path.isdir(p)]
    # What is mounted beneath a shown directory is not part of its overlay: shown on its own.
    for point in mount_points():
        if point in readable or any(under(point, s) for s in shared):
            continue
        if any(under(point, top) for top in ("/proc", "/dev", "/sys")):
            continue
        if any(under(point, d) for d in directories):
            (directories if os.path.isdir(point) else files).append(point)
    directories.sort(key=lambda p: p.count("/"))
    own = {p.lstrip("/") for p in (*directories, *files, *shared) if p.count("/") == 1}
    links, fresh = [], set(FRESH)
    for entry in os.scandir("/"):
        if entry.is_symlink():
            links.append((entry.path, os.readlink(entry.path)))
        elif entry.is_dir():
            fresh.add(entry.name)
    fresh -= {*_SPECIAL, *own, *(path.lstrip("/") for path, _ in links)}
    links += [link for link in _links_on_the_way(named) if link not in links]
    tops = sorted({*fresh, "tmp", *(name for name in own if name not in _SPECIAL)})
    free = tuple(f"/{top}" for top in tops if not any(under(s, f"/{top}") for s in shared))
    root = RunRoot(
        size_mb=size_mb,
        overlays=tuple(dict.fromkeys(directories)),
        file_binds=tuple(dict.fromkeys(files)),
        shared=shared,
        fresh=tuple(sorted(fresh)),
        links=tuple(links),
        program_writable=free,
    )
    return root, None


def _links_on_the_way(paths: Iterable[str]) -> list[tuple[str, str]]:
    """The symbolic links a walk down each of ``paths`` passes, with their targets (a checkout
    whose package directory links to its sources, say)."""
    links: list[tuple[str, str]] = []
    for path in paths:
        here = "/"
        for part in os.path.abspath(path).strip("/").split("/"):
            step = os.path.join(here, part)
            if os.path.islink(step):
                if (step, os.readlink(step)) not in links:
                    links.append((step, os.readlink(step)))
                step = os.path.realpath(step)
            here = step
    return links


def program_writable() -> tuple[str, ...]:
    """In a worker: the directories of its run layer that the programs its tools run may write
    besides their own (empty without the layer)."""
    return _program_writable


def enter(root: RunRoot) -> None:
    """In the worker, in its copy of the template with its own ``/proc``, still privileged:
    build the run layer and make it the root."""
    global _program_writable
    held: dict[str, int] = {}
    try:
        # Held before anything is mounted over them (the tmpfs goes on /tmp, where the
        # state directory often lies).
        for path in ("/dev", "/proc", *root.overlays, *root.file_binds, *root.shared):
            held[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
        _build(root, held)
    finally:
        for fd in held.values():
            os.close(fd)
    _program_writable = root.program_writable


def _build(root: RunRoot, held: dict[str, int]) -> None:
    base = "/tmp"
    syscalls.mount(
        "tmpfs",
        base,
        "tmpfs",
        syscalls.MS_NOSUID | syscalls.MS_NODEV,
        f"mode=755,size={root.size_mb}m,nr_inodes={max(1024, root.size_mb * 64)}",
    )
    new = f"{base}/root"
    os.mkdir(new, 0o755)
    for name in (*root.fresh, "tmp"):
        os.mkdir(f"{new}/{name}")
        os.chmod(f"{new}/{name}", 0o1777)  # mkdir's mode is cut by the umask
    for index, lower in enumerate(root.overlays):
        upper, work = f"{base}/{index}.upper", f"{base}/{index}.work"
        os.mkdir(upper)
        os.mkdir(work, 0o700)
        # The merged root takes its owner and mode from the upper layer's: the host's, as shown.
        shown = os.fstat(held[lower])
        os.chown(upper, shown.st_uid, shown.st_gid)
        os.chmod(upper, stat.S_IMODE(shown.st_mode))
        target = new + lower
        os.makedirs(target, 0o755, exist_ok=True)
        syscalls.mount(
            "overlay",
            target,
            "overlay",
            syscalls.MS_NOSUID | syscalls.MS_NODEV,
            f"lowerdir=/proc/self/fd/{held[lower]},upperdir={upper},workdir={work}",
        )
    for path, target in root.links:
        # Made once what they lie in is there (one may lie in an overlay, and show already).
        if not os.path.lexists(new + path):
            os.makedirs(os.path.dirname(new + path), 0o755, exist_ok=True)
            os.symlink(target, new + path)
    for path in root.file_binds:
        _bind(held[path], new + path, directory=False, recursive=False)
    _bind(held["/dev"], f"{new}/dev", directory=True, recursive=True)
    _bind(held["/proc"], f"{new}/proc", directory=True, recursive=True)
    for path in root.shared:
        _bind(held[path], new + path, directory=True, recursive=True)
    syscalls.mount(new, new, None, syscalls.MS_BIND | syscalls.MS_REC)
    os.chdir(new)
    syscalls.mount(".", "/", None, MS_MOVE)
    os.chroot(".")
    os.chdir("/")


def _bind(fd: int, target: str, directory: bool, recursive: bool) -> None:
    """Bind what ``fd`` holds onto ``target``, made first (with its parents) if missing."""
    if not os.path.lexists(target):
        os.makedirs(os.path.dirname(target), 0o755, exist_ok=True)
        if directory:
            os.mkdir(target, 0o755)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
    flags = syscalls.MS_BIND | (syscalls.MS_REC if recursive else 0)
    syscalls.mount(f"/proc/self/fd/{fd}", target, None, flags)
