"""A program in a language made ready to run, and its runs: what ``run_code`` runs once and
``code_eval`` runs once per test case.

The source and its files are written into a directory of the session's workspace, compiled at
most once (or taken from a compile cache, ``tools._compile_cache``), and each run is a fresh
process. A run in a directory of its own (``fresh_directory``) starts from a copy of the source,
the files and what the compile made, so that one test case leaves nothing for the next. The
compiler and every run, in every language, may change files only in their own directory,
``TMPDIR`` included (``sandbox._landlock.confine_writes``), and a program run once (not a test
case) its worker's run layer too (``sandbox._run_root``). Where Landlock is missing, nothing
is cached.

The session's other calls can change the workspace while this one writes there (put a link
where a file of ours is about to go): every file written or copied for a run is opened beneath
its directory's descriptor, never through a link (``sandbox._beneath``).

With the engine's shared cache the compile happens in a directory of its own in the call's tmp,
which no other call can write, and it reads only the toolchain, the system, the engine's read
roots and the precompiled headers besides it: what it makes depends on the key alone. Its
outputs are then copied into the run's directory, and offered to the cache, which only the
supervisor writes.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._beneath import copy_beneath, make_dirs_beneath, open_dir
from a2e_engine.sandbox._landlock import WriteConfinement, confine_writes, readable_code_paths
from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._run_domain import CaseDomain, case_domain, contained, namespace_usage
from a2e_engine.sandbox._run_root import program_writable
from a2e_engine.sandbox._tree_usage import tree_usage
from a2e_engine.tools._compile_cache import (
    CompileCache,
    Outputs,
    PrecompiledHeaders,
    caches_for,
    outputs_of,
    read_outputs,
    write_outputs,
)
from a2e_engine.tools._confined import decoded_files, write_decoded
from a2e_engine.tools._languages import Language, toolchain_path
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
from a2e_engine.tools._python_main import fresh_interpreter as fresh_interpreter_of
from a2e_engine.tools._template_cases import TemplateCases

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "Launch",
    "RunLimits",
    "StepResult",
    "Submission",
    "cpu_seconds_of",
    "memory_mb_of",
    "not_started",
    "seconds_of",
]

DEFAULT_TIMEOUT_S = 10.0
DEFAULT_MEMORY_MB = 1024
MAX_MEMORY_MB = 65536
_TMP = ".tmp"
#: What the compiler's environment says of memory (GOMEMLIMIT for ``go build``, itself Go).
_COMPILE_MEMORY_MB = 4096

StepResult = dict[str, Any]
"""SandboxFusion's shape of one step: ``status``, ``execution_time``, ``cpu_time``,
``peak_memory_kb``, ``return_code``, ``stdout``, ``stderr``; and, past a time limit, which one
it ran past: ``exceeded`` (``cpu_time`` or ``wall_time``)."""


@dataclass(frozen=True)
class RunLimits:
    seconds: float  # wall-clock
    memory_mb: int  # 0: none of its own (the compile step: the call's cgroup caps it)
    cpu_seconds: float | None = None  # CPU time of the whole process tree, when limited


class Submission:
    def __init__(
        self,
        language: Language,
        code: str,
        files: Mapping[str, Any],
        workspace: str,
        fresh_interpreter: bool = False,
        plugin_dirs: tuple[str, ...] = (),
        read_roots: tuple[str, ...] = (),
        run_layer: bool = False,
        sealed_runs: bool = False,
        alone: bool = False,
        confined_runs: bool = True,
        jury: bool = False,
        template: TemplateCases | None = None,
    ) -> None:
        """``run_layer``: its runs may write the worker's run layer too (``sandbox._run_root``),
        which outlives each run: for a program run once, not for cases that must each start
        from nothing the last one left. ``fresh_interpreter``: run a language that can run in
        a fork of the worker's warm interpreter (``Language.warm``, ``tools._python_main``) in
        a process of its own instead. ``plugin_dirs``: the engine's shared compile cache, when
        the tool was given it (``tools._compile_cache.caches_for``); ``read_roots``: what the
        engine lets calls read besides the system (a toolchain there). ``sealed_runs``: its
        runs read nothing but the system, the read roots, the toolchain and their own
        directory, and signal no process outside their own (what a checker of the call keeps
        from the candidate, ``tools.grading._checker``); where Landlock is missing they cannot be
        sealed, and the caller must not run them. ``alone``: each of its runs is all that runs
        in the worker (beside a problem's interactor): where the worker is its PID namespace's
        init, a run is accounted as the whole namespace (``sandbox._run_domain``).
        ``confined_runs=False``: its runs get no Landlock layer of their own over the worker's
        (a checker's: the caller's own program, run where no program of the call's runs, and
        started without a full fork of the worker, which the layer needs and which costs more
        than the check). ``jury``: the problem's own checker or interactor, whose steps stay
        out of the worker's case group (``sandbox._run_domain``), which every step of the
        program judged joins, its compile and syntax check too. ``template``: runs of a language
        run warm are forks of the worker's clean template (``tools._template_cases``), which
        holds nothing of what judges them, rather than of the worker. The files are checked
        here (a path outside the run's directory, content that is not base64), written later."""
        self.language = language
        self.code = code
        self.files = dict(files)
        self.workspace = workspace
        # A language without a compile step has nothing to cache.
        compiled = language.compile is not None
        self.cache, self.headers = caches_for(plugin_dirs, workspace) if compiled else (None, None)
        self.read_roots = read_roots
        self.run_layer = run_layer
        self.sealed_runs = sealed_runs
        self.alone = alone
        self.confined_runs = confined_runs
        self.jury = jury
        self.warm = None if fresh_interpreter or not language.warm else fresh_interpreter_of()
        self.template = template if self.warm is not None else None
        self._workspace_fd = open_dir(workspace)
        self._home_fd = -1
        try:
            self.home = _make_dir(self._workspace_fd, workspace, "run-")
            self._home_fd = open_dir(self.home)
            self._filled = False
            self._contents = [*decoded_files(self.home, self.files)]
            self._contents.append((language.source_name(code), language.source_text(code).encode()))
        except BaseException:
            self.close()
            raise
        # What each run starts from; files given by absolute path are the run layer's, once.
        self._payload = [path for path, _ in self._contents if not os.path.isabs(path)]

    def compile(self, seconds: float, out: TextSink, err: TextSink) -> StepResult | None:
        """The compile step's result (``cached`` says whether it ran), None for a language
        without one. Its outputs join what each run starts from."""
        language, cache = self.language, self.cache
        if language.compile is None:
            return None
        key = cache.key(language, self.code, self.files) if cache is not None else ""
        hit = cache.lookup(key) if cache is not None else None
        if hit is not None:
            self._fill_home()
            compiled = {**hit.place(self._home_fd, self.home), "cached": True}
        elif cache is not None and cache.shared:
            compiled, outputs = self._compile_apart(cache, key, seconds, out, err)
            self._fill_home()
            write_outputs(outputs, self._home_fd)
        else:
            self._fill_home()
            argv = language.compile_argv(self.code, self.home)
            limits = RunLimits(seconds, 0)
            readable = self._readable()
            compiled = {
                **self._step(
                    argv, self.home, None, limits, out, err, readable=readable, scoped=True
                )
            }
            compiled["cached"] = False
            if cache is not None and compiled["return_code"] == 0:
                made = _outputs(self.home, language)
                if made:
                    cache.store(key, made, compiled, self.home)
        self._payload.extend(outputs_of(self.home, language.outputs))
        return compiled

    def check_syntax(self, seconds: float, out: TextSink, err: TextSink) -> StepResult | None:
        """For a language without a compile step, whether the program parses, as a compile
        step's result when it does not (None when it does, or cannot be checked here): graders
        call a program that does not parse a compile error, not a failure of each case. A
        language run warm is parsed here, as its interpreter would parse it, with what it
        would print; another by its ``syntax_check`` command, if the host has it."""
        language = self.language
        if language.compile is not None:
            return None
        if language.warm:
            try:
                compile(self.code, language.source_name(self.code), "exec", dont_inherit=True)
            except (SyntaxError, ValueError) as exc:
                message = "".join(traceback.format_exception_only(exc))
                return {**not_started(message), "status": "Finished", "return_code": 1}
            except (MemoryError, RecursionError) as exc:
                return {**not_started(f"{type(exc).__name__}: too large or deep to parse")}
            return None
        if not language.syntax_check or toolchain_path(language.syntax_check[0]) is None:
            return None
        self._fill_home()
        argv = language.argv(language.syntax_check, self.code, self.home, 0)
        limits = RunLimits(seconds, 0)
        # It may run the program's code (Perl's BEGIN, Racket's reader): sealed as a run is.
        readable = self._readable()
        checked = self._step(
            argv, self.home, None, limits, out, err, readable=readable, scoped=True
        )
        return checked if checked["return_code"] != 0 else None

    def _compile_apart(
        self, cache: CompileCache, key: str, seconds: float, out: TextSink, err: TextSink
    ) -> tuple[StepResult, Outputs]:
        """Compile in a private directory of the call's tmp, reading nothing a session could
        change; offer the outputs to the shared cache; the result and the outputs, for the
        run's directory. A program that includes a header worth precompiling gets it, once
        the supervisor has built it (this call asks for it when it is not)."""
        language = self.language
        built = tempfile.mkdtemp(prefix="build-")
        try:
            fd = open_dir(built)
            try:
                _write_contents(fd, [c for c in self._contents if not os.path.isabs(c[0])])
            finally:
                os.close(fd)
            readable = self._readable()
            include = self._precompiled()
            argv = language.compile_argv(self.code, built, include or "")
            readable = (*readable, *([include] if include else ()))
            limits = RunLimits(seconds, 0)
            compiled = {
                **self._step(argv, built, None, limits, out, err, readable=readable, scoped=True)
            }
            compiled["cached"] = False
            outputs = _outputs(built, language) if compiled["return_code"] == 0 else {}
            if outputs or language.failed_on_its_source(self.code, compiled):
                cache.store(key, outputs, compiled, built)  # a failure: the source's own
            else:
                cache.nothing_to_share(key)
            return compiled, outputs
        finally:
            shutil.rmtree(built, ignore_errors=True)

    def _precompiled(self) -> str | None:
        """The directory of the program's precompiled header, or None (the language has none,
        the program does not include it, or it is not built yet: asked for now)."""
        headers: PrecompiledHeaders | None = self.headers
        header = self.language.precompiled_header(self.code)
        if headers is None or not header:
            return None
        include = headers.ready(self.language, header)
        if include is None:
            headers.request(self.language, header)
        return include

    def _fill_home(self) -> None:
        """Write the source and the files into the run's directory, once: beneath it, or, given
        by an absolute path, beneath the run layer's directory that holds it, never through a
        link (the session's other calls may have put one there)."""
        if self._filled:
            return
        self._filled = True
        _write_contents(self._home_fd, self._contents)

    def fresh_directory(self) -> str:
        """A new directory holding what a run starts from (remove it once done)."""
        self._fill_home()
        where = _make_dir(self._workspace_fd, self.workspace, "case-")
        fd = open_dir(where)
        try:
            for relative in self._payload:
                copy_beneath(self._home_fd, fd, relative)
            os.close(make_dirs_beneath(fd, _TMP, 0o700))
        finally:
            os.close(fd)
        return where

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
        """One run; ``tick`` is called often (every few milliseconds) while it runs."""
        self._fill_home()
        argv = [*self.language.argv(self.language.run, self.code, where, limits.memory_mb), *args]
        readable = self._run_readable()
        # A fork of the template signals nothing outside its own runs: not the template.
        scoped = self.sealed_runs or self.template is not None
        return self._step(
            argv,
            where,
            stdin,
            limits,
            out,
            err,
            self.warm,
            tick,
            readable,
            scoped,
            self.usage(),
            self.confined_runs,
        )

    def usage(self, spared: tuple[int, ...] = ()) -> Usage:
        """How a run's memory and CPU time are read: its process tree, or, for a submission
        whose runs are alone where the worker is its PID namespace's init, everything in the
        namespace but the worker and the trees of ``spared`` (an interactor's)."""
        if not self.alone or not contained():
            return tree_usage
        spared = (*spared, *self.spared())
        return lambda _pid, memory, cpu: namespace_usage(spared, memory, cpu)

    def spared(self) -> tuple[int, ...]:
        """What lives beside its runs in the worker's namespace for all of them, which a
        sweep between two must leave (``sandbox._run_domain.sweep``): its template."""
        return (self.template.pid,) if self.template is not None else ()

    def _run_readable(self) -> tuple[str, ...] | None:
        """What a sealed run reads besides the system and its own directory; None for a run
        that is not sealed. A Python program imports what is installed beside the
        interpreter that runs it."""
        if not self.sealed_runs:
            return None
        python = _python_installation() if self.language.warm else ()
        return (*self._readable(), *python)

    def _readable(self) -> tuple[str, ...]:
        """What a run or a compile that must not see the session's files reads besides the
        system and its own directory: the engine's read roots (but one the workspace lies
        beneath) and the toolchain."""
        workspace = os.path.realpath(self.workspace)
        roots = [r for r in self.read_roots if not under(workspace, os.path.realpath(r))]
        return (*roots, *_toolchain_roots(self.language))

    def close(self) -> None:
        if self._home_fd >= 0:
            os.close(self._home_fd)
            self._home_fd = -1
        if self._workspace_fd >= 0:
            if getattr(self, "home", None):
                shutil.rmtree(
                    os.path.basename(self.home), ignore_errors=True, dir_fd=self._workspace_fd
                )
            os.close(self._workspace_fd)
            self._workspace_fd = -1

    def _step(
        self,
        argv: list[str],
        where: str,
        stdin: str | None,
        limits: RunLimits,
        out: TextSink,
        err: TextSink,
        warm: FreshInterpreter | None = None,
        tick: Callable[[], None] | None = None,
        readable: tuple[str, ...] | None = None,
        scoped: bool = False,
        usage: Usage = tree_usage,
        confined: bool = True,
    ) -> StepResult:
        """Run ``argv``, or, given ``warm``, the same program (``argv[1]``, a Python script,
        and its arguments) in a fork of this interpreter made to look like a fresh one.
        ``readable``: it reads only these, the system and ``where`` (its ``HOME`` too);
        ``scoped``: it signals no process outside its own Landlock domain; ``confined``: a
        Landlock layer of its own at all."""
        memory_mb = limits.memory_mb or None
        env = self._environment(where, limits, readable)
        confinement = self._confinement(where, readable, scoped) if confined else None
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
        return self.step_result(finished, out.getvalue(), err.getvalue(), memory_mb is not None)

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
        """The case group each step of the program judged runs in, where the worker has one
        (none for the jury's own programs)."""
        return None if self.jury else case_domain()

    def launch(self, where: str, args: list[str], limits: RunLimits) -> Launch:
        """A run of the program in ``where`` made ready to start on descriptors of the caller's
        (``Launch.start``), sealed if its runs are: for a run that talks to another process
        (``tools.grading._interaction``). Always a process of its own, never a warm fork."""
        self._fill_home()
        argv = [*self.language.argv(self.language.run, self.code, where, limits.memory_mb), *args]
        readable = self._run_readable()
        env = self._environment(where, limits, readable)
        confinement = self._confinement(where, readable, self.sealed_runs)
        return Launch(argv, where, env, confinement, self._domain(), limits.memory_mb)

    def step_result(
        self, finished: Finished, stdout: str, stderr: str, limited: bool
    ) -> StepResult:
        """How a run went, in SandboxFusion's shape; ``limited``: it had a memory limit."""
        step: StepResult = {
            "status": _status(finished, stderr, self.language, limited),
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

    def _environment(
        self, where: str, limits: RunLimits, readable: tuple[str, ...] | None
    ) -> dict[str, str]:
        memory_mb = limits.memory_mb or _COMPILE_MEMORY_MB
        return {
            **os.environ,
            **({"HOME": where} if readable is not None else {}),
            "TMPDIR": os.path.join(where, _TMP),
            **self.language.environment(self.code, where, memory_mb),
        }

    def _confinement(
        self, where: str, readable: tuple[str, ...] | None, scoped: bool
    ) -> WriteConfinement | None:
        # A compile under the shared cache writes its own directory alone; a program run once
        # its run layer too (sandbox._run_root).
        layer = program_writable() if readable is None and self.run_layer else ()
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


def _write_contents(where: int, contents: list[tuple[str, bytes]]) -> None:
    """Write each (path, content) of ``decoded_files`` for the directory ``where`` (a
    descriptor), never through a link, and make its ``TMPDIR``."""
    for path, data in contents:
        write_decoded(where, path, data)
    os.close(make_dirs_beneath(where, _TMP, 0o700))


def _outputs(where: str, language: Language) -> Outputs:
    """What the compile step made in ``where``, read to be kept; none when it is not plain
    files at the top of it (a link, a FIFO), or cannot be read."""
    try:
        return read_outputs(where, language.outputs) or {}
    except OSError:
        return {}


def _make_dir(parent: int, parent_path: str, prefix: str) -> str:
    """A new directory with an unguessable name in ``parent`` (a descriptor of
    ``parent_path``); its path."""
    while True:
        name = f"{prefix}{os.urandom(4).hex()}"
        try:
            os.mkdir(name, 0o700, dir_fd=parent)
            return os.path.join(parent_path, name)
        except FileExistsError:
            continue
