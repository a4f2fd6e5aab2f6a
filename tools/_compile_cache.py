"""What compile steps made, kept so that the same program is compiled once: across every
session of the engine for ``run_code`` (a SandboxFusion client sends each request in a session
of its own), within the session otherwise (``code_eval``); and precompiled headers for C++.

An entry's key is a hash of everything the compile step sees: the language, its toolchain (real
path, size and time of each program), the compile command and environment, the source and the
files written beside it. An entry is a directory named by its key holding the step's outputs
(``Language.outputs``) and ``compile_result.json``: the step's result and each output's size
and SHA-256. It is made in a staging directory and renamed into place whole, so that it is
seen complete or not at all, and never changed after; on a hit each output is opened (never
following a link, regular files only), read and checked against its hash before it is copied
into the run's directory, so that an entry changed by anyone is a miss, never a program run.

Who can write it: only the tool's own code in a ``run_code`` worker. The engine makes the
shared cache in its state directory (``shared_compile_cache``: created with the engine, removed
with it) and hands its directories to ``run_code``'s workers alone (``ZygoteSettings
.plugin_dirs``): no other tool's worker may even open them (Landlock), and the compiler and the
program may write only their own directory (``sandbox._landlock.confine_writes``). The compiler
runs in a private directory of the call's tmp, which no other call can write, and reads nothing
a session could change beyond it, so that what it makes depends on nothing but the key; the
tool writes the session's workspace only once its worker can no longer write the cache
(``Submission._fill_home``), so that a link planted there cannot turn its writes into the
cache. The
directories are open to every session uid (mode 0777, no sticky bit: any ``run_code`` worker
may evict any entry) and the entries' directory has a random name that no program is told.
Where Landlock (ABI 3, which also governs truncation) is missing, nothing is shared: a
session keeps its own cache in its workspace (``.a2e/compiled``), or, without Landlock at all,
nothing is cached.

The shared cache holds at most its ``max_bytes``: each entry's size is added to a ledger
(``.usage``, under ``flock``) when it is stored, and once the total passes the bound the least
recently used entries (a hit touches its directory) are evicted down to nine tenths of it. An
entry is evicted by renaming it aside and then removing it: a call that opened it before keeps
reading the files it opened, and one that did not finds nothing. An entry larger than a
quarter of the bound is not stored.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import glob
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._landlock import WriteConfinement, abi_version, confine_writes
from a2e_engine.tools._languages import Language

__all__ = [
    "CompileCache",
    "Hit",
    "Outputs",
    "PrecompileBuild",
    "PrecompiledHeaders",
    "caches_for",
    "outputs_of",
    "read_outputs",
    "shared_compile_cache",
    "write_outputs",
]

#: The plugin whose workers alone may write the shared cache.
PLUGIN = "run_code"
_RESULT = "compile_result.json"
_USAGE = ".usage"
_LOCK = ".lock"
_FORMAT = 1
#: Where a result said the directory it was compiled in (its stderr, say), kept in an entry:
#: a hit says the directory it is placed in instead, and no session's path reaches another.
_DIR_MARK = "\0dir\0"
#: Staging directories older than this belong to a worker that was killed while storing.
_STALE_S = 600.0
#: A ``compile_result.json`` larger than this is not ours.
_MAX_RESULT_BYTES = 32 << 20
#: Landlock's ABI from which truncating a file is governed as writing it is.
_ABI_TRUNCATE = 3
_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


Outputs = dict[str, tuple[bytes, int]]
"""What a compile step made: each output's name (at the top of its directory), its content and
its mode."""


@dataclass(frozen=True)
class Hit:
    """A usable entry: its result and its outputs, read and checked."""

    result: dict[str, Any]
    outputs: Outputs

    def place(self, where: str) -> dict[str, Any]:
        """Write the outputs into ``where`` (copies: the program may change its own files,
        not the entry); the result, as if compiled there."""
        write_outputs(self.outputs, where)
        return _with_dir(self.result, where)


def write_outputs(outputs: Outputs, where: str) -> None:
    """Each output as a new file in ``where`` (one of the request's files by that name gives
    way), never through a link."""
    directory = _open_dir(where)
    try:
        for name, (content, mode) in outputs.items():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=directory)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(name, flags, 0o600, dir_fd=directory)
            try:
                _write_all(fd, content)
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
    finally:
        os.close(directory)


class CompileCache:
    """Entries beneath ``root``. ``shared``: the engine's cache, bounded by ``max_bytes``, its
    directories open to every session uid; otherwise a session's, as large as it grows."""

    def __init__(self, root: str, shared: bool = False, max_bytes: int = 0) -> None:
        self.root = root
        self.shared = shared
        self.max_bytes = max_bytes

    @classmethod
    def for_session(cls, workspace: str) -> CompileCache:
        return cls(os.path.join(workspace, ".a2e", "compiled"))

    @staticmethod
    def key(language: Language, code: str, files: Mapping[str, Any]) -> str:
        # The command as written, not where it runs: the key must not hold the directory.
        seen = [
            _FORMAT,
            language.name,
            [list(part) for part in language.toolchain()],
            language.compile_argv(code, ""),
            sorted(language.env.items()),
            code,
            sorted((str(path), str(content)) for path, content in files.items()),
        ]
        return hashlib.sha256(json.dumps(seen).encode()).hexdigest()

    def lookup(self, key: str) -> Hit | None:
        """The entry of ``key``, read whole and checked, or None (absent, incomplete, changed,
        evicted while being read: then the caller compiles)."""
        try:
            entry = _open_dir(os.path.join(self.root, key))
        except OSError:
            return None
        try:
            manifest = json.loads(_read_regular(entry, _RESULT, _MAX_RESULT_BYTES))
            expected = manifest["outputs"]
            if manifest.get("format") != _FORMAT or not isinstance(expected, dict):
                return None
            if not all(_is_output_name(name) for name in expected):
                return None
            # Every file opened before any is read: what is open stays readable whole even if
            # the entry is evicted meanwhile.
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
            with contextlib.suppress(OSError):
                os.utime(entry)  # recently used: the last to be evicted
            result = manifest["result"]
            return Hit(result, outputs) if isinstance(result, dict) else None
        except (OSError, ValueError, KeyError, TypeError):
            return None
        finally:
            os.close(entry)

    def store(
        self, key: str, built: str, patterns: tuple[str, ...], result: dict[str, Any]
    ) -> None:
        """Keep the outputs ``patterns`` match in ``built`` (a directory nothing else writes)
        and ``result``. Nothing is kept when an output is not a plain regular file at the top
        of ``built``, when the entry is too large, or when the disk is full. Two calls that
        compile the same thing at once: the first to rename its entry in keeps it."""
        try:
            outputs = read_outputs(built, patterns, self._largest_entry())
        except OSError:
            return
        if outputs is None:
            return
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".staging-", dir=self.root)
        try:
            manifest: dict[str, Any] = {
                "format": _FORMAT,
                "result": _without_dir(result, built),
                "outputs": {},
            }
            for name, (content, mode) in outputs.items():
                _write_new(os.path.join(staging, name), content, mode & 0o555 | 0o444)
                manifest["outputs"][name] = {
                    "size": len(content),
                    "sha256": hashlib.sha256(content).hexdigest(),
                    "mode": mode & 0o755,
                }
            described = json.dumps(manifest).encode()
            _write_new(os.path.join(staging, _RESULT), described, 0o444)
            os.chmod(staging, 0o777 if self.shared else 0o700)  # any worker may evict it
            self._rename_in(staging, key)
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # a full disk, say: not cached
            return
        if self.shared and self.max_bytes:
            size = sum(len(content) for content, _ in outputs.values()) + len(described)
            self._account(key, size)

    def _largest_entry(self) -> int | None:
        return self.max_bytes // 4 if self.shared and self.max_bytes else None

    def _rename_in(self, staging: str, key: str) -> None:
        entry = os.path.join(self.root, key)
        try:
            os.rename(staging, entry)
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            if self.lookup(key) is not None:
                shutil.rmtree(staging, ignore_errors=True)  # another call's came first
                return
            # One that cannot be used (changed, or left half-evicted): ours replaces it.
            self._evict(key)
            os.rename(staging, entry)

    def _evict(self, name: str) -> bool:
        """Rename the entry aside, then remove it; False when it was gone already."""
        aside = os.path.join(self.root, f".evicted-{os.urandom(8).hex()}")
        try:
            os.rename(os.path.join(self.root, name), aside)
        except OSError:
            return False
        _remove_tree(aside)
        return True

    def _account(self, stored: str, size: int) -> None:
        """Add ``size`` to the ledger; past the bound, evict down to 90% of it."""
        try:
            fd = os.open(os.path.join(self.root, _USAGE), os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not _lock(fd, seconds=2.0):
                return  # the next store catches up
            text = os.pread(fd, 64, 0).decode(errors="replace").strip()
            total = int(text) + size if text.isdigit() else None
            if total is None or total > self.max_bytes:
                total = self._shrink(stored, self.max_bytes * 9 // 10)
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(total).encode(), 0)
        except OSError:
            pass
        finally:
            os.close(fd)  # and with it the lock

    def _shrink(self, keep: str, target: int) -> int:
        """Measure every entry; evict the least recently used (never ``keep``) until the
        total is at most ``target``; the total left."""
        entries: list[tuple[float, int, str]] = []
        total = 0
        now = time.time()
        for item in os.scandir(self.root):
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if item.name.startswith(".evicted-"):
                _remove_tree(item.path)  # one whose removal was cut short
            elif item.name.startswith(".staging-"):
                if now - info.st_mtime > _STALE_S:
                    self._evict(item.name)
                else:
                    total += _size_of(item.path)
            elif stat.S_ISDIR(info.st_mode) and _is_key(item.name):
                size = _size_of(item.path)
                total += size
                entries.append((info.st_mtime, size, item.name))
        for _, size, name in sorted(entries):
            if total <= target:
                break
            if name != keep and self._evict(name):
                total -= size
        return total


class PrecompiledHeaders:
    """Precompiled headers (``Language.precompile``: C++'s ``bits/stdc++.h`` and ``iostream``)
    beneath ``root``, one directory per header, language, toolchain and flags:
    ``<root>/<hash>/bits/stdc++.h.gch``, found by the compile through ``-I<root>/<hash>``. A
    compiler uses one only when it was made by the same compiler with the same flags and
    macros, and ignores it otherwise; a compile that cannot use it reads the header itself, so
    a header is a speed-up, never a change.

    Built on first use, by the first call that compiles a program including the header, while
    its own compile runs (``build``), within that compile's time: made in a staging directory
    and renamed into place whole, so that a compiler never reads half of one. One call builds
    at a time (``flock``; others compile without); a language whose build failed, or ran out
    of time ``MAX_ATTEMPTS`` times, goes without for the engine's life."""

    MAX_ATTEMPTS = 3

    def __init__(self, root: str) -> None:
        self.root = root

    def directory(self, language: Language, header: str) -> str:
        seen = [_FORMAT, language.name, header, [list(p) for p in language.toolchain()]]
        seen += [language.precompile_argv("", ""), sorted(language.env.items())]
        return os.path.join(self.root, hashlib.sha256(json.dumps(seen).encode()).hexdigest())

    def ready(self, language: Language, header: str) -> str | None:
        """The directory to give the compiler with ``-I``, or None when ``header`` is not built."""
        where = self.directory(language, header)
        made = os.path.join(where, header + ".gch")
        try:
            info = os.lstat(made)
        except OSError:
            return None
        return where if stat.S_ISREG(info.st_mode) and os.access(made, os.R_OK) else None

    def build(
        self, language: Language, header: str, readable: tuple[str, ...]
    ) -> PrecompileBuild | None:
        """Start building ``language``'s ``header`` (None: another call builds one, or this one
        was given up). ``readable``: what the compiler may read besides the system's paths."""
        where = self.directory(language, header)
        attempts = where + ".attempts"
        lock = -1
        try:
            lock = os.open(os.path.join(self.root, _LOCK), os.O_RDWR | os.O_CLOEXEC)
            if not _lock(lock, seconds=0):
                os.close(lock)
                return None
            if os.path.exists(where) or _size_or_zero(attempts) >= self.MAX_ATTEMPTS:
                os.close(lock)
                return None
            for item in os.scandir(self.root):
                if item.name.startswith(".staging-"):  # a build killed with its call
                    _remove_tree(item.path)
            _append(attempts, 1)
            return PrecompileBuild(self, language, header, where, lock, readable)
        except OSError:
            if lock >= 0:
                os.close(lock)  # PrecompileBuild removed what it made
            return None


class PrecompileBuild:
    """One header being built, beside the compile that asked for it."""

    def __init__(
        self,
        headers: PrecompiledHeaders,
        language: Language,
        header: str,
        where: str,
        lock: int,
        readable: tuple[str, ...],
    ) -> None:
        self.where, self._lock, self._attempts = where, lock, where + ".attempts"
        self.staging = tempfile.mkdtemp(prefix=".staging-", dir=headers.root)
        self._confinement: WriteConfinement | None = None
        try:
            # The header through a file of its own: the build must not find a header of
            # ours by the name it precompiles.
            wrapper = os.path.join(self.staging, "header.h")
            with open(wrapper, "w") as fh:
                fh.write(f"#include <{header}>\n")
            output = os.path.join(self.staging, header + ".gch")
            os.makedirs(os.path.dirname(output), exist_ok=True)
            os.mkdir(os.path.join(self.staging, ".tmp"))
            # Open to every session uid while it is built: if this call is killed, the next
            # builder, of whatever uid, removes what it left.
            for path, _, _ in os.walk(self.staging):
                os.chmod(path, 0o777)
            env = {**os.environ, "HOME": self.staging, "TMPDIR": f"{self.staging}/.tmp"}
            self._confinement = confine_writes((self.staging,), readable)
            preexec = self._confinement.enforce if self._confinement is not None else None
            self._process = subprocess.Popen(
                language.precompile_argv(wrapper, output),
                cwd=self.staging,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                preexec_fn=preexec,
            )
        except BaseException:
            if self._confinement is not None:
                self._confinement.close()
            shutil.rmtree(self.staging, ignore_errors=True)
            raise

    def finish(self, seconds: float) -> bool:
        """Wait at most ``seconds`` for the build; put the header in place if it was made
        (True), else stop it and leave nothing behind. Always releases the lock."""
        try:
            try:
                code = self._process.wait(timeout=max(0.0, seconds))
            except subprocess.TimeoutExpired:
                code = None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._process.pid, 9)  # whatever it left running
            self._process.wait()
            if code is None:
                return False
            if code != 0:
                _append(self._attempts, PrecompiledHeaders.MAX_ATTEMPTS)  # it will not work
                return False
            os.unlink(os.path.join(self.staging, "header.h"))
            shutil.rmtree(os.path.join(self.staging, ".tmp"), ignore_errors=True)
            for path, dirs, files in os.walk(self.staging):
                for name in files:
                    os.chmod(os.path.join(path, name), 0o444)
                for name in dirs:
                    os.chmod(os.path.join(path, name), 0o755)
            os.chmod(self.staging, 0o755)
            os.rename(self.staging, self.where)
            return True
        except OSError:
            return False
        finally:
            if self._confinement is not None:
                self._confinement.close()
            shutil.rmtree(self.staging, ignore_errors=True)  # what did not go in place
            os.close(self._lock)


