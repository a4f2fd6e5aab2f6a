"""The judge's side of Python function tests: the candidate's process, reached only by requests
and read only as data (``tools.grading._candidate`` is the other side).

What the tests get of the program are the judge's own objects: a copy of each plain value it
defined, and a ``Remote`` for everything else (its functions, its classes, what they return that
has no plain form). Calling a ``Remote`` sends the arguments as data and brings the result back
as data, built here of builtin types (``tools.grading._plain_values``): a comparison in the
tests runs the judge's ``==`` on the judge's values, whatever the candidate defined. A list, dict,
set or bytearray argument the call changed in place is changed here the same way. An exception the
program raised is raised here, as the builtin exception of its name (``ProgramError`` for one of
the program's own), so that tests that expect one catch it. A ``Remote`` equals only itself.

The candidate is hostile: its answers are read with a size cap and a deadline, and an answer
that is not one (garbage, a frame too large, silence past the deadline, an end) ends it.
``CandidateEnded`` and ``CandidateTimedOut`` are raised for that, as ``BaseException``s, so that
no ``except Exception`` in the tests swallows them; and the link remembers (``ended``), so that
a verdict is never ``passed`` once they were raised, whatever the tests caught.
"""

from __future__ import annotations

import builtins
import os
import select
import signal
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn

from a2e import _jsonwire as jsonwire
from a2e_engine.sandbox._exits import how_it_ended
from a2e_engine.sandbox._frames import write_frame
from a2e_engine.sandbox._template import fork_serving
from a2e_engine.tools.grading._candidate import MAX_MESSAGE, serve_candidate
from a2e_engine.tools.grading._plain_values import Unencodable, decode, encode

__all__ = [
    "CandidateEnded",
    "CandidateProcess",
    "CandidateTimedOut",
    "ProgramError",
    "Remote",
]

_HEADER = struct.Struct(">I")


class CandidateEnded(BaseException):
    """The candidate's process ended, or answered with something that is no answer."""


class CandidateTimedOut(BaseException):
    """The candidate did not answer before the tests' deadline."""


class ProgramError(Exception):
    """An exception the program raised, of a class of its own (named in the message)."""


