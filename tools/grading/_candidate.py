"""The candidate's side of Python function tests: its program run, then its functions called as
the judge asks, in a process that holds nothing of the tests (``code_eval``'s clean template,
``sandbox._template``), answering with plain data (``tools.grading._plain_values``).

The judge writes one request at a time and reads one answer; the requests:

* ``{"op": "load", "program", "imports", "workdir", "writable"}``: enter ``workdir`` (its
  working and temporary directory, stdout and stderr into its files ``out`` and ``err``),
  confine writes to ``writable`` and signals to this process, run the program as ``__main__``
  and then the tests' top-level ``imports`` in its namespace; the answer names
  what it defined, ``{"names": [[name, "module", module name] | [name, "value", encoded]...]}``;
* ``{"op": "call", "ref", "args", "kwargs"}``: call what ``ref`` refers to; the answer is
  ``{"value", "mutated"}`` (``mutated``: the arguments the call changed, ``[[position or
  keyword, encoded]...]``), or ``{"raised": [type name, message]}``;
* ``{"op": "attribute", "ref", "name"}``, ``{"op": "set", "ref", "name", "value"}`` (the
  tests give an object of the program's an attribute), ``{"op": "items", "ref"}`` (``list()``
  of it), ``{"op": "text", "ref"}`` (its ``repr``): ``{"value"}`` or ``{"raised"}``.

Anything with no plain form stays here and is sent as a reference (``{"$": "ref", "v": n}``)
that later requests name. Nothing here is trusted by the judge: the candidate runs in this
process and may replace any of it; what it sends is its answer, read as data.
"""

from __future__ import annotations

import json
import os
import struct
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from a2e import _jsonwire as jsonwire
from a2e_engine.sandbox._landlock import confine_writes
from a2e_engine.tools.grading._plain_values import Unencodable, decode, encode

__all__ = ["MAX_MESSAGE", "ROLE", "described", "serve_candidate"]

#: The first frame the worker sends a clean template that is to be the candidate's process.
ROLE = {"role": "candidate"}
#: The most a request or an answer may take, either way.
MAX_MESSAGE = 16 << 20
#: Mutable arguments whose changes a call sends back.
_MUTABLE = (list, dict, set, bytearray)
#: How much of a value the program defined at its top level is sent as a copy (more: a
#: reference).
_COPIED_ITEMS = 100_000


def serve_candidate(requests: int, replies: int) -> None:
    """Answer the judge's requests until it closes its pipe (or this one breaks)."""
    candidate = _Candidate()
    flushers = (sys.stdout.flush, sys.stderr.flush)
    while True:
        try:
            request = _read_request(requests)
        except (EOFError, ValueError, OSError):
            return
        answer = candidate.answer(request)
        for flush in flushers:
            try:
                flush()
            except BaseException:  # a stream the program broke: nothing to keep of it
                pass
        try:
            _write_answer(replies, answer)
        except (OSError, ValueError, TypeError, RecursionError):
            return


# What the answers travel by, bound now: a program may replace ``os.write`` or ``json`` for its
# own reasons, and its answers must still reach the judge.
_HEADER = struct.Struct(">I")
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def _read_request(
    fd: int, read: Callable[[int, int], bytes] = os.read, parse: Any = jsonwire.plain_loads
) -> dict[str, Any]:
    def exactly(size: int) -> bytes:
        chunks = []
        while size:
            chunk = read(fd, min(size, 1 << 20))
            if not chunk:
                raise EOFError
            chunks.append(chunk)
            size -= len(chunk)
        return b"".join(chunks)

    (length,) = _HEADER.unpack(exactly(_HEADER.size))
    if length > MAX_MESSAGE:
        raise ValueError("a request past the size limit")
    request = parse(exactly(length))
    if type(request) is not dict:
        raise ValueError("a request must be an object")
    return request


def _write_answer(
    fd: int,
    answer: dict[str, Any],
    write: Callable[[int, memoryview], int] = os.write,
    dumps: Callable[[Any], str] = _ENCODE,
) -> None:
    body = dumps(answer).encode()
    view = memoryview(_HEADER.pack(len(body)) + body)
    while view:
        view = view[write(fd, view) :]


