"""A Python program run as ``python main.py`` runs it, in a fork of the worker's warm interpreter.

A fresh interpreter costs tens of milliseconds of CPU before the program's first line (start-up,
``site``, the modules it imports), more than the rest of a short run. The worker is already an
interpreter with the standard library loaded, so the program runs in a fork of it, made to look
like a fresh ``python main.py``:

* the interpreter's state: ``__main__`` a new module (``__file__`` absolute, ``__spec__`` None,
  a ``SourceFileLoader``), ``sys.argv`` and ``sys.orig_argv`` as the command line gives them,
  ``sys.path`` a fresh interpreter's with the program's folder first, new ``sys.std*`` objects
  with a fresh interpreter's encodings, errors and buffering, the default hooks, recursion
  limit, warning filters and signal handlers, no ``atexit`` callback, no thread but the main one,
  and none of the engine's modules in ``sys.modules``;
* the process's: its own session, the environment, folder and stdin a subprocess would get,
  descriptors 0, 1 and 2 and no other, and the write confinement of the run;
* the ending: an uncaught exception's traceback on stderr (from the program's own frame) and
  status 1, ``SystemExit``'s code or message, ``KeyboardInterrupt`` by SIGINT, then the
  interpreter's shutdown order: non-daemon threads joined, ``atexit`` callbacks, the streams
  flushed (120 if that fails).

What a fresh interpreter is like here (its ``sys.path``, streams, warning filters and memory at
start) is read once per zygote from a real one (``remember_fresh_interpreter``, in the plugin's
``preload``); a worker without that reading runs the program in a fresh interpreter instead.

What stays different: the modules of the standard library that the worker had imported are
already in ``sys.modules`` (imported again, they would be the same), the program's frame has
the worker's call beneath it (``sys._getframe(1)`` is not ``None``; tracebacks start at the
program's frame), and the interpreter was started without the program's own flags (a program
that needs them, or another Python, runs with ``fresh_interpreter``).
"""

from __future__ import annotations

import _signal
import atexit
import builtins
import gc
import importlib.machinery
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from a2e_engine.sandbox._clean_start import WORKER_ENVIRONMENT
from a2e_engine.sandbox._forking import fork_single_threaded, thread_count
from a2e_engine.sandbox._tree_usage import own_resident_kb

__all__ = [
    "ForkedMain",
    "FreshInterpreter",
    "MainProgram",
    "began_kb",
    "fresh_interpreter",
    "remember_fresh_interpreter",
    "run_main_here",
    "start_main",
]

log = logging.getLogger("a2e.tools")

#: Modules a fork of the worker must not keep: the engine's own (a fresh interpreter has none).
ENGINE_PACKAGES = ("a2e", "a2e_engine")
#: Run at a module's top level, leaves in ``depth`` how deep the interpreter counts that level
#: for the recursion limit (``sys.setrecursionlimit`` says when asked for a limit below it).
_DEPTH = """
import sys as _sys
_limit = _sys.getrecursionlimit()
try:
    _sys.setrecursionlimit(1)
except RecursionError as _exc:
    depth = int(str(_exc).split("depth ")[1].split(":")[0])
else:
    _sys.setrecursionlimit(_limit)
    depth = 0
"""
#: What a fresh interpreter reports of itself, read before it imports anything else.
_PROBE = (
    """
with open('/proc/self/status', 'rb') as fh:
    hwm = next((int(line.split()[1]) for line in fh if line.startswith(b'VmHWM:')), 0)
"""
    + _DEPTH
    + """
import json, sys, warnings
def text(p):
    return p if p is None or isinstance(p, str) else [p.pattern, p.flags]
def stream(s):
    return {'encoding': s.encoding, 'errors': s.errors, 'line_buffering': s.line_buffering,
            'write_through': s.write_through}
print(json.dumps({
    'path': sys.path[1:],
    'stdin': stream(sys.stdin), 'stdout': stream(sys.stdout), 'stderr': stream(sys.stderr),
    'recursion_limit': sys.getrecursionlimit(), 'depth': depth,
    'warnings': [[a, text(m), c.__name__, text(mod), n] for a, m, c, mod, n in warnings.filters],
    'resident_kb': hwm,
}))
"""
)