class CandidateProcess:
    """The link to one candidate's process: its pid, the pipe requests go down, the pipe
    answers come up, and how to end it (``stop``: kill and reap, its exit code)."""

    def __init__(
        self, pid: int, requests: int, replies: int, stop: Callable[[], int | None], deadline: float
    ) -> None:
        self.pid, self.requests, self.replies = pid, requests, replies
        self._stop: Callable[[], int | None] | None = stop
        self.deadline = deadline  # time.monotonic() past which an answer is too late
        self.ended: str | None = None  # how it ended, once it did (or was ended)
        self.timed_out = False

    @classmethod
    def forked(cls, deadline: float) -> CandidateProcess:
        """A candidate's process forked from this one, for code_eval called outside the
        engine (no template there: the fork holds what this process holds)."""

        def serve(channel: int) -> None:
            os.setpgid(0, 0)  # what it starts goes with it (``_kill_and_reap``)
            serve_candidate(channel, channel)

        pid, channel = fork_serving(serve)
        return cls(pid, channel, channel, lambda: _kill_and_reap(pid), deadline)

    # -- requests --

    def load(
        self, program: str, imports: str, workdir: str, writable: tuple[str, ...]
    ) -> dict[str, Any]:
        """Run the program, then the tests' ``imports`` beside it; what it defined, by name, as
        the judge holds it. The program's own exception is raised here (``raise_from``)."""
        answer = self.ask(
            {
                "op": "load",
                "program": program,
                "imports": imports,
                "workdir": workdir,
                "writable": list(writable),
            }
        )
        if "raised" in answer:
            self.raise_from(answer["raised"])
        found = answer.get("names")
        if type(found) is not list:
            self.end("answered the judge with something it could not read")
        names: dict[str, Any] = {}
        for entry in found:
            if type(entry) is not list or len(entry) != 3 or type(entry[0]) is not str:
                self.end("answered the judge with something it could not read")
            name, kind, data = entry
            if not name.isidentifier() or name.startswith("__"):
                continue
            if kind == "module":
                module = _library_module(data)
                if module is not None:
                    names[name] = module
            elif kind == "value":
                names[name] = self.decoded(data)
        return names

    def call(self, number: int, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        sent_args = [self.encoded_argument(arg) for arg in args]
        sent_kwargs = [[name, self.encoded_argument(arg)] for name, arg in kwargs.items()]
        answer = self.ask({"op": "call", "ref": number, "args": sent_args, "kwargs": sent_kwargs})
        value = self.value_of(answer)
        mutated = answer.get("mutated") or []
        if type(mutated) is not list:
            self.end("answered the judge with something it could not read")
        for entry in mutated:
            if type(entry) is not list or len(entry) != 2:
                self.end("answered the judge with something it could not read")
            key, data = entry
            if type(key) is int and 0 <= key < len(args):
                _change_in_place(args[key], self.decoded(data))
            elif type(key) is str and key in kwargs:
                _change_in_place(kwargs[key], self.decoded(data))
        return value

    def attribute(self, number: int, name: str) -> Any:
        return self.value_of(self.ask({"op": "attribute", "ref": number, "name": name}))

    def set_attribute(self, number: int, name: str, value: Any) -> None:
        request = {"op": "set", "ref": number, "name": name}
        self.value_of(self.ask({**request, "value": self.encoded_argument(value)}))

    def items(self, number: int) -> list[Any]:
        value = self.value_of(self.ask({"op": "items", "ref": number}))
        if type(value) is not list:
            self.end("answered the judge with something it could not read")
        return value

    def text(self, number: int) -> str:
        value = self.value_of(self.ask({"op": "text", "ref": number}))
        return value if type(value) is str else "<the program's object>"

    # -- the wire --

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """One request and its answer (a JSON object); the candidate ended on anything else."""
        if self.ended is not None:
            raise CandidateEnded(self.ended)
        try:
            write_frame(self.requests, request)
        except OSError:
            self.end(None)
        body = self.read_answer()
        try:
            answer = jsonwire.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):
            answer = None
        if type(answer) is not dict:
            self.end("answered the judge with something it could not read")
        if "refused" in answer:
            raise RuntimeError(f"the candidate's process refused a request: {answer['refused']}")
        return answer

    def read_answer(self) -> bytes:
        (length,) = _HEADER.unpack(self.read_exactly(_HEADER.size))
        if length > MAX_MESSAGE:
            self.end(f"answered the judge with more than {MAX_MESSAGE >> 20} MiB at once")
        return self.read_exactly(length)

    def read_exactly(self, size: int) -> bytes:
        chunks: list[bytes] = []
        while size:
            left = self.deadline - time.monotonic()
            ready = select.select([self.replies], [], [], max(left, 0))[0] if left > 0 else []
            if not ready:
                self.timed_out = True
                self.end("did not finish in time")
            chunk = os.read(self.replies, min(size, 1 << 20))
            if not chunk:
                self.end(None)
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    def value_of(self, answer: dict[str, Any]) -> Any:
        if "raised" in answer:
            self.raise_from(answer["raised"])
        if "unencodable" in answer:
            raise ProgramError(
                f"the program gave a value the judge cannot read: "
                f"{str(answer['unencodable'])[:500]}"
            )
        if "value" not in answer:
            self.end("answered the judge with something it could not read")
        return self.decoded(answer["value"])

    def decoded(self, data: Any) -> Any:
        try:
            return decode(data, self.remote)
        except Unencodable as exc:
            raise ProgramError(f"the program gave a value the judge cannot read: {exc}") from None

    def remote(self, tag: dict[str, Any]) -> Remote:
        kind = tag.get("type")
        return Remote(self, tag["v"], bool(tag.get("callable")), kind if type(kind) is str else "")

    def encoded_argument(self, value: Any) -> Any:
        def refer(obj: Any) -> dict[str, Any]:
            if isinstance(obj, Remote) and obj._link is self:
                return {"$": "ref", "v": obj._number}
            raise Unencodable(f"a {type(obj).__name__} cannot be passed to the program")

        return encode(value, refer)

    def raise_from(self, raised: Any) -> None:
        if type(raised) is not list or len(raised) != 2 or not all(type(r) is str for r in raised):
            self.end("answered the judge with something it could not read")
        name, message = raised
        kind = getattr(builtins, name, None)
        if isinstance(kind, type) and issubclass(kind, Exception) and name.isidentifier():
            try:
                error = kind(message)
            except Exception:
                error = ProgramError(f"{name}: {message}")
        else:
            error = ProgramError(f"{name}: {message}" if message else name)
        raise error

    # -- its end --

    def end(self, why: str | None) -> NoReturn:
        """End the candidate's process (if it still runs) and raise what the tests get: it
        ended (``why``, or how it ended when None) or it timed out."""
        if self.ended is None:
            status = self.stop()
            self.ended = why or _how(status)
        if self.timed_out:
            raise CandidateTimedOut(self.ended)
        raise CandidateEnded(self.ended)

    def stop(self) -> int | None:
        """Kill and reap it, and close the pipes, once: its exit code (None: not known, or
        stopped before). Never again after: its pid, reaped, may be another process's now."""
        for fd in (self.requests, self.replies):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.requests = self.replies = -1
        stop, self._stop = self._stop, None
        return stop() if stop is not None else None

    def finish(self) -> None:
        """Once the tests are done: the candidate ended, and how, unless it had already."""
        if self.ended is None:
            self.stop()


