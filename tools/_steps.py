"""How each process of a program runs, and what it did: the other half of
``tools._submission``, which decides what runs (its compile, each of its runs).

Every step (a compile, a syntax check, a run) is a process started in its own directory with a
Landlock layer of its own (``sandbox._landlock.confine_writes``), in the worker's case group
where the worker has one (``sandbox._run_domain``), watched to its limits and accounted: a fresh
process, or, for a language run warm, a fork of an interpreter made to look fresh (of the
worker's clean template when there is one, ``tools._template_cases``). What a program's steps
may read, write and signal, and how they are accounted, follows from its ``Role`` alone.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from a2e_engine.sandbox._landlock import WriteConfinement, confine_writes, readable_code_paths
from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._run_domain import CaseDomain, case_domain, contained, namespace_usage
from a2e_engine.sandbox._run_root import program_writable
from a2e_engine.sandbox._tree_usage import tree_usage
from a2e_engine.tools._languages import Language
from a2e_engine.tools._processes import (
    Child,
    ChildStdio,
    Finished,
    TextSink,
    Usage,
    run_captured,
    start_command,
    watch,
)
from a2e_engine.tools._python_main import FreshInterpreter, MainProgram, start_main
from a2e_engine.tools._template_cases import TemplateCases

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "TMP",
    "Launch",
    "Program",
    "Role",
    "RunLimits",
    "StepResult",
    "Steps",
    "cpu_seconds_of",
    "memory_mb_of",
    "not_started",
    "seconds_of",
]

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 1024
MAX_MEMORY_MB = 65536
#: Each step's ``TMPDIR``, in its own directory.
TMP = ".tmp"
#: What the compiler's environment says of memory (GOMEMLIMIT for ``go build``, itself Go).
_COMPILE_MEMORY_MB = 4096

StepResult = dict[str, Any]
"""SandboxFusion's shape of one step: ``status``, ``execution_time``, ``cpu_time``,
``peak_memory_kb``, ``return_code``, ``stdout``, ``stderr``; and, past a time limit, which one
it ran past: ``exceeded`` (``cpu_time`` or ``wall_time``)."""


class Role(Enum):
    """What a program is run for, which alone decides how its steps run.

    ``keeps_run_layer``: its runs may write the worker's run layer too (``sandbox._run_root``),
    which outlives each run: a program run once, not cases that must each start from nothing
    the last one left. ``alone``: each of its runs is all that runs in the worker (beside a
    problem's interactor): where the worker is its PID namespace's init, a run is accounted as
    the whole namespace. ``sealed``: its runs read nothing but the system, the read roots, the
    toolchain and their own directory, and signal no process outside their own (what a checker
    of the call keeps from the candidate); where Landlock is missing they cannot be sealed, and
    the caller must not run them. ``judged``: its steps, its compile too, join the worker's case
    group, which the problem's own checker and interactor stay out of. ``own_layer``: its runs
    get a Landlock layer of their own over the worker's (a checker's do not: it is the caller's
    own program, run where no program of the call's runs, and started without the full fork of
    the worker that the layer needs, which costs more than the check). ``forks_worker``: a
    language run warm may run in a fork of the worker itself; otherwise only in a fork of its
    clean template, or a process of its own, since the worker holds the answers."""

    # label, keeps_run_layer, alone, sealed, judged, own_layer, forks_worker
    #: ``run_code``'s program.
    ONCE = ("once", True, False, False, True, True, True)
    #: A program with its tests appended, run once: its exit is the verdict.
    TESTS = ("tests", True, True, False, True, True, True)
    #: A candidate run on each case, its output compared with the case's.
    CASE = ("case", False, True, False, True, True, False)
    #: A candidate run on each case beside a checker or an interactor, which it must not reach.
    SEALED_CASE = ("sealed case", False, True, True, True, True, False)
    #: The problem's checker, run on each case's files.
    CHECKER = ("checker", False, False, False, False, False, False)
    #: The problem's interactor, talking to the candidate.
    INTERACTOR = ("interactor", False, False, False, False, True, False)

    def __init__(
        self,
        label: str,
        keeps_run_layer: bool,
        alone: bool,
        sealed: bool,
        judged: bool,
        own_layer: bool,
        forks_worker: bool,
    ) -> None:
        self.label = label
        self.keeps_run_layer = keeps_run_layer
        self.alone = alone
        self.sealed = sealed
        self.judged = judged
        self.own_layer = own_layer
        self.forks_worker = forks_worker


@dataclass(frozen=True)
class Program:
    """A program as given: its language, its source, its files (path -> base64 content, as a
    call gives them) and what it is run for."""

    language: Language
    code: str
    files: Mapping[str, Any]
    role: Role


@dataclass(frozen=True)
class RunLimits:
    seconds: float  # wall-clock
    memory_mb: int  # 0: none of its own (the compile step: the call's cgroup caps it)
    cpu_seconds: float | None = None  # CPU time of the whole process tree, when limited


class Steps:
    """The steps of one program, run as its role says."""

    def __init__(
        self,
        program: Program,
        workspace: str,
        read_roots: tuple[str, ...],
        warm: FreshInterpreter | None,
        template: TemplateCases | None,
    ) -> None:
        """``warm``: runs are forks of this interpreter made to look fresh (None: a process
        of its own each); ``template``: of the worker's clean template rather than of the
        worker."""
        self.program = program
        self.workspace = workspace
        self.read_roots = read_roots
        self.warm = warm
        self.template = template if warm is not None else None

    def run(
        self,
        where: str,
        stdin: str | None,
        args: list[str],
        limits: RunLimits,
        out: TextSink,
        err: TextSink,
        tick: Callable[[], None] | None = None,
    ) -> StepResult:
        """One run of the program in ``where``; ``tick`` is called often (every few
        milliseconds) while it runs."""
        language, code, role = self.program.language, self.program.code, self.program.role
        argv = [*language.argv(language.run, code, where, limits.memory_mb), *args]
        readable = self._run_readable()
        # A fork of the template signals nothing outside its own runs: not the template.
        scoped = role.sealed or self.template is not None
        confinement = self._confinement(where, readable, scoped) if role.own_layer else None
        streams = (out, err)
        usage = self.usage()
        return self._step(
            argv, where, stdin, limits, streams, readable, confinement, usage, self.warm, tick
        )

    def tool(
        self,
        argv: list[str],
        where: str,
        seconds: float,
        out: TextSink,
        err: TextSink,
        also_readable: tuple[str, ...] = (),
    ) -> StepResult:
        """A step of the program's toolchain (its compile, its syntax check) in ``where``,
        which it alone writes: it reads the system, the read roots, the toolchain and
        ``also_readable`` besides, nothing a session could change, and signals nothing outside
        its own (a syntax check may run the program's code: Perl's BEGIN, Racket's reader)."""
        readable = (*self.readable(), *also_readable)
        confinement = self._confinement(where, readable, True)
        limits = RunLimits(seconds, 0)
        streams = (out, err)
        return self._step(argv, where, None, limits, streams, readable, confinement, tree_usage)

    def launch(self, where: str, args: list[str], limits: RunLimits) -> Launch:
        """A run of the program in ``where`` made ready to start on descriptors of the caller's
        (``Launch.start``), sealed if its role is: for a run that talks to another process
        (``tools.grading._interaction``). Always a process of its own, never a warm fork."""
        language, code, role = self.program.language, self.program.code, self.program.role
        argv = [*language.argv(language.run, code, where, limits.memory_mb), *args]
        readable = self._run_readable()
        env = self._environment(where, limits, readable)
        confinement = self._confinement(where, readable, role.sealed)
        return Launch(argv, where, env, confinement, self._domain(), limits.memory_mb)

    def usage(self, spared: tuple[int, ...] = ()) -> Usage:
        """How a run's memory and CPU time are read: its process tree, or, for a program
        whose runs are alone where the worker is its PID namespace's init, everything in the
        namespace but the worker and the trees of ``spared`` (an interactor's)."""
        if not self.program.role.alone or not contained():
            return tree_usage
        spared = (*spared, *self.spared())
        return lambda _pid, memory, cpu: namespace_usage(spared, memory, cpu)

    def spared(self) -> tuple[int, ...]:
        """What lives beside its runs in the worker's namespace for all of them, which a
        sweep between two must leave (``sandbox._run_domain.sweep``): its template."""
        return (self.template.pid,) if self.template is not None else ()

    def readable(self) -> tuple[str, ...]:
        """What a step that must not see the session's files reads besides the system and its
        own directory: the engine's read roots (but one the workspace lies beneath) and the
        toolchain."""
        workspace = os.path.realpath(self.workspace)
        roots = [r for r in self.read_roots if not under(workspace, os.path.realpath(r))]
        return (*roots, *_toolchain_roots(self.program.language))

    def result(self, finished: Finished, stdout: str, stderr: str, limited: bool) -> StepResult:
        """How a run went, in SandboxFusion's shape; ``limited``: it had a memory limit."""
        step: StepResult = {
            "status": _status(finished, stderr, self.program.language, limited),
            "execution_time": round(finished.seconds, 4),
            "cpu_time": round(finished.cpu_seconds, 4),
            "peak_memory_kb": finished.peak_kb,
            "return_code": finished.exit_code,
            "stdout": stdout,
            "stderr": stderr,
        }
        if finished.time_exceeded is not None:
            step["exceeded"] = finished.time_exceeded
        return step

    def _run_readable(self) -> tuple[str, ...] | None:
        """What a sealed run reads besides the system and its own directory; None for a run
        that is not sealed. A Python program imports what is installed beside the
        interpreter that runs it."""
        if not self.program.role.sealed:
            return None
        python = _python_installation() if self.program.language.warm else ()
        return (*self.readable(), *python)

    def _step(
        self,
        argv: list[str],
        where: str,
        stdin: str | None,
        limits: RunLimits,
        streams: tuple[TextSink, TextSink],
        readable: tuple[str, ...] | None,
        confinement: WriteConfinement | None,
        usage: Usage,
        warm: FreshInterpreter | None = None,
        tick: Callable[[], None] | None = None,
    ) -> StepResult:
        """Run ``argv``, or, given ``warm``, the same program (``argv[1]``, a Python script,
        and its arguments) in a fork of this interpreter made to look like a fresh one.
        ``readable``: it reads only these, the system and ``where`` (its ``HOME`` too; None:
        what the worker reads); ``confinement``: its Landlock layer, closed here; ``usage``:
        how its memory and CPU time are read (a toolchain's step: its own tree)."""
        out, err = streams
        memory_mb = limits.memory_mb or None
        env = self._environment(where, limits, readable)
        domain = self._domain()
        memory_limit_kb = memory_mb * 1024 if memory_mb else None
        if domain is not None:
            domain.begin(memory_limit_kb)
        prepare = _preparing(domain, confinement)
        try:
            if warm is None:
                finished = run_captured(
                    argv,
                    where,
                    env,
                    stdin,
                    out,
                    err,
                    time_limit=limits.seconds,
                    memory_limit_kb=memory_limit_kb,
                    preexec=prepare,
                    measure_memory=True,  # peak_memory_kb, the compile step's too
                    tick=tick,
                    cpu_limit=limits.cpu_seconds,
                    usage=usage,
                    domain=domain,
                )
            else:
                start = self._warm_start(warm, argv, where, env, domain, confinement, prepare)
                finished = watch(
                    start,
                    stdin,
                    out,
                    err,
                    time_limit=limits.seconds,
                    memory_limit_kb=memory_limit_kb,
                    measure_memory=True,
                    tick=tick,
                    cpu_limit=limits.cpu_seconds,
                    usage=usage,
                    domain=domain,
                )
        except OSError as exc:  # the program could not be started at all
            if domain is not None:
                domain.end()
            return not_started(f"{argv[0]}: {exc.strerror or exc}")
        finally:
            if confinement is not None:
                confinement.close()
        return self.result(finished, out.getvalue(), err.getvalue(), memory_mb is not None)

    def _warm_start(
        self,
        warm: FreshInterpreter,
        argv: list[str],
        where: str,
        env: dict[str, str],
        domain: CaseDomain | None,
        confinement: WriteConfinement | None,
        prepare: Callable[[], None] | None,
    ) -> Callable[[ChildStdio], Child]:
        """How a run of ``argv`` (a Python script and its arguments) in a warm interpreter
        starts: a fork of the template, given its case group's files and its Landlock layer
        (``prepare``'s work, done there), or else of this process."""
        program = MainProgram(argv[1], argv[2:], where, env)
        template = self.template
        if template is None:
            return lambda stdio: start_main(warm, program, stdio, prepare)
        joins = domain.join_fds() if domain is not None else ()
        ruleset = confinement.fd if confinement is not None else None
        return lambda stdio: template.start(warm, program, stdio, joins, ruleset)

    def _domain(self) -> CaseDomain | None:
        """The case group each step of a program judged runs in, where the worker has one."""
        return case_domain() if self.program.role.judged else None

    def _environment(
        self, where: str, limits: RunLimits, readable: tuple[str, ...] | None
    ) -> dict[str, str]:
        memory_mb = limits.memory_mb or _COMPILE_MEMORY_MB
        language, code = self.program.language, self.program.code
        return {
            **os.environ,
            **({"HOME": where} if readable is not None else {}),
            "TMPDIR": os.path.join(where, TMP),
            **language.environment(code, where, memory_mb),
        }

    def _confinement(
        self, where: str, readable: tuple[str, ...] | None, scoped: bool
    ) -> WriteConfinement | None:
        # A toolchain's step writes its own directory alone; a program run once its run
        # layer too (sandbox._run_root).
        keeps = readable is None and self.program.role.keeps_run_layer
        layer = program_writable() if keeps else ()
        return confine_writes((where, *layer), readable, scoped)


@dataclass(frozen=True)
class Launch:
    """A run ready to start: the command, its directory and environment, the Landlock layer
    it enforces on itself before it executes (closed with ``close``), and the case group it
    joins then, where it has one (``domain``, begun at ``start``, limited to ``memory_mb``)."""

    argv: list[str]
    where: str
    env: dict[str, str]
    confinement: WriteConfinement | None
    domain: CaseDomain | None = None
    memory_mb: int = 0

    def start(self, stdio: ChildStdio) -> Child:
        if self.domain is not None:
            self.domain.begin(self.memory_mb * 1024 or None)
        prepare = _preparing(self.domain, self.confinement)
        return start_command(self.argv, self.where, self.env, stdio, prepare)

    def close(self) -> None:
        if self.confinement is not None:
            self.confinement.close()


def _preparing(
    domain: CaseDomain | None, confinement: WriteConfinement | None
) -> Callable[[], None] | None:
    """What a run's process does before it executes: join its case group, then enforce its
    Landlock layer (which would refuse it the group's files: they are not its to write)."""
    if domain is None:
        return confinement.enforce if confinement is not None else None
    if confinement is None:
        return domain.join

    def prepare() -> None:
        domain.join()
        confinement.enforce()

    return prepare


def _status(finished: Finished, stderr: str, language: Language, limited: bool) -> str:
    if finished.memory_exceeded:
        return "MemoryLimitExceeded"
    if finished.timed_out:
        return "TimeLimitExceeded"
    ran_out = any(marker in stderr for marker in language.out_of_memory)
    if limited and finished.exit_code != 0 and ran_out:
        return "MemoryLimitExceeded"  # the runtime's own limit (the JVM's heap, V8's) came first
    return "Finished"


def memory_mb_of(value: Any) -> int:
    if value is None:
        return DEFAULT_MEMORY_MB
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_MEMORY_MB:
        raise ValueError(f"memory_mb must be an integer from 1 to {MAX_MEMORY_MB}, got {value!r}")
    return value


def seconds_of(value: Any, name: str) -> float:
    if value is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


def cpu_seconds_of(value: Any) -> float | None:
    """A CPU-time limit given to a run, checked; None when none is given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1e9:
        raise ValueError(f"cpu_time_limit must be a positive number of seconds, got {value!r}")
    return float(value)


def not_started(why: str) -> StepResult:
    return {
        "status": "Error",
        "execution_time": 0.0,
        "cpu_time": 0.0,
        "peak_memory_kb": 0,
        "return_code": None,
        "stdout": "",
        "stderr": why,
    }


@functools.cache
def _python_installation() -> tuple[str, ...]:
    """Where this Python and its installed packages live: the same for every run, worked out
    once (it resolves every site directory) rather than for each case."""
    return tuple(readable_code_paths(()))


def _toolchain_roots(language: Language) -> list[str]:
    """Where each of the toolchain's programs is installed (``/opt/node`` for
    ``/opt/node/bin/node``): what its compile must read, wherever it lives."""
    roots = []
    for real, _, _ in language.toolchain():
        root = os.path.dirname(os.path.dirname(real))
        if root != "/":  # a program at the top: its own directory is all there is to add
            roots.append(root)
    return roots