def caches_for(
    plugin_dirs: tuple[str, ...], workspace: str
) -> tuple[CompileCache | None, PrecompiledHeaders | None]:
    """The compile cache a call uses and where precompiled headers are: the engine's shared
    ones when it gave this plugin its directories and Landlock governs truncation too; else
    the session's own cache where there is Landlock; else none."""
    abi = abi_version()
    if len(plugin_dirs) == 2 and abi >= _ABI_TRUNCATE:
        entries, headers = plugin_dirs
        return CompileCache(entries, shared=True, max_bytes=_max_bytes(entries)), (
            PrecompiledHeaders(headers)
        )
    return (CompileCache.for_session(workspace) if abi else None), None


def shared_compile_cache(state_dir: str, max_mb: int) -> dict[str, tuple[str, ...]]:
    """In the engine, once its state directory exists: the shared cache's directories, as
    ``ZygoteSettings.plugin_dirs`` names them for ``run_code``. ``compile-cache`` (0711, the
    engine's: no session uid can list it) holds ``pch`` (precompiled headers: the compiler is
    told where) and ``entries-<random>`` (no program is told where); each holds the ledger or
    the lock file its users share, made here so that no session uid owns it."""
    parent = os.path.join(state_dir, "compile-cache")
    os.mkdir(parent, 0o711)
    os.chmod(parent, 0o711)
    entries = os.path.join(parent, f"entries-{os.urandom(12).hex()}")
    headers = os.path.join(parent, "pch")
    for where, shared_file, content in ((entries, _USAGE, b"0"), (headers, _LOCK, b"")):
        os.mkdir(where)
        os.chmod(where, 0o777)
        _write_new(os.path.join(where, shared_file), content, 0o666)
    _write_new(os.path.join(entries, ".max_bytes"), str(max_mb << 20).encode(), 0o444)
    return {PLUGIN: (entries, headers)}