@dataclass(frozen=True)
class FreshInterpreter:
    """What ``sys.executable main.py`` starts with, as far as a program can tell."""

    path: tuple[str, ...]  # sys.path after the program's folder
    streams: dict[str, dict[str, Any]]  # stdin, stdout, stderr: encoding, errors, buffering
    recursion_limit: int
    depth: int  # how deep the program's top level counts for the recursion limit
    #: ``warnings.filters``: a message or module as a string, or as a regex's [pattern, flags].
    warnings: tuple[tuple[Any, ...], ...]
    resident_kb: int  # what it holds resident before the program's first line


_fresh: FreshInterpreter | None = None
#: What the program's process holds on to from the worker but must not see.
_out_of_sight: list[object] = []


def remember_fresh_interpreter() -> str | None:
    """Read a fresh interpreter, started with the environment tool code has, once (in the
    zygote, before workers are forked); ``None``, or why warm runs are off.

    As the zygote's uid (root, often) it would add its user's site-packages, which the run's
    own uid has not: it is told not to."""
    global _fresh
    if _fresh is not None:
        return None
    try:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE],
            env={**WORKER_ENVIRONMENT, "PYTHONNOUSERSITE": "1"},
            cwd="/",
            capture_output=True,
            timeout=30,
            check=True,
        )
        read = json.loads(done.stdout)
        _fresh = FreshInterpreter(
            path=tuple(read["path"]),
            streams={name: read[name] for name in ("stdin", "stdout", "stderr")},
            recursion_limit=int(read["recursion_limit"]),
            depth=int(read["depth"]),
            warnings=tuple(tuple(rule) for rule in read["warnings"]),
            resident_kb=int(read["resident_kb"]),
        )
    except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
        _fresh = None
        why = f"a fresh interpreter could not be read ({type(exc).__name__}: {exc})"
        log.warning("%s: python programs run in a new interpreter each, not a warm fork", why)
        return why
    return None


def fresh_interpreter() -> FreshInterpreter | None:
    """What ``remember_fresh_interpreter`` read, if it did."""
    return _fresh


class ForkedMain:
    """The child ``start_main`` forked (``tools._processes.Child``): ``wait4`` alone reaps it.

    It starts with this process's pages resident, which a new interpreter would not hold:
    ``resident_offset_kb`` turns its readings into what ``python main.py`` would read (what it
    held when the program began, less what a fresh interpreter holds at that point)."""

    def __init__(self, pid: int, resident_offset_kb: int) -> None:
        self.pid = pid
        self.resident_offset_kb: int | None = resident_offset_kb

    def reaped(self, exit_code: int) -> None:
        pass


@dataclass(frozen=True)
class MainProgram:
    """``python script *args`` run in ``cwd`` with the environment ``env``: what a run in a
    warm interpreter becomes (plain data, sent as it is to a template that forks it)."""

    script: str  # relative to ``cwd``
    args: list[str]
    cwd: str
    env: dict[str, str]


def start_main(
    fresh: FreshInterpreter,
    program: MainProgram,
    fds: tuple[int, int, int],
    confine: Callable[[], None] | None,
) -> ForkedMain:
    """Fork a child that becomes ``program`` with ``fds`` as its stdin, stdout and stderr
    (``run_main_here``)."""
    ready_r, ready_w = os.pipe()
    # Alone in this process, the fork may skip CPython's after-fork repairs (sandbox._forking).
    pid = fork_single_threaded() if thread_count() == 1 else os.fork()
    if pid == 0:
        os.close(ready_r)
        run_main_here(fresh, program, fds, confine, ready_w)
    os.close(ready_w)
    return ForkedMain(pid, began_kb(fresh, ready_r) - fresh.resident_kb)


def run_main_here(
    fresh: FreshInterpreter,
    program: MainProgram,
    fds: tuple[int, int, int],
    confine: Callable[[], None] | None,
    ready: int,
) -> NoReturn:
    """In a new fork of a warm interpreter: become ``program`` (``fds`` its stdin, stdout and
    stderr, ``confine`` run before anything of it), tell ``ready`` what it holds resident once
    ready (``began_kb``), run it, and exit as the interpreter would."""
    status = 70  # EX_SOFTWARE: the child could not become the program
    try:
        _become_process(program.cwd, program.env, fds, confine, keep=ready)
        status = _run_as_main(fresh, program.script, program.args, ready)
    finally:
        os._exit(status)


