"""What compile steps made, kept so that the same program is compiled once: across every
session of the engine for ``run_code`` (a SandboxFusion client sends each request in a session
of its own) and ``code_eval``; and precompiled headers for C++.
This module is the cache's format and its readers' side, in the worker; the engine's shared
cache is written by the supervisor alone (``engine._compile_store``).

An entry's key is a hash of everything the compile step sees: the language, its toolchain (real
path, size and time of each program), the compile command and environment, the source and the
files written beside it. An entry is a directory named by its key holding the step's outputs
(``Language.outputs``) and ``compile_result.json``: the step's result and each output's size
and SHA-256. It is made in a staging directory and renamed into place whole, so that it is
seen complete or not at all, and never changed after; on a hit each output is opened (never
following a link, regular files only), read and checked against its hash before it is copied
into the run's directory, so that an entry changed by anyone is a miss, never a program run.

Who writes the engine's shared cache: the supervisor, nobody else. The workers of ``run_code``
and ``code_eval`` may read a file of it by its name and list or change nothing
(``sandbox._landlock``: its directories are those plugins' ``plugin_dirs``; every other
plugin's workers do not even see them), and every directory and file of it belongs to the
engine's uid (mode 0711 and 0444): a session uid can neither list it nor change a mode there.
A worker that compiled a program *offers* its outputs (``sandbox._sharing``); the supervisor
works the key out again from the call's own arguments, checks the outputs and keeps them. So
what a worker knows of the cache (a warm Python fork can read its parent's frames) is
harmless: to read an entry one must know its key, that is the whole source and files of the
program it holds; to change one, be the supervisor. Precompiled headers are the same: a
worker whose program includes one that is not built yet asks for it, and the supervisor
builds it, from the system's header alone.

The compiler runs in a private directory of the call's tmp and reads nothing a session could
change beyond it (``sandbox._landlock.confine_writes(readable=...)``), so that what it makes
depends on nothing but the key. Where Landlock (ABI 3, which also governs truncation) is
missing, nothing is shared: a session keeps its own cache in its workspace (``.a2e/compiled``),
written by its own worker, or, without Landlock at all, nothing is cached.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import glob
import hashlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from a2e_engine.sandbox._beneath import read_up_to
from a2e_engine.sandbox._landlock import abi_version
from a2e_engine.sandbox._offers import offer
from a2e_engine.tools._languages import Language

__all__ = [
    "MAX_RESULT_BYTES",
    "PLUGINS",
    "CompileCache",
    "Hit",
    "Outputs",
    "PrecompiledHeaders",
    "caches_for",
    "evict",
    "is_key",
    "is_output_name",
    "outputs_of",
    "read_entry",
    "read_outputs",
    "remove_tree",
    "size_of",
    "with_dir",
    "without_dir",
    "write_entry",
    "write_new",
    "write_outputs",
]

#: The plugins whose workers alone may read the engine's shared cache, and offer to it.
PLUGINS = ("run_code", "code_eval")
RESULT = "compile_result.json"
FORMAT = 1
#: Where a result said the directory it was compiled in (its stderr, say), kept in an entry:
#: a hit says the directory it is placed in instead, and no session's path reaches another.
_DIR_MARK = "\0dir\0"
#: A ``compile_result.json`` larger than this is not ours.
MAX_RESULT_BYTES = 1 << 20
#: Landlock's ABI from which truncating a file is governed as writing it is.
_ABI_TRUNCATE = 3
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: An entry's directory, opened to reach its files by name: a path, not a listing (what a
#: ``run_code`` worker may do there).
_REACH_DIR = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


Outputs = dict[str, tuple[bytes, int]]
"""What a compile step made: each output's name (at the top of its directory), its content and
its mode."""


@dataclass(frozen=True)
class Hit:
    """A usable entry: its result and its outputs, read and checked."""

    result: dict[str, Any]
    outputs: Outputs

    def place(self, where: int, path: str) -> dict[str, Any]:
        """Write the outputs into the directory ``where`` (a descriptor; copies: the program
        may change its own files, not the entry); the result, as if compiled at ``path``."""
        write_outputs(self.outputs, where)
        return with_dir(self.result, path)


def write_outputs(outputs: Outputs, where: int) -> None:
    """Each output as a new file in the directory ``where`` (a descriptor; one of the
    request's files by that name gives way), never through a link."""
    for name, (content, mode) in outputs.items():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=where)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(name, flags, 0o600, dir_fd=where)
        try:
            _write_all(fd, content)
            os.fchmod(fd, mode)
        finally:
            os.close(fd)