def outputs_of(where: str, patterns: tuple[str, ...]) -> list[str]:
    """The files beneath ``where`` that ``patterns`` match, relative to it."""
    found: list[str] = []
    for pattern in patterns:
        for path in glob.glob(os.path.join(where, pattern)):
            if os.path.isfile(path):
                found.append(os.path.relpath(path, where))
    return found


# -- helpers --


def _max_bytes(entries: str) -> int:
    """The bound the engine wrote beside the entries (``shared_compile_cache``)."""
    try:
        text = _read_path(os.path.join(entries, ".max_bytes"), 64).decode().strip()
    except (OSError, ValueError):
        return 0
    return int(text) if text.isdigit() else 0


def read_outputs(
    built: str, patterns: tuple[str, ...], largest: int | None = None
) -> Outputs | None:
    """What ``patterns`` match in ``built``, or None when they are not all plain files at the
    top of it (a link, a FIFO, a directory) or come to more than ``largest`` bytes."""
    names = outputs_of(built, patterns)
    if not names or not all(_is_output_name(name) for name in names):
        return None
    directory = _open_dir(built)
    try:
        outputs = {}
        total = 0
        for name in names:
            fd = os.open(name, _OPEN_FILE, dir_fd=directory)
            try:
                info = os.fstat(fd)
                total += info.st_size
                if not stat.S_ISREG(info.st_mode) or (largest is not None and total > largest):
                    return None
                outputs[name] = (_read_all(fd, info.st_size), stat.S_IMODE(info.st_mode))
            finally:
                os.close(fd)
        return outputs
    finally:
        os.close(directory)