def began_kb(fresh: FreshInterpreter, ready: int) -> int:
    """What a child of ``run_main_here`` held resident when its program began, as its ready
    pipe (``ready``, closed here) says: a fresh interpreter's figure if it died before."""
    try:
        said = os.read(ready, 32)  # empty: it died before the program began
    finally:
        os.close(ready)
    return int(said) if said.strip().isdigit() else fresh.resident_kb


def _become_process(
    cwd: str,
    env: dict[str, str],
    fds: tuple[int, int, int],
    confine: Callable[[], None] | None,
    keep: int,
) -> None:
    """What ``subprocess.Popen(..., start_new_session=True)`` gives a program, and the signal
    dispositions and mask a new interpreter starts with; of the descriptors above 2, ``keep``
    alone stays open."""
    os.setsid()
    signal.set_wakeup_fd(-1)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    # ``_signal``: the ``signal`` module's wrappers make an enum of every number they touch.
    for number in range(1, _signal.NSIG):
        try:
            if _signal.getsignal(number) not in (_signal.SIG_DFL, None):
                _signal.signal(number, _signal.SIG_DFL)
        except (OSError, ValueError):
            continue
    # What CPython sets at start-up: Ctrl-C raises, a closed pipe and a file too large are
    # errors rather than deaths.
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _signal.signal(_signal.SIGPIPE, _signal.SIG_IGN)
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)  # dup2 leaves the copy inheritable, as a new process's stdio is
    if confine is not None:
        confine()
    os.closerange(3, keep)
    os.closerange(keep + 1, os.sysconf("SC_OPEN_MAX"))
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)