class CompileCache:
    """Entries beneath ``root``. ``shared``: the engine's, which this process reads and offers
    to; otherwise a session's, which this process writes itself."""

    def __init__(self, root: str, shared: bool = False) -> None:
        self.root = root
        self.shared = shared

    @classmethod
    def for_session(cls, workspace: str) -> CompileCache:
        return cls(os.path.join(workspace, ".a2e", "compiled"))

    @staticmethod
    def key(language: Language, code: str, files: Mapping[str, Any]) -> str:
        # The command as written, not where it runs: the key must not hold the directory.
        seen = [
            FORMAT,
            language.name,
            [list(part) for part in language.toolchain()],
            language.compile_argv(code, ""),
            sorted(language.env.items()),
            code,
            _files_seen(files),
        ]
        return hashlib.sha256(json.dumps(seen).encode()).hexdigest()

    def lookup(self, key: str) -> Hit | None:
        """The entry of ``key``, read whole and checked, or None (absent, incomplete, changed,
        evicted while being read: then the caller compiles)."""
        hit = read_entry(self.root, key)
        if hit is None:
            return None
        if self.shared:
            offer("used", {"key": key})  # the supervisor keeps the recently used
        else:
            with contextlib.suppress(OSError):
                os.utime(os.path.join(self.root, key))
        return hit

    def store(self, key: str, outputs: Outputs, result: dict[str, Any], where: str) -> None:
        """Keep ``outputs`` (``read_outputs`` of ``where``, the directory they were compiled
        in) and ``result``: offered to the supervisor for the shared cache, written here for a
        session's. Nothing is kept when the disk is full; for the shared cache, when it is too
        large to offer in one frame, or the supervisor finds it does not hold."""
        result = without_dir(result, where)
        if not self.shared:
            with contextlib.suppress(OSError):
                write_entry(self.root, key, outputs, result, 0o700)
            return
        encoded = {
            name: {"mode": mode, "data": base64.b64encode(content).decode()}
            for name, (content, mode) in outputs.items()
        }
        if not offer("entry", {"key": key, "result": result, "outputs": encoded}):
            self.nothing_to_share(key)

    def nothing_to_share(self, key: str) -> None:
        """Tell the supervisor that this call's compile of ``key`` ended with nothing it can
        keep (it failed other than on its source, or its outputs are too large to offer): the
        calls of the same program waiting for it compile for themselves now rather than at its
        end."""
        if self.shared:
            offer("compiled", {"key": key})


