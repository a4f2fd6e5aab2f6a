"""Layer ``writable_root``: a call may write anywhere its uid may, and all it writes lands in a
layer of its own, capped and gone with the worker; the host's files stay as they are beneath.

Why: programs graded the way SandboxFusion grades them write where they like (``/mnt/data``,
a home directory, a file next to a system one) and ask for those files back by absolute path.
A read-only root fails them where SandboxFusion, which runs each program in an overlay of its
own, passes them; a writable host root would let one call change what the next one runs.

How: each worker mounts one tmpfs of ``Limits.tmp_mb`` that holds everything a call can write:
the skeleton of a new root, its ``/tmp``, fresh empty top-level directories (``/mnt``,
``/home``, ``/root``... mode ``1777``, nothing of the host's in them) and the upper layers of
the overlays that show the engine's read roots with the host's files beneath: writing over a
host file there copies it up into the tmpfs, and the host's stays untouched. The system's
directories and the code (the Python installation, the engine's and the plugins') are shown
read-only (``prepare`` says why). The engine's own writable paths (the state directory: the
sessions' workspaces, quotas and all) are bound in as they are: sharing them is their purpose.
The worker then moves the new root onto ``/`` and ``chroot``s into it: ``pivot_root`` took 17
to 19 ms on our machines (it visits every task of the host), the move and ``chroot`` a few
hundredths of one. Every byte counts against the one cap (and, being tmpfs pages, against the
call's memory cgroup); ``ENOSPC`` past it.

What a tool runs under a Landlock layer of its own (``sandbox._landlock.confine_writes``) may
write the directories of ``program_writable()`` besides its own: the run layer's top-level
directories that hold none of the engine's shared paths. With the state directory under
``/tmp`` (``engine._state_dir`` puts it in ``/var/tmp`` by default), ``/tmp`` itself is not
among them: the compile cache lives there.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass

from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._landlock import SYSTEM_READ_PATHS, covering_paths
from a2e_engine.sandbox._paths import strictly_under, under
from a2e_engine.sandbox._preparation import Preparation
from a2e_engine.sandbox._probe import Answer, in_child
from a2e_engine.sandbox._quota import mount_points

__all__ = ["RunRoot", "enter", "plan", "prepare", "program_writable", "report_off"]

MS_MOVE = 8192
MNT_DETACH = 2

#: Top-level directories every run layer has, empty, besides the host's own top-level names.
FRESH = ("home", "mnt", "opt", "root", "srv", "media", "var", "run")
#: Not fresh: the worker's own /proc and /dev are bound in, and /sys is nobody's to read.
_SPECIAL = ("proc", "dev", "sys", "tmp")

_program_writable: tuple[str, ...] = ()
_entered = False


@dataclass(frozen=True)
class RunRoot:
    """What every worker's run layer is made of, worked out once by the zygote: a worker only
    makes directories and mounts, in this order, with no look at what is there."""

    size_mb: int
    #: Directories of the new root and their modes, parents first: fresh top-level ones
    #: (1777), and the way to everything mounted in it.
    skeleton: tuple[tuple[str, int], ...]
    #: Host directories shown beneath the layer, writes copied up; a parent before its children.
    overlays: tuple[str, ...]
    #: Host directories shown read-only, with what is mounted beneath them.
    bound: tuple[str, ...]
    #: Host files shown read-only, each with whether an empty file must be made to bind it on.
    file_binds: tuple[tuple[str, bool], ...]
    #: The engine's writable paths: bound as they are, with what is mounted beneath them.
    shared: tuple[str, ...]
    #: Symbolic links to make, path and target: the host's top-level ones (``/bin``) and those
    #: on the way to what a call reads.
    links: tuple[tuple[str, str], ...]
    #: The run layer's directories that hold none of ``shared``: writable by the programs a
    #: tool runs, as by the worker.
    program_writable: tuple[str, ...]


def prepare(prep: Preparation, template_fd: int) -> RunRoot | None:
    """In the zygote, once the workers' mount template exists: the run layer every worker
    gets, tried once in a child; ``None`` (reported why) where the host cannot have it.

    The system's directories and the code (the Python installation, the engine's and the
    plugins') are bound read-only, even for calls that run as root: a tool imports lazily,
    after the programs it ran, and must import what the host has. A session's uid could write
    none of them anyway, and a bind costs a worker far less than an overlay (about 0.12 ms to
    mount, and as much to take down). Only the read roots, data that may hold what anyone may
    write, are overlays."""
    settings = prep.settings
    if not settings.isolation.writable_root:
        report_off(prep, "disabled by configuration")
        return None
    named = (*SYSTEM_READ_PATHS, *prep.code_paths, *settings.read_roots)
    try:
        root, why_not = plan(
            covering_paths(named),
            covering_paths(settings.read_roots),
            settings.writable_paths,
            settings.limits.tmp_mb,
            named,
        )
    except (OSError, ValueError) as exc:  # a path or a mount table it cannot read
        root, why_not = None, f"the run layer could not be planned: {exc}"
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
        overlays=list(root.overlays),
        read_only=list(root.bound),
        program_writable=list(root.program_writable),
    )
    return root


def report_off(prep: Preparation, why_not: str) -> None:
    prep.report("writable_root", why_not)


def plan(
    readable: Iterable[str],
    written_through: Iterable[str],
    writable: Iterable[str],
    size_mb: int,
    named: Iterable[str] = (),
) -> tuple[RunRoot | None, str | None]:
    """In the zygote: the run layer showing the ``readable`` paths (files or directories, each
    resolved, none beneath another), those of them ``written_through`` as overlays and the
    others read-only, with the engine's ``writable`` paths bound in as they are; or ``None``
    and why not. The symbolic links on the way to the ``named`` paths (as they were given,
    before they were resolved) are made again in the layer."""
    readable = [p for p in readable if not under(p, "/proc")]
    through = set(written_through)
    kept = [os.path.realpath(p) for p in writable if os.path.exists(p)]
    shared = tuple(dict.fromkeys(p for p in kept if os.path.isdir(p)))
    if "/" in readable:
        return None, "a read root is / itself: no layer can be laid over the whole host"
    overlays = [p for p in readable if os.path.isdir(p) and p in through]
    bound = [p for p in readable if os.path.isdir(p) and p not in through]
    files = [p for p in (*readable, *kept) if not os.path.isdir(p)]
    # What is mounted beneath an overlay is not part of it: shown on its own (a read-only bind
    # takes what is mounted beneath it along).
    for point in mount_points():
        if point in readable or any(under(point, s) for s in shared):
            continue
        if any(under(point, top) for top in ("/proc", "/dev", "/sys")):
            continue
        if any(under(point, d) for d in overlays):
            (overlays if os.path.isdir(point) else files).append(point)
    overlays.sort(key=lambda p: p.count("/"))
    own = {p.lstrip("/") for p in (*overlays, *bound, *files, *shared) if p.count("/") == 1}
    links, fresh = [], set(FRESH)
    for entry in os.scandir("/"):
        if entry.is_symlink():
            links.append((entry.path, os.readlink(entry.path)))
        elif entry.is_dir():
            fresh.add(entry.name)
    fresh -= {*_SPECIAL, *own, *(path.lstrip("/") for path, _ in links)}
    links += [link for link in _links_on_the_way(named) if link not in links]

    def shows(path: str) -> bool:  # already there: beneath something shown
        return any(strictly_under(path, d) for d in (*overlays, *bound))

    skeleton: dict[str, int] = {}
    for name in (*sorted(fresh), "tmp"):
        skeleton[f"/{name}"] = 0o1777
    skeleton.update({"/dev": 0o755, "/proc": 0o755})
    made = [p for p, _ in links if not shows(p)]
    for path in (*overlays, *bound, *shared, *(os.path.dirname(p) for p in (*files, *made))):
        for step in _steps(path):
            if step not in skeleton and not shows(step):
                skeleton[step] = _mode_as_on_the_host(step)
    # The run layer's own top-level directories and the read roots' (as overlays, written
    # through): not those holding the engine's state, nor the system's or the code's.
    tops = {*fresh, "tmp", *(p.strip("/").split("/")[0] for p in overlays)}
    free = tuple(f"/{t}" for t in sorted(tops) if not any(under(s, f"/{t}") for s in shared))
    root = RunRoot(
        size_mb=size_mb,
        skeleton=tuple(skeleton.items()),
        overlays=tuple(dict.fromkeys(overlays)),
        bound=tuple(bound),
        file_binds=tuple((p, not shows(p)) for p in dict.fromkeys(files)),
        shared=shared,
        links=tuple(link for link in links if link[0] in made),
        program_writable=free,
    )
    return root, None


def _steps(path: str) -> list[str]:
    """``/a``, ``/a/b``, ``/a/b/c`` for ``/a/b/c``."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[0]]