class _Candidate:
    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {"__name__": "__main__"}
        self.objects: list[Any] = []  # what references name, by number
        self.numbers: dict[int, int] = {}  # id of an object referred to -> its number

    def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The answer to one request: what the program's code gave or raised, or why the
        request itself could not be read."""
        try:
            work = self.work_for(request)
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            return {"refused": f"a malformed request: {exc!r}"[:2000]}
        try:
            return work()
        except BaseException as exc:
            return _raised(exc)

    def work_for(self, request: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        op = request["op"]
        if op == "load":
            return lambda: self.load(request)
        number = request["ref"]
        if type(number) is not int or number < 0:
            raise ValueError(f"not a reference: {number!r}")
        target = self.objects[number]
        if op == "call":
            args, kwargs = request["args"], request["kwargs"]
            if type(args) is not list or type(kwargs) is not list:
                raise TypeError("args and kwargs must be lists")
            return lambda: self.call(target, args, kwargs)
        if op == "attribute":
            name = request["name"]
            if type(name) is not str:
                raise TypeError("an attribute's name must be a string")
            return lambda: self.encoded(getattr(target, name))
        if op == "set":
            name, value = request["name"], request["value"]
            if type(name) is not str:
                raise TypeError("an attribute's name must be a string")
            return lambda: self.assigned(target, name, value)
        if op == "items":
            return lambda: self.encoded(list(target))
        if op == "text":
            return lambda: {"value": repr(target)[:2000]}
        raise ValueError(f"no such request: {op!r}")

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        workdir = str(request["workdir"])
        _enter(workdir, [str(path) for path in request["writable"]])
        program = compile(str(request["program"]), "<program>", "exec", dont_inherit=True)
        exec(program, self.namespace)
        imports = str(request.get("imports") or "")
        if imports:
            try:
                exec(compile(imports, "<tests>", "exec", dont_inherit=True), self.namespace)
            except Exception:  # the tests, importing it too, fail on it themselves
                pass
        names: list[list[Any]] = []
        for name, value in list(self.namespace.items()):
            if name.startswith("__"):
                continue
            if type(value) is type(os):
                names.append([name, "module", value.__name__])
                continue
            try:
                names.append([name, "value", self.copy_or_refer(value)])
            except Unencodable:
                continue
        return {"names": names}

    def copy_or_refer(self, value: Any) -> Any:
        """A top-level value of the program: a copy when it is plain and not too large (the
        tests compare it), else a reference (callables, classes, instances, big tables)."""
        if callable(value):
            return self.refer(value)
        try:
            copied = encode(value)
        except Unencodable:
            return self.refer(value)
        return copied if _size(copied) <= _COPIED_ITEMS else self.refer(value)

    def call(self, target: Any, args: Any, kwargs: Any) -> dict[str, Any]:
        positional = [self.decoded(arg) for arg in args]
        named = {str(name): self.decoded(arg) for name, arg in kwargs}
        given: list[tuple[int | str, Any, Any]] = [
            (i, value, args[i]) for i, value in enumerate(positional)
        ]
        given += [(name, named[str(name)], arg) for name, arg in kwargs]
        result = target(*positional, **named)
        answer = self.encoded(result)
        mutated = []
        for key, value, sent in given:
            if isinstance(value, _MUTABLE):
                now = encode(value, self.refer)
                if now != sent:
                    mutated.append([key, now])
        if mutated and "value" in answer:
            answer["mutated"] = mutated
        return answer

    def assigned(self, target: Any, name: str, value: Any) -> dict[str, Any]:
        setattr(target, name, self.decoded(value))
        return {"value": None}

    def encoded(self, value: Any) -> dict[str, Any]:
        try:
            return {"value": encode(value, self.refer)}
        except Unencodable as exc:
            return {"unencodable": str(exc)}

    def decoded(self, data: Any) -> Any:
        return decode(data, lambda tag: self.objects[tag["v"]])

    def refer(self, value: Any) -> dict[str, Any]:
        number = self.numbers.get(id(value))
        if number is None:
            number = self.numbers[id(value)] = len(self.objects)
            self.objects.append(value)
        kind = type(value)
        return {"$": "ref", "v": number, "callable": callable(value), "type": kind.__name__[:100]}


def _enter(workdir: str, writable: list[str]) -> None:
    """The program's own directory, as ``tools.grading._python_grading`` gives it: its working and
    temporary directory, stdout and stderr into files there, stdin /dev/null, writes confined
    to ``writable`` and signals to its own Landlock domain (it cannot signal the judge)."""
    os.chdir(workdir)
    os.environ["TMPDIR"] = tempfile.tempdir = workdir
    confinement = confine_writes(writable, scoped=True)
    if confinement is not None:
        confinement.enforce()
        confinement.close()
    for fd, name in ((1, "out"), (2, "err")):
        target = os.open(os.path.join(workdir, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(target, fd)
        os.close(target)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)


def _raised(exc: BaseException) -> dict[str, Any]:
    name, message = described(exc)
    return {"raised": [name[:200], message]}


def described(exc: BaseException) -> tuple[str, str]:
    """An exception as its class's name and its message: capped, and never itself raising
    (an exception's ``__str__`` is the program's code, or the tests')."""
    try:
        message = str(exc)[:2000]
    except BaseException:
        message = "<unprintable>"
    return type(exc).__name__, message


def _size(data: Any) -> int:
    """How many items encoded data holds (a rough count, for the copy's bound)."""
    count, pending = 0, [data]
    while pending and count <= _COPIED_ITEMS:
        item = pending.pop()
        count += 1
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.append(item.get("v"))
    return count