def read_entry(root: str, key: str) -> Hit | None:
    """The entry of ``key`` beneath ``root``, read whole and checked, or None."""
    try:
        entry = os.open(os.path.join(root, key), _REACH_DIR)
    except OSError:
        return None
    try:
        manifest = json.loads(_read_regular(entry, RESULT, MAX_RESULT_BYTES))
        expected = manifest["outputs"]
        if manifest.get("format") != FORMAT or not isinstance(expected, dict):
            return None
        if not all(is_output_name(name) for name in expected):
            return None
        # Every file opened before any is read: what is open stays readable whole even if the
        # entry is evicted meanwhile.
        opened: dict[str, int] = {}
        try:
            for name in expected:
                opened[name] = os.open(name, _OPEN_FILE, dir_fd=entry)
            outputs = {}
            for name, fd in opened.items():
                content = _read_checked(fd, expected[name])
                if content is None:
                    return None
                outputs[name] = (content, int(expected[name]["mode"]) & 0o755)
        finally:
            for fd in opened.values():
                os.close(fd)
        result = manifest["result"]
        return Hit(result, outputs) if isinstance(result, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    finally:
        os.close(entry)


def write_entry(
    root: str, key: str, outputs: Outputs, result: dict[str, Any], dir_mode: int
) -> int:
    """Make the entry of ``key`` beneath ``root`` whole (staged, then renamed in; files 0444,
    directories ``dir_mode``); the bytes it holds. Two writers of one key: the first to rename
    its entry in keeps it; one that cannot be used (changed, half evicted) is replaced.
    ``OSError`` (a full disk, say) leaves nothing behind."""
    os.makedirs(root, mode=0o700, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".staging-", dir=root)
    try:
        manifest: dict[str, Any] = {"format": FORMAT, "result": result, "outputs": {}}
        for name, (content, mode) in outputs.items():
            write_new(os.path.join(staging, name), content, mode & 0o555 | 0o444)
            manifest["outputs"][name] = {
                "size": len(content),
                "sha256": hashlib.sha256(content).hexdigest(),
                "mode": mode & 0o755,
            }
        described = json.dumps(manifest).encode()
        write_new(os.path.join(staging, RESULT), described, 0o444)
        os.chmod(staging, dir_mode)
        _rename_in(root, staging, key)
    except BaseException:
        remove_tree(staging)
        raise
    return sum(len(content) for content, _ in outputs.values()) + len(described)


def _rename_in(root: str, staging: str, key: str) -> None:
    entry = os.path.join(root, key)
    try:
        os.rename(staging, entry)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
        if read_entry(root, key) is not None:
            remove_tree(staging)  # another's came first
            return
        # One that cannot be used (changed, or left half-evicted): ours replaces it.
        evict(root, key)
        os.rename(staging, entry)


def evict(root: str, name: str) -> bool:
    """Rename the entry aside, then remove it (a reader that opened its files keeps reading
    them; one that did not finds nothing); False when it was gone already."""
    aside = os.path.join(root, f".evicted-{os.urandom(8).hex()}")
    try:
        os.rename(os.path.join(root, name), aside)
    except OSError:
        return False
    remove_tree(aside)
    return True


class PrecompiledHeaders:
    """Precompiled headers (``Language.precompile``: C++'s ``bits/stdc++.h`` and ``iostream``)
    beneath ``root``, one directory per header, language, toolchain and flags:
    ``<root>/<hash>/bits/stdc++.h.gch``, found by the compile through ``-I<root>/<hash>``. A
    compiler uses one only when it was made by the same compiler with the same flags and
    macros, and ignores it otherwise; a compile that cannot use it reads the header itself, so
    a header is a speed-up, never a change.

    Built by the supervisor (``engine._compile_store``) when a call first asks for it
    (``request``), beside the calls: the first ones compile without it."""

    def __init__(self, root: str) -> None:
        self.root = root

    def directory(self, language: Language, header: str) -> str:
        seen = [FORMAT, language.name, header, [list(p) for p in language.toolchain()]]
        seen += [language.precompile_argv("", ""), sorted(language.env.items())]
        return os.path.join(self.root, hashlib.sha256(json.dumps(seen).encode()).hexdigest())

    def ready(self, language: Language, header: str) -> str | None:
        """The directory to give the compiler with ``-I``, or None when ``header`` is not built."""
        where = self.directory(language, header)
        try:
            info = os.lstat(os.path.join(where, header + ".gch"))
        except OSError:
            return None
        return where if stat.S_ISREG(info.st_mode) else None

    def request(self, language: Language, header: str) -> None:
        """Ask the supervisor to build ``header`` for ``language`` (it builds each once)."""
        offer("header", {"language": language.name, "header": header})


def caches_for(
    plugin_dirs: tuple[str, ...], workspace: str
) -> tuple[CompileCache | None, PrecompiledHeaders | None]:
    """The compile cache a call uses and where precompiled headers are: the engine's shared
    ones when it gave this plugin its directories and Landlock governs truncation too; else
    the session's own cache where there is Landlock; else none."""
    abi = abi_version()
    if len(plugin_dirs) == 2 and abi >= _ABI_TRUNCATE:
        entries, headers = plugin_dirs
        return CompileCache(entries, shared=True), PrecompiledHeaders(headers)
    return (CompileCache.for_session(workspace) if abi else None), None


def _files_seen(files: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The files a compile sees, as the key holds them: those written (a ``null`` content is
    not), each under its normalised path; two names of one file are refused (``ValueError``),
    as the run refuses them (``tools._confined.decoded_files``): keys must differ wherever what
    is compiled does."""
    seen = sorted(
        (os.path.normpath(str(path)), str(content))
        for path, content in files.items()
        if content is not None
    )
    if len({path for path, _ in seen}) != len(seen):
        raise ValueError("files names one file twice")
    return seen


def outputs_of(where: str, patterns: tuple[str, ...]) -> list[str]:
    """The files beneath ``where`` that ``patterns`` match, relative to it."""
    found: list[str] = []
    for pattern in patterns:
        for path in glob.glob(os.path.join(where, pattern)):
            if os.path.isfile(path):
                found.append(os.path.relpath(path, where))
    return found


def read_outputs(
    built: str, patterns: tuple[str, ...], largest: int | None = None
) -> Outputs | None:
    """What ``patterns`` match in ``built``, or None when they are not all plain files at the
    top of it (a link, a FIFO, a directory) or come to more than ``largest`` bytes."""
    names = outputs_of(built, patterns)
    if not names or not all(is_output_name(name) for name in names):
        return None
    directory = os.open(built, _OPEN_DIR)
    try:
        outputs = {}
        total = 0
        for name in names:
            try:
                fd = os.open(name, _OPEN_FILE, dir_fd=directory)
            except OSError:
                return None  # a link, or gone
            try:
                info = os.fstat(fd)
                total += info.st_size
                if not stat.S_ISREG(info.st_mode) or (largest is not None and total > largest):
                    return None
                outputs[name] = (read_up_to(fd, info.st_size), stat.S_IMODE(info.st_mode))
            finally:
                os.close(fd)
        return outputs
    finally:
        os.close(directory)


# -- helpers --


def _read_checked(fd: int, expected: Any) -> bytes | None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size != int(expected["size"]):
        return None
    content = read_up_to(fd, info.st_size)
    if hashlib.sha256(content).hexdigest() != expected["sha256"]:
        return None
    return content


def _read_regular(directory: int, name: str, limit: int) -> bytes:
    fd = os.open(name, _OPEN_FILE, dir_fd=directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise ValueError(f"{name} is not a regular file of at most {limit} bytes")
        return read_up_to(fd, info.st_size)
    finally:
        os.close(fd)


def write_new(path: str, content: bytes, mode: int) -> None:
    """A new file at ``path`` (never through a link, never an existing one) with ``mode``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        _write_all(fd, content)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _write_all(fd: int, content: bytes) -> None:
    view = memoryview(content)
    while view:
        view = view[os.write(fd, view) :]


def remove_tree(path: str) -> None:
    """Remove an entry (flat: files only), first giving its directory back a mode its owner
    may remove it with."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)


def size_of(path: str) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for item in os.scandir(path):
            with contextlib.suppress(OSError):
                total += item.stat(follow_symlinks=False).st_size
    return total


def is_output_name(name: Any) -> bool:
    return isinstance(name, str) and os.sep not in name and name not in ("", ".", "..", RESULT)


def is_key(name: Any) -> TypeGuard[str]:
    return isinstance(name, str) and len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def without_dir(result: dict[str, Any], where: str) -> dict[str, Any]:
    return {k: v.replace(where, _DIR_MARK) if isinstance(v, str) else v for k, v in result.items()}


def with_dir(result: dict[str, Any], where: str) -> dict[str, Any]:
    return {k: v.replace(_DIR_MARK, where) if isinstance(v, str) else v for k, v in result.items()}
