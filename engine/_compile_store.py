"""The engine's side of the shared compile cache: the one writer of it.

It lives in the supervisor (``sandbox._sharing.SharedStore``). The workers of ``run_code`` and
``code_eval`` read it (``tools._compile_cache``) and offer what they compiled; this keeps an
offer only when it holds: the key it works out itself from the call's own arguments, through
what the tool compiles for them (``compiled_calls``: ``run_code``'s ``code`` and ``files``,
``code_eval``'s program, with its test program after it where it has one, and its checker with
the files it compiles with), so that a worker,
whatever it ran, can put nothing under the key of a program it was not sent; outputs whose
names the language's compile step makes, sizes within the bound, a successful result (or a
failure that is the source's own, with no outputs). It writes
every entry itself, owned by the engine's uid (directories 0711: a session uid reaches a file by
its name, lists nothing; files 0444), and evicts down to nine tenths of ``max_bytes`` once past
it: the least recently used of the entries never hit first, then of those hit (hits are
reported: ``used``), so that a tenant who floods the cache with programs sent once cannot push
out those other calls reuse. An entry larger than a quarter of the bound is not kept.

Precompiled headers are built here too, when a call's program first includes one its language
precompiles (``claim``, or a worker that asks: ``header``): ``g++`` on the system's header
alone, in a staging directory renamed into place whole, one build at a time. The calls of such
programs wait for it, holding no worker slot, up to ``HEADER_WAIT_S``, and then claim their
program: an RL batch's first C++ programs would otherwise each read the header themselves, all
at once, and run past their compile limits. A header whose build failed, or ran out of time
``MAX_ATTEMPTS`` times, goes without for the engine's life.

Compiles are coalesced: the first call of a program that is not kept yet claims it (``claim``),
and calls of the same program that come while it compiles, or while its entry is written,
wait for its entry rather than compile it again (verl sends a program's test cases as as many
requests at once). They go on as soon as the entry is written, or, when the first call ends
without one (a timeout, an offer that did not hold), all at once, each compiling for itself.
A compile that failed on its source (``Language.failed_on_its_source``: the compiler ran to
its end and pointed at a line of the source, and nothing tells of a failure of the machine) is
kept as a success is, outputs none, and every later call of the program is that compile
error; any other failure is never handed to another call, which may have other limits or come
from another tenant.

Everything else here runs off the engine's loop: ``offer`` only queues (at most ``MAX_PENDING``
offers; past that one is dropped, and the program is compiled again next time), so that a
worker that floods its pipe with offers costs the loop a lock and a count each.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import collections
import contextlib
import fnmatch
import logging
import os
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2e_engine.sandbox._clean_start import WORKER_ENVIRONMENT
from a2e_engine.sandbox._sharing import NO_CLAIM, Claim
from a2e_engine.tools._compile_cache import (
    MAX_RESULT_BYTES,
    CompileCache,
    PrecompiledHeaders,
    evict,
    is_key,
    is_output_name,
    remove_tree,
    write_entry,
)
from a2e_engine.tools._languages import LANGUAGES, Language

__all__ = ["SharedCompileCache"]

log = logging.getLogger("a2e.compile_cache")

#: Offers waiting to be checked and written; past this many, one is dropped.
MAX_PENDING = 8
#: What share of the bound entries that were hit may hold (the rest is for new ones).
HIT_SHARE = 0.8
#: How long one precompiled header may take to build.
BUILD_TIMEOUT_S = 300.0
#: Programs larger than this (source and files) are not claimed: their key, a hash of all of
#: them, would be worked out on the engine's loop (80 ms for 8 MB). They are still kept,
#: from the writer's thread, for the calls after them.
CLAIM_MAX_BYTES = 256 << 10
#: How long the calls of programs that include a header being built wait for it (a build takes
#: about 3 s of CPU; without it each compiles the header itself, 1.5 s of CPU a program).
HEADER_WAIT_S = 15.0
#: Entry directories: a session uid passes through, to a file it names.
_ENTRY_MODE = 0o711


class SharedCompileCache:
    """Made with the engine (``create``) in its state directory, removed with it."""

    MAX_ATTEMPTS = 3

    def __init__(self, entries: str, headers: str, max_bytes: int) -> None:
        self.entries = entries
        self.headers = PrecompiledHeaders(headers)
        self.max_bytes = max_bytes
        #: Entries not hit since they were kept, and those hit, each least recently used
        #: first, with their sizes (a segmented LRU: ``_shrink``).
        self._new: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._hit: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._total = 0
        self._hit_total = 0
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="a2e-compile-cache")
        self._pending = 0
        self._lock = threading.Lock()
        self._attempts: collections.Counter[str] = collections.Counter()
        self._building: subprocess.Popen[bytes] | None = None
        self._builder: threading.Thread | None = None
        self._closed = False
        #: The programs being compiled by a call in flight, by key: done when the entry is
        #: kept or that call ends. On the engine's loop only (``claim``, ``_made``).
        self._making: dict[str, asyncio.Future[bool]] = {}
        #: Of those, the programs whose entry was offered and is being written (``_keep``):
        #: the call's end does not release their waiters, the entry's writing does. On the
        #: engine's loop only.
        self._writing: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The calls waiting for a precompiled header being built, by its directory, and the
        #: headers whose build outlasted ``HEADER_WAIT_S`` (no call waits for them again). On
        #: the engine's loop only.
        self._header_waits: dict[str, asyncio.Future[bool]] = {}
        self._waited_out: set[str] = set()
        #: The directory of the header being built (under ``_lock``).
        self._building_where = ""

    @classmethod
    def create(cls, state_dir: str, max_mb: int) -> SharedCompileCache:
        """``compile-cache`` in the state directory (0711, the engine's), holding ``pch`` and
        ``entries-<random>``, both 0711: no session uid lists them or writes in them."""
        parent = os.path.join(state_dir, "compile-cache")
        entries = os.path.join(parent, f"entries-{os.urandom(12).hex()}")
        headers = os.path.join(parent, "pch")
        for where in (parent, entries, headers):
            os.mkdir(where, 0o711)
            os.chmod(where, 0o711)
        return cls(entries, headers, max_mb << 20)

    @property
    def dirs(self) -> tuple[str, str]:
        """What the workers of ``run_code`` and ``code_eval`` are given to read
        (``ZygoteSettings.plugin_dirs``)."""
        return self.entries, self.headers.root

    # -- sandbox._sharing.SharedStore --

    def offer(
        self, tool: str, arguments: Mapping[str, Any], what: str, data: dict[str, Any]
    ) -> None:
        programs = compiled_calls(tool, arguments)
        if not programs:  # its program, if any, runs in the worker's own process
            log.debug("dropped an offer from a call that compiles nothing")
            return
        if what == "header":
            for program in programs:
                self._queue(self._asked_header, program, data)
            return
        compiled = _named(programs, data)
        if compiled is None:
            log.debug("dropped an offer for a program the call does not compile")
            return
        if what == "used":
            self._queue(self._used, compiled, data)
        elif what == "entry":
            key = _key_of(compiled) if _claimable(compiled) else None
            if key is not None and key in self._making:
                self._writing.add(key)  # its waiters go on once it is written, not before
            if not self._queue(self._keep, compiled, data, key):
                self._writing.discard(key)
                self._release(compiled)  # dropped: whoever waits for it compiles
        elif what == "compiled":  # the call's compile ended with nothing to share
            self._release(compiled)
        else:
            log.debug("dropped an offer of %.40r to the compile cache", what)

    def claim(self, tool: str, arguments: Mapping[str, Any]) -> Claim:
        programs = compiled_calls(tool, arguments)
        compiled = programs[0] if programs else None  # the program judged, not its checker
        if compiled is None or not _claimable(compiled):
            return NO_CLAIM
        key = _key_of(compiled)
        if key is None or key in self._new or key in self._hit:
            return NO_CLAIM
        making = self._making.get(key)
        if making is not None:
            return Claim(wait=making)
        self._loop = loop = asyncio.get_running_loop()
        header = self._header_wait(compiled, loop)
        if header is not None:
            return Claim(wait=header)
        made = self._making[key] = loop.create_future()

        def ended() -> None:
            # An entry being written releases its waiters itself, once it is in place.
            if self._making.get(key) is made and key not in self._writing:
                self._made(key)

        return Claim(end=ended)

    def _made(self, key: str) -> None:
        """``key``'s entry is kept, or will not be, or the call compiling it ended: its
        waiters go on. On the engine's loop."""
        self._writing.discard(key)
        made = self._making.pop(key, None)
        if made is not None and not made.done():
            made.set_result(False)  # the waiters go on, and claim no more

    def _release(self, arguments: Mapping[str, Any]) -> None:
        key = _key_of(arguments) if _claimable(arguments) else None  # else never claimed
        if key is not None:
            self._made(key)

    def _release_soon(self, key: str | None) -> None:
        """``_made`` from the writer's thread."""
        if key is not None and self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                self._loop.call_soon_threadsafe(self._made, key)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            building = self._building
        if building is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(building.pid, 9)
        self._writer.shutdown(wait=True, cancel_futures=True)
        if self._builder is not None:
            self._builder.join(timeout=10)

    # -- entries --

    def _queue(self, work: Callable[..., object], *args: Any) -> bool:
        with self._lock:
            if self._closed or self._pending >= MAX_PENDING:
                return False
            self._pending += 1
        self._writer.submit(self._run, work, *args)
        return True

    def _run(self, work: Callable[..., object], *args: Any) -> None:
        try:
            work(*args)
        except OSError as exc:  # a full disk, say: not kept
            log.warning("the compile cache could not keep an offer: %s", exc)
        except Exception:
            log.exception("the compile cache could not take an offer")
        finally:
            with self._lock:
                self._pending -= 1

    def _used(self, compiled: Mapping[str, Any], data: dict[str, Any]) -> None:
        """A hit, reported by the call whose key it is: only its own key counts (another's
        would keep entries of the caller's choice from eviction)."""
        key = data.get("key")
        if is_key(key) and key == _key_of(compiled):
            self.used(key)

    def _keep(
        self, arguments: Mapping[str, Any], data: dict[str, Any], key: str | None = None
    ) -> None:
        """Write the entry offered, if it holds; else drop it, saying why at debug level.
        Either way, the calls waiting for the program go on: as soon as the entry is in place,
        or once it is clear it will not be. ``key``: the call's own, where ``offer`` worked it
        out already (a program small enough to claim)."""
        if key is None:
            key = _key_of(arguments)  # hashes the whole program: here, off the loop
        try:
            checked = self._checked(key, arguments, data)
            if isinstance(checked, str):
                log.debug("dropped a compile cache entry: %s", checked)
                return
            self.keep(*checked)
        finally:
            self._release_soon(key)

    def used(self, key: str) -> None:
        """``key`` was a hit: among the hit entries, the last to be evicted. Those past
        ``HIT_SHARE`` of the bound go back among the new ones, the least recently used first."""
        size = self._new.pop(key, None)
        if size is not None:
            self._hit[key] = size
            self._hit_total += size
        elif key in self._hit:
            self._hit.move_to_end(key)
        while self._hit_total > self.max_bytes * HIT_SHARE:
            demoted, size = self._hit.popitem(last=False)
            self._hit_total -= size
            self._new[demoted] = size

    def keep(self, key: str, outputs: dict[str, tuple[bytes, int]], result: dict[str, Any]) -> None:
        """Write the entry (checked already); past the bound, evict down to nine tenths of it.
        On the writer's thread (or a test's own)."""
        if key in self._new or key in self._hit:
            return  # another call's came first
        if sum(len(content) for content, _ in outputs.values()) > self.max_bytes // 4:
            return
        size = write_entry(self.entries, key, outputs, result, _ENTRY_MODE)
        self._new[key] = size
        self._total += size
        if self._total > self.max_bytes:
            self._shrink(self.max_bytes * 9 // 10, keep=key)

    @property
    def total(self) -> int:
        """What the entries kept hold, in bytes."""
        return self._total

    def check_entry(
        self, arguments: Mapping[str, Any], data: dict[str, Any]
    ) -> tuple[str, dict[str, tuple[bytes, int]], dict[str, Any]] | str:
        """The entry an offer stands for (key, outputs, result), or why it does not hold."""
        return self._checked(_key_of(arguments), arguments, data)

    def _checked(
        self, key: str | None, arguments: Mapping[str, Any], data: dict[str, Any]
    ) -> tuple[str, dict[str, tuple[bytes, int]], dict[str, Any]] | str:
        """``check_entry``, the call's key (``_key_of``) worked out already."""
        if key is None:
            return "not a call of a compiled language"
        language = LANGUAGES[str(arguments["language"])]
        if data.get("key") != key:
            return "a key that is not the call's"
        result, offered = data.get("result"), data.get("outputs")
        if not isinstance(result, dict):
            return "no result"
        if len(repr(result)) > MAX_RESULT_BYTES:
            return "too large a result"
        if result.get("return_code") != 0:
            if not language.failed_on_its_source(str(arguments["code"]), result):
                return "a failed compile that may not be the source's own failure"
            return (key, {}, result) if not offered else "outputs of a failed compile"
        if not isinstance(offered, dict) or not offered:
            return "no outputs"
        outputs: dict[str, tuple[bytes, int]] = {}
        for name, output in offered.items():
            if not is_output_name(name) or not _made_by(language, name):
                return f"an output the compile step does not make: {name!r:.60}"
            if not isinstance(output, dict) or not isinstance(output.get("data"), str):
                return "an output without data"
            mode = output.get("mode")
            if not isinstance(mode, int) or isinstance(mode, bool):
                return "an output without a mode"
            try:
                content = base64.b64decode(output["data"], validate=True)
            except (binascii.Error, ValueError):
                return "an output that is not base64"
            outputs[name] = (content, mode & 0o755)
        return key, outputs, result

    def _shrink(self, target: int, keep: str) -> None:
        """Evict entries (never ``keep``) until at most ``target`` bytes are kept: first the
        least recently used of those never hit, then of those hit. A tenant that floods the
        cache with programs nobody sends twice so churns through the new entries alone, and
        the ones other calls reuse stay (a segmented LRU)."""
        for segment in (self._new, self._hit):
            for key in list(segment):
                if self._total <= target:
                    return
                if key != keep:
                    size = segment.pop(key)
                    self._total -= size
                    if segment is self._hit:
                        self._hit_total -= size
                    evict(self.entries, key)

    # -- precompiled headers --

    def _header_wait(
        self, compiled: Mapping[str, Any], loop: asyncio.AbstractEventLoop
    ) -> asyncio.Future[bool] | None:
        """For a program whose first include is a header its language precompiles and that is
        not built yet: a future done (True: claim again) once the header is built, its build
        failed, or ``HEADER_WAIT_S`` passed; the build is started if it is not under way. None
        where there is nothing to wait for. An RL batch's first programs would otherwise each
        compile the header themselves, all at once, until one had built it."""
        language = LANGUAGES[str(compiled["language"])]
        header = language.precompiled_header(str(compiled["code"]))
        if not header:
            return None
        where = self.headers.directory(language, header)
        waiting = self._header_waits.get(where)
        if waiting is not None:
            return waiting
        if where in self._waited_out or self.headers.ready(language, header):
            return None
        if not self._build_header(language, header, where):
            return None
        waiting = self._header_waits[where] = loop.create_future()
        loop.call_later(HEADER_WAIT_S, self._header_done, where, waiting)
        return waiting

    def _header_done(self, where: str, timed: asyncio.Future[bool] | None = None) -> None:
        """The calls waiting for the header at ``where`` go on: its build ended, or the wait
        ``timed`` (that one, not a later one) outlasted ``HEADER_WAIT_S``. On the engine's
        loop."""
        if timed is not None and self._header_waits.get(where) is not timed:
            return  # a wait that ended already: a later build's is not this timer's
        waiting = self._header_waits.pop(where, None)
        if waiting is None:
            return
        if timed is not None:
            self._waited_out.add(where)
        if not waiting.done():
            waiting.set_result(True)

    def _asked_header(self, compiled: Mapping[str, Any], data: dict[str, Any]) -> None:
        """A worker asks for the header its program first includes: only that one."""
        language = LANGUAGES.get(str(compiled.get("language")))
        code = compiled.get("code")
        if language is None or not isinstance(code, str):
            return
        header = language.precompiled_header(code)
        if header and data.get("header") == header:
            self._build_header(language, header, self.headers.directory(language, header))

    def _build_header(self, language: Language, header: str, where: str) -> bool:
        """Start building ``header`` (one its language precompiles) at ``where``, unless it is
        built, being built, or given up on; whether a build of it is under way."""
        with self._lock:
            busy = self._closed or (self._builder is not None and self._builder.is_alive())
            if busy:
                return self._building_where == where
            if self._attempts[where] >= self.MAX_ATTEMPTS or os.path.exists(where):
                return False
            self._attempts[where] += 1
            self._building_where = where
            self._builder = threading.Thread(
                target=self._build, args=(language, header, where), name="a2e-pch", daemon=True
            )
            self._builder.start()
            return True

    def _build(self, language: Language, header: str, where: str) -> None:
        staging = tempfile.mkdtemp(prefix=".staging-", dir=self.headers.root)
        try:
            # The header through a file of its own: the build must not find a header of ours
            # by the name it precompiles.
            wrapper = os.path.join(staging, "header.h")
            with open(wrapper, "w") as fh:
                fh.write(f"#include <{header}>\n")
            output = os.path.join(staging, header + ".gch")
            os.makedirs(os.path.dirname(output), exist_ok=True)
            os.mkdir(os.path.join(staging, ".tmp"))
            env = {**WORKER_ENVIRONMENT, "HOME": staging, "TMPDIR": f"{staging}/.tmp"}
            with self._lock:
                if self._closed:
                    return
                self._building = subprocess.Popen(
                    language.precompile_argv(wrapper, output),
                    cwd=staging,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            try:
                # Waited for, not reaped: its process group is then certainly its own when
                # whatever it left running is killed.
                _exited(self._building.pid, BUILD_TIMEOUT_S)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._building.pid, 9)
                code = self._building.wait()
                with self._lock:
                    self._building = None
            if code != 0:
                if code > 0:
                    self._attempts[where] = self.MAX_ATTEMPTS  # it will not work here
                return  # killed: out of time, or the engine stops
            os.unlink(wrapper)
            shutil.rmtree(os.path.join(staging, ".tmp"), ignore_errors=True)
            for path, dirs, files in os.walk(staging):
                for name in files:
                    os.chmod(os.path.join(path, name), 0o444)
                for name in dirs:
                    os.chmod(os.path.join(path, name), _ENTRY_MODE)
            os.chmod(staging, _ENTRY_MODE)
            os.rename(staging, where)
        except OSError as exc:
            log.warning("precompiling %s failed: %s", header, exc)
        finally:
            if os.path.lexists(staging):
                remove_tree(staging)  # what did not go in place
            if self._loop is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
                    self._loop.call_soon_threadsafe(self._header_done, where)


def compiled_calls(tool: str, arguments: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """What a call of ``tool`` compiles, each as ``run_code``'s arguments say it
    (``language``, ``code``, ``files``), the program judged first; none when it compiles
    nothing a tool of the cache's makes."""
    if tool == "run_code":
        return [arguments]
    if tool == "code_eval":
        from a2e_engine.tools.grading import compiled_sources

        return [
            {"language": language, "code": code, "files": files}
            for language, code, files in compiled_sources(arguments)
        ]
    return []


def _named(programs: list[Mapping[str, Any]], data: dict[str, Any]) -> Mapping[str, Any] | None:
    """The program of a call whose key an offer names: the only one, or the one it names."""
    if len(programs) == 1:
        return programs[0]
    key = data.get("key")
    return next((p for p in programs if is_key(key) and _key_of(p) == key), None)


def _claimable(compiled: Mapping[str, Any]) -> bool:
    """Whether the program is small enough to be claimed (``CLAIM_MAX_BYTES``)."""
    code, files = compiled.get("code"), compiled.get("files") or {}
    if not isinstance(code, str) or not isinstance(files, dict):
        return False
    size = len(code) + sum(len(value) for value in files.values() if isinstance(value, str))
    return size <= CLAIM_MAX_BYTES


def _key_of(arguments: Mapping[str, Any]) -> str | None:
    """The compile cache's key of the call's program, or None when the call compiles nothing
    (a language without a compile step, arguments the tool will refuse)."""
    language = LANGUAGES.get(str(arguments.get("language")))
    code, files = arguments.get("code"), arguments.get("files") or {}
    if language is None or language.compile is None or not isinstance(code, str):
        return None
    if not isinstance(files, dict):
        return None
    try:
        return CompileCache.key(language, code, files)
    except (OSError, TypeError, ValueError):
        return None


def _exited(pid: int, seconds: float) -> bool:
    """Whether the child ``pid`` exited within ``seconds``, leaving it unreaped."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        time.sleep(0.05)
    return False


def _made_by(language: Language, name: str) -> bool:
    """Whether ``name`` is one of the outputs the language's compile step makes."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in language.outputs)