def _mode_as_on_the_host(path: str) -> int:
    """The host directory's mode, passable by anyone (a session's uid must reach what lies
    beneath) and writable by others only with the sticky bit (``/var/tmp``): what the layer
    makes in it must stay; or ``0755`` where the host has none."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o755
    return mode | 0o755 if mode & stat.S_ISVTX else (mode & ~0o022) | 0o755


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
    global _program_writable, _entered
    held: dict[str, int] = {}
    try:
        # Held before anything is mounted over them (the tmpfs goes on /tmp, where the
        # state directory often lies).
        files = (path for path, _ in root.file_binds)
        for path in dict.fromkeys(
            ("/dev", "/proc", *root.overlays, *root.bound, *files, *root.shared)
        ):
            try:
                held[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except FileNotFoundError:
                continue  # gone since the zygote planned the layer: shown no more
        _build(root, held)
    finally:
        for fd in held.values():
            os.close(fd)
    _program_writable = root.program_writable
    _entered = True


def link_home(home: str, workspace: str) -> bool:
    """In a worker that entered its run layer: ``home`` made a link to ``workspace``, in one of
    the layer's fresh top-level directories (``FRESH``), which nothing of the host's is in and
    which dies with the worker; whether it is there. Nothing without the layer: the host's
    directory would be written."""
    parent, name = os.path.split(home.rstrip("/"))
    if not _entered or not name or parent.strip("/") not in FRESH:
        return False
    try:
        os.symlink(workspace, home)
    except FileExistsError:
        pass  # a resident worker's later job, or the session's programs put something there
    except OSError:
        return False
    return True


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
    # A mount of its own before anything is mounted in it, to be moved onto / with all that is.
    syscalls.mount(new, new, None, syscalls.MS_BIND)
    umask = os.umask(0)
    try:
        for path, mode in root.skeleton:
            os.mkdir(new + path, mode)
    finally:
        os.umask(umask)
    for index, lower in enumerate(root.overlays):
        if lower not in held:
            continue
        upper, work = f"{base}/{index}.upper", f"{base}/{index}.work"
        os.mkdir(upper)
        os.mkdir(work, 0o700)
        # The merged root takes its owner and mode from the upper layer's: the host's, as shown.
        shown = os.fstat(held[lower])
        try:
            os.chown(upper, shown.st_uid, shown.st_gid)
        except OSError:
            pass  # an owner a user namespace does not map: the upper layer stays ours
        os.chmod(upper, stat.S_IMODE(shown.st_mode))
        syscalls.mount(
            "overlay",
            new + lower,
            "overlay",
            syscalls.MS_NOSUID | syscalls.MS_NODEV,
            f"lowerdir=/proc/self/fd/{held[lower]},upperdir={upper},workdir={work}",
        )
    for path, target in root.links:
        os.symlink(target, new + path)
    bind, tree = syscalls.MS_BIND, syscalls.MS_BIND | syscalls.MS_REC
    for path in root.bound:
        if path not in held:
            continue
        syscalls.mount(f"/proc/self/fd/{held[path]}", new + path, None, tree)
    for path, make in root.file_binds:
        if path not in held:
            continue
        if make:
            os.close(os.open(new + path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o644))
        syscalls.mount(f"/proc/self/fd/{held[path]}", new + path, None, bind)
    for path in ("/dev", "/proc", *root.shared):
        if path not in held:
            continue
        syscalls.mount(f"/proc/self/fd/{held[path]}", new + path, None, tree)
    for path in root.shared:
        if path in held:
            # The copy beneath the new root would go on receiving every session's mount,
            # out of sight and out of reach, for the worker's whole life: detached.
            syscalls.libc.umount2(os.fsencode(f"/proc/self/fd/{held[path]}"), MNT_DETACH)
    os.chdir(new)
    syscalls.mount(".", "/", None, MS_MOVE)
    os.chroot(".")
    os.chdir("/")