def _read_checked(fd: int, expected: Any) -> bytes | None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size != int(expected["size"]):
        return None
    content = _read_all(fd, info.st_size)
    if hashlib.sha256(content).hexdigest() != expected["sha256"]:
        return None
    return content


def _read_regular(directory: int, name: str, limit: int) -> bytes:
    fd = os.open(name, _OPEN_FILE, dir_fd=directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            raise ValueError(f"{name} is not a regular file of at most {limit} bytes")
        return _read_all(fd, info.st_size)
    finally:
        os.close(fd)


def _read_path(path: str, limit: int) -> bytes:
    directory = _open_dir(os.path.dirname(path))
    try:
        return _read_regular(directory, os.path.basename(path), limit)
    finally:
        os.close(directory)


def _read_all(fd: int, size: int) -> bytes:
    chunks = []
    left = size
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _open_dir(path: str) -> int:
    return os.open(path, _OPEN_DIR)


def _write_new(path: str, content: bytes, mode: int) -> None:
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


def _append(path: str, count: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # any session's calls count their attempts too
        os.write(fd, b"x" * count)
    finally:
        os.close(fd)


def _size_or_zero(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _remove_tree(path: str) -> None:
    """Remove an entry (flat: files only), first giving its directory back its mode where
    we own it: one a program of its session made unreadable would stay forever."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700, follow_symlinks=False)
    shutil.rmtree(path, ignore_errors=True)


def _size_of(path: str) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for item in os.scandir(path):
            with contextlib.suppress(OSError):
                total += item.stat(follow_symlinks=False).st_size
    return total


def _is_output_name(name: Any) -> bool:
    return isinstance(name, str) and os.sep not in name and name not in ("", ".", "..", _RESULT)


def _is_key(name: str) -> bool:
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def _lock(fd: int, seconds: float) -> bool:
    """``flock`` it, waiting at most ``seconds`` (released with the fd, or when its holder
    dies)."""
    give_up = time.monotonic() + seconds
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= give_up:
                return False
            time.sleep(0.01)


def _without_dir(result: dict[str, Any], where: str) -> dict[str, Any]:
    return {k: v.replace(where, _DIR_MARK) if isinstance(v, str) else v for k, v in result.items()}


def _with_dir(result: dict[str, Any], where: str) -> dict[str, Any]:
    return {k: v.replace(_DIR_MARK, where) if isinstance(v, str) else v for k, v in result.items()}
