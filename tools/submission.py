"""A program in a language made ready to run, and its runs: what ``run_code`` runs once and
``code_eval`` runs once per test case.

The source and its files are written into a directory of the session's workspace, compiled
there at most once (or taken from the session's compile cache, ``tools.compile_cache``), and each
run is a fresh process. A run in a directory of its own (``fresh_directory``) starts from a copy
of the source, the files and what the compile made, so that one test case leaves nothing for the
next. The compiler and every run may change files only in their own directory, ``TMPDIR``
included (``sandbox.landlock.confine_writes``): the call's ``/tmp`` holds the workspace beneath
it, so it cannot be theirs. Where Landlock is missing, nothing is cached.
"""

from __future__ import annotations

import base64
import binascii
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox.landlock import abi_version, confine_writes
from a2e_engine.tools.compile_cache import CompileCache, outputs_of
from a2e_engine.tools.files import resolve_confined
from a2e_engine.tools.languages import Language
from a2e_engine.tools.processes import Finished, TextSink, run_captured, watch
from a2e_engine.tools.python_main import FreshInterpreter, start_main
from a2e_engine.tools.python_main import fresh_interpreter as fresh_interpreter_of

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT_S",
    "RunLimits",
    "StepResult",
    "Submission",
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
``peak_memory_kb``, ``return_code``, ``stdout``, ``stderr``."""


@dataclass(frozen=True)
class RunLimits:
    seconds: float
    memory_mb: int  # 0: none of its own (the compile step: the call's cgroup caps it)


class Submission:
    def __init__(
        self,
        language: Language,
        code: str,
        files: Mapping[str, Any],
        workspace: str,
        fresh_interpreter: bool = False,
    ) -> None:
        """``fresh_interpreter``: run a language that can run in a fork of the worker's warm
        interpreter (``Language.warm``, ``tools.python_main``) in a process of its own
        instead."""
        self.language = language
        self.code = code
        self.files = dict(files)
        self.workspace = workspace
        self.warm = None if fresh_interpreter or not language.warm else fresh_interpreter_of()
        self.home = tempfile.mkdtemp(prefix="run-", dir=workspace)
        try:
            source = language.source_name(code)
            self._payload = [*_write_files(self.home, self.files), source]
            with open(os.path.join(self.home, source), "w") as fh:
                fh.write(code)
            os.mkdir(os.path.join(self.home, _TMP))
        except BaseException:
            self.close()  # a file it was given outside its directory, or not base64
            raise

    def compile(self, seconds: float, out: TextSink, err: TextSink) -> StepResult | None:
        """The compile step's result (``cached`` says whether it ran), None for a language
        without one. Its outputs join what each run starts from."""
        language = self.language
        if language.compile is None:
            return None
        cache = CompileCache(self.workspace) if abi_version() else None
        key, hit = "", None
        if cache is not None:
            # The command as written, not where it runs: the key must not hold the directory.
            template = language.argv(language.compile, self.code, "", 0)
            key = cache.key(language, self.code, self.files, template)
            hit = cache.lookup(key)
        if cache is not None and hit is not None:
            entry, result = hit
            cache.place(entry, self.home)
            compiled = {**result, "cached": True}
        else:
            argv = language.argv(language.compile, self.code, self.home, 0)
            compiled = {**self._step(argv, self.home, None, RunLimits(seconds, 0), out, err)}
            compiled["cached"] = False
            if cache is not None and compiled["return_code"] == 0:
                cache.store(key, self.home, language.outputs, compiled)
        self._payload.extend(outputs_of(self.home, language.outputs))
        return compiled

    def fresh_directory(self) -> str:
        """A new directory holding what a run starts from (remove it once done)."""
        where = tempfile.mkdtemp(prefix="case-", dir=self.workspace)
        for relative in self._payload:
            source, target = os.path.join(self.home, relative), os.path.join(where, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copy2(source, target)
        os.mkdir(os.path.join(where, _TMP))
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
        argv = [*self.language.argv(self.language.run, self.code, where, limits.memory_mb), *args]
        return self._step(argv, where, stdin, limits, out, err, warm=self.warm, tick=tick)

    def close(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)

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
    ) -> StepResult:
        """Run ``argv``, or, given ``warm``, the same program (``argv[1]``, a Python script,
        and its arguments) in a fork of this interpreter made to look like a fresh one."""
        language, memory_mb = self.language, limits.memory_mb or None
        env = {
            **os.environ,
            "TMPDIR": os.path.join(where, _TMP),
            **language.environment(self.code, where, limits.memory_mb or _COMPILE_MEMORY_MB),
        }
        confinement = confine_writes((where,))
        confine = confinement.enforce if confinement is not None else None
        memory_limit_kb = memory_mb * 1024 if memory_mb else None
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
                    preexec=confine,
                    measure_memory=True,  # peak_memory_kb, the compile step's too
                    tick=tick,
                )
            else:
                script, args = argv[1], argv[2:]
                finished = watch(
                    lambda stdio: start_main(warm, script, args, where, env, stdio, confine),
                    stdin,
                    out,
                    err,
                    time_limit=limits.seconds,
                    memory_limit_kb=memory_limit_kb,
                    measure_memory=True,
                    tick=tick,
                )
        except OSError as exc:  # the program could not be started at all
            return not_started(f"{argv[0]}: {exc.strerror or exc}")
        finally:
            if confinement is not None:
                confinement.close()
        stderr = err.getvalue()
        return {
            "status": _status(finished, stderr, language, memory_mb is not None),
            "execution_time": round(finished.seconds, 4),
            "cpu_time": round(finished.cpu_seconds, 4),
            "peak_memory_kb": finished.peak_kb,
            "return_code": finished.exit_code,
            "stdout": out.getvalue(),
            "stderr": stderr,
        }


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


def _write_files(where: str, files: Mapping[str, Any]) -> list[str]:
    """Write ``files`` (path to base64) beneath ``where``; their relative paths."""
    written = []
    for path, content in files.items():
        if content is None:
            continue
        target = resolve_confined(str(path), where, ())
        try:
            data = base64.b64decode(str(content), validate=True)
        except binascii.Error:
            raise ValueError(f"files[{path!r}] is not base64") from None
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(data)
        written.append(os.path.relpath(target, where))
    return written