def _tell_resident(ready: int) -> None:
    """Write what this process holds resident to ``ready`` and close it, its high-water mark
    first brought down to it (``clear_refs``; where that is refused, the mark stays the one
    inherited, and the figures read a little high)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:
        pass
    try:
        os.write(ready, str(own_resident_kb()).encode())
    finally:
        os.close(ready)


def _run_as_main(fresh: FreshInterpreter, script: str, args: list[str], ready: int) -> int:
    """Run ``script`` as the ``__main__`` module of this (forked) interpreter; the exit status
    ``python script`` would end with. ``ready`` is told when the program begins."""
    absolute = os.path.abspath(script)
    # Out of sight but not freed: freeing them would write to (and so copy) every page of the
    # worker's that they lie on, as would clearing the importer cache in place.
    _out_of_sight.extend(
        sys.modules.pop(name)
        for name in [name for name in sys.modules if name.partition(".")[0] in ENGINE_PACKAGES]
    )
    _out_of_sight.append(sys.path_importer_cache)
    sys.path_importer_cache = {}
    atexit._clear()
    sys.argv = [script, *args]
    sys.orig_argv = [sys.executable, script, *args]
    sys.path[:] = [os.path.dirname(os.path.realpath(absolute)), *fresh.path]
    sys.excepthook, sys.displayhook = sys.__excepthook__, sys.__displayhook__
    sys.breakpointhook, sys.unraisablehook = sys.__breakpointhook__, sys.__unraisablehook__
    sys.settrace(None)
    sys.setprofile(None)
    threading.settrace(None)  # type: ignore[arg-type]
    threading.setprofile(None)  # type: ignore[arg-type]
    warnings.filters[:] = [_warning_rule(*rule) for rule in fresh.warnings]  # type: ignore[index]
    warnings._filters_mutated()  # type: ignore[attr-defined]
    tempfile.tempdir = None  # read again from this environment's TMPDIR
    # The thread's id as the kernel knows it now (a fork without CPython's after-fork repairs
    # keeps the worker's, a host's thread id).
    set_native_id = getattr(threading.main_thread(), "_set_native_id", None)
    if set_native_id is not None:
        set_native_id()
    gc.enable()
    _new_streams(fresh)

    main = types.ModuleType("__main__")
    main.__file__ = absolute
    main.__cached__ = None  # type: ignore[attr-defined]
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", absolute)
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    _tell_resident(ready)
    status = _status_of(lambda: _execute(fresh, absolute, main))
    status = _shut_down(status)
    return status


def _execute(fresh: FreshInterpreter, absolute: str, main: types.ModuleType) -> None:
    with open(absolute, "rb") as fh:
        source = fh.read()
    code = compile(source, absolute, "exec", dont_inherit=True)
    measured: dict[str, Any] = {}
    exec(_DEPTH_CODE, measured)  # here, as deep as the program will be
    _give_recursion_limit(fresh, measured["depth"] - fresh.depth)
    exec(code, main.__dict__)


#: ``_DEPTH`` compiled once, in the zygote.
_DEPTH_CODE = compile(_DEPTH, "<depth>", "exec")


def _give_recursion_limit(fresh: FreshInterpreter, beneath: int) -> None:
    """The program's top level has ``beneath`` more levels under it than in a fresh
    interpreter (the worker's call): the limit is raised by as much, and ``sys``'s recursion
    limit functions are made to count from the program's top level, so that it can recurse
    exactly as deep as under ``python main.py``, with the limit it reads and sets."""
    get_limit, set_limit = sys.getrecursionlimit, sys.setrecursionlimit
    set_limit(fresh.recursion_limit + beneath)

    def getrecursionlimit() -> int:
        return get_limit() - beneath

    def setrecursionlimit(limit: int, /) -> None:
        valid = isinstance(limit, int) and not isinstance(limit, bool) and limit >= 1
        set_limit(limit + beneath if valid else limit)

    getrecursionlimit.__doc__, setrecursionlimit.__doc__ = get_limit.__doc__, set_limit.__doc__
    sys.getrecursionlimit, sys.setrecursionlimit = getrecursionlimit, setrecursionlimit


def _status_of(run: Callable[[], None]) -> int:
    """Run the program; how ``python`` ends on what it raised (``Py_RunMain``'s rules)."""
    try:
        run()
    except SystemExit as exc:
        return _exit_code(exc.code)
    except KeyboardInterrupt as exc:
        _report(exc)
        _shut_down(0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)  # dies of SIGINT, as CPython does since 3.8
        return 130
    except BaseException as exc:  # the program's own exception: what the interpreter prints
        _report(exc)
        return 1
    return 0


def _report(exc: BaseException) -> None:
    """``sys.excepthook`` (the program's, if it set one) on ``exc``, its traceback starting at
    the program's own frame: the frames beneath it are this module's."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    exc.__traceback__ = tb  # what the hook prints, whatever it is given
    try:
        sys.excepthook(type(exc), exc, tb)
    except BaseException:
        sys.__excepthook__(type(exc), exc, tb)


def _exit_code(code: object) -> int:
    """``SystemExit.code`` as an exit status: None is 0, an integer itself, anything else
    printed to stderr and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF if -(1 << 31) <= code < (1 << 31) else 255
    try:
        print(code, file=sys.stderr)
    except BaseException:
        pass
    return 1


def _shut_down(status: int) -> int:
    """``Py_FinalizeEx``'s order: the non-daemon threads joined, ``atexit``'s callbacks, the
    standard streams flushed (a failure to flush them is reported, and the status is 120)."""
    try:
        threading._shutdown()  # type: ignore[attr-defined]
    except BaseException as exc:
        _report(exc)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except BaseException as exc:
            try:
                print(f"Exception ignored in: {stream!r}", file=sys.stderr)
                sys.__excepthook__(type(exc), exc, None)
            except BaseException:
                pass
            status = 120
    return status


def _new_streams(fresh: FreshInterpreter) -> None:
    """``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` made as a new interpreter makes them
    on descriptors 0, 1 and 2 (``create_stdio``: buffered as ``open`` buffers, the raw file
    named ``<stdout>``, the text layer's ``mode`` set, and lines split at ``\n`` alone: on
    POSIX a ``\r`` in the input stays in the line ``input()`` returns)."""
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        how = fresh.streams[name]
        mode = "r" if fd == 0 else "w"
        buffered = open(fd, mode + "b", closefd=False)  # noqa: SIM115 - the process keeps it
        buffered.raw.name = f"<{name}>"  # type: ignore[attr-defined]
        stream = io.TextIOWrapper(
            buffered,
            encoding=how["encoding"],
            errors=how["errors"],
            newline="\n",
            line_buffering=bool(how["line_buffering"]),
            write_through=bool(how["write_through"]),
        )
        stream.mode = mode  # type: ignore[misc]
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _warning_rule(
    action: str, message: Any, category: str, module: Any, lineno: int
) -> tuple[Any, ...]:
    """A rule of ``warnings.filters`` from what the probe wrote of it."""
    return (
        action,
        _pattern(message),
        getattr(builtins, category, Warning),
        _pattern(module),
        lineno,
    )


def _pattern(written: Any) -> Any:
    """A message or module of a warning rule: None, a string, or a regex given as [pattern,
    flags]."""
    return re.compile(written[0], written[1]) if isinstance(written, list) else written