class Remote:
    """Something of the program's that has no plain form, kept in the candidate's process:
    called, its attributes read and set, iterated (its items copied), shown; equal only to
    itself."""

    __slots__ = ("_callable", "_kind", "_link", "_number")

    def __init__(self, link: CandidateProcess, number: int, is_callable: bool, kind: str) -> None:
        self._link, self._number, self._callable, self._kind = link, number, is_callable, kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._link.call(self._number, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return self._link.attribute(self._number, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in Remote.__slots__:
            object.__setattr__(self, name, value)
        else:
            self._link.set_attribute(self._number, name, value)

    def __iter__(self) -> Any:
        return iter(self._link.items(self._number))

    def __len__(self) -> int:
        return len(self._link.items(self._number))

    def __repr__(self) -> str:
        return self._link.text(self._number)

    def __bool__(self) -> bool:
        return True


def _change_in_place(target: Any, value: Any) -> None:
    """What the candidate did to an argument in place, done to the judge's own."""
    if type(target) is not type(value):
        return
    if type(target) in (list, bytearray):
        target[:] = value
    elif type(target) in (dict, set):
        target.clear()
        target.update(value)


#: The modules the judge imports for the tests when the program imported them (the tests may
#: use what the program's prompt imported without importing it themselves): libraries a
#: program commonly imports, whose import runs nothing but their own definitions. Never one
#: named by the program alone: importing ``unittest.__main__`` runs test discovery.
LIBRARY_MODULES = frozenset(
    {
        "abc", "array", "base64", "binascii", "bisect", "calendar", "cmath", "collections",
        "collections.abc", "colorsys", "copy", "csv", "dataclasses", "datetime", "decimal",
        "difflib", "enum", "fractions", "functools", "hashlib", "heapq", "hmac", "html", "io",
        "itertools", "json", "keyword", "math", "numbers", "operator", "os", "os.path",
        "pprint", "queue", "random", "re", "statistics", "string", "struct", "sys", "tempfile",
        "textwrap", "time", "typing", "unicodedata", "uuid", "zlib", "numpy", "numpy.linalg",
    }
)  # fmt: skip


def _library_module(name: Any) -> Any:
    """The library module of that name (``LIBRARY_MODULES``), imported here; None for any
    other. Imported from the judge's own path: the program's directory is not on it
    (``tools.grading._code_eval``)."""
    if type(name) is not str or name not in LIBRARY_MODULES:
        return None
    if name in sys.modules:
        return sys.modules[name]
    import importlib

    try:
        return importlib.import_module(name)
    except Exception:
        return None


def _how(status: int | None) -> str:
    return "ended" if status is None else how_it_ended(status)


def _kill_and_reap(pid: int) -> int | None:
    for kill in (os.killpg, os.kill):  # its group (what it started), then itself
        try:
            kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:
        return None
