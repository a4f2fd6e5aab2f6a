"""An interactive problem's case: the program and the problem's interactor started side by side,
each one's stdout the other's stdin, as testlib's ``interactor <input> <output>`` has it: the
interactor reads the case's input from the file, talks to the program, writes what it wants a
checker to see to the output file (testlib's ``tout``), and its exit code is the verdict (testlib's,
as a checker's: ``tools.grading._checker``).

The pipes run from one process to the other, not through the worker: the worker reads only
their stderr and watches both to their limits (``tools._processes.Monitor``). The program has the
case's limits and is sealed as it is under a checker (it reads nothing but its own directory and
the system, and signals no process outside its own); the interactor runs in a directory and a
Landlock domain of its own, with the program's wall-clock limit plus ``INTERACTOR_SLACK_S``.
Nothing hangs: a program that stops reading blocks once the pipe is full, one that floods
blocks too, two that wait on each other wait until the program's wall-clock limit; then both
are killed.

The verdict, in this order: the program's memory limit (``MLE``) or CPU time (``TLE``); its
wall-clock limit (``IL``, idleness, when it was waiting rather than computing: under a CPU
limit, always); the interactor's failure (``JE``); the interactor's verdict when it is not
``AC`` (a program that died mid-talk leaves the interactor an early end of input: its word);
the program's own failure (``RE``); else ``AC``, or with a checker, the checker's verdict on
what the interactor wrote.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from dataclasses import dataclass
from typing import Any

from a2e_engine.sandbox._beneath import open_dir, read_beneath, write_beneath
from a2e_engine.sandbox._run_domain import sweep
from a2e_engine.tools._processes import Finished, Monitor, Outputs
from a2e_engine.tools._steps import Launch, Role, RunLimits, StepResult, Steps, not_started
from a2e_engine.tools._submission import Submission
from a2e_engine.tools.grading._checker import (
    CASE_FILES,
    CheckerSpec,
    compile_failure,
    jury_memory_mb,
    jury_submission,
    message_of,
    points_of,
    verdict_of_jury,
)
from a2e_engine.tools.grading._judging import (
    ACCEPTED,
    IDLENESS,
    OUTPUT_SLACK_CHARS,
    WRONG,
    Capture,
    CaseVerdict,
    verdict_of_exit,
)

__all__ = ["INTERACTOR_SLACK_S", "Interaction", "Interactor"]

#: The interactor's wall-clock limit past the program's: time to read its last words.
INTERACTOR_SLACK_S = 1.0
#: What is read of what the interactor wrote for a checker.
MAX_WRITTEN_BYTES = 16 << 20


@dataclass(frozen=True)
class Interaction:
    """How one case's talk went: both runs (``stdout`` of each is empty: it went to the
    other), and what the interactor wrote to its output file."""

    program: StepResult
    interactor: StepResult
    written: str
    unstarted: str = ""  # "program" or "interactor": the one that could not be started


class Interactor:
    """A problem's interactor made ready to talk to a program once per case (compiled at most
    once)."""

    def __init__(
        self, spec: CheckerSpec, workspace: str, plugin_dirs: tuple[str, ...], memory_mb: int
    ) -> None:
        self.spec = spec
        self.memory_mb = memory_mb
        self.submission = jury_submission(spec, Role.INTERACTOR, workspace, plugin_dirs)

    def compile(self, seconds: float) -> StepResult | None:
        """The compile step, when it failed (None when it did not, or there is none)."""
        return compile_failure(self.submission, seconds)

    def talk(self, program: Submission, given: str, limits: RunLimits) -> Interaction:
        """The program (sealed) and the interactor side by side on ``given``, the case's
        input, to the end of both."""
        jury_limits = RunLimits(limits.seconds + INTERACTOR_SLACK_S, jury_memory_mb(self.memory_mb))
        solution_dir = program.fresh_directory()
        jury_dir = self.submission.fresh_directory()
        try:
            fd = open_dir(jury_dir)
            try:
                write_beneath(fd, CASE_FILES[0], given.encode("utf-8", "replace"))
            finally:
                os.close(fd)
            solution = program.launch(solution_dir, [], limits)
            jury = self.submission.launch(jury_dir, list(CASE_FILES[:2]), jury_limits)
            try:
                ran, judged = _side_by_side(solution, limits, jury, jury_limits, program.steps)
            finally:
                solution.close()
                jury.close()
            program_step = program.steps.result(ran[0], "", ran[1], True)
            jury_step = self.submission.steps.result(judged[0], "", judged[1], True)
            return Interaction(program_step, jury_step, _written(jury_dir))
        except OSError as exc:  # one of the two could not be started: which, the verdict says
            failed = not_started(f"could not start: {exc.strerror or exc}")
            if isinstance(exc, _ProgramNotStarted):
                return Interaction(failed, not_started("the program did not start"), "", "program")
            idle = not_started("the interactor did not start")
            return Interaction(idle, failed, "", "interactor")
        finally:
            shutil.rmtree(solution_dir, ignore_errors=True)
            shutil.rmtree(jury_dir, ignore_errors=True)

    def verdict(self, talk: Interaction, cpu_limited: bool) -> tuple[CaseVerdict, dict[str, Any]]:
        """The case's verdict (the order is the module's), and what its result says of the
        interactor (``interactor_message``, ``points``, ``interactor``: its run)."""
        program, jury = talk.program, talk.interactor
        message = message_of(jury)
        said: dict[str, Any] = {"interactor_message": message, **points_of(jury, message)}
        said["interactor"] = {k: v for k, v in jury.items() if k not in ("stdout", "stderr")}
        status = program["status"]
        if talk.unstarted == "interactor":  # nothing was judged
            return verdict_of_jury(jury, message, self.spec, "interactor"), said
        if talk.unstarted == "program":
            return verdict_of_exit(program), said
        if status == "TimeLimitExceeded" and program.get("exceeded") == "wall_time":
            idle = cpu_limited or program["cpu_time"] < program["execution_time"] / 2
            if idle:
                spent = f"{program['execution_time']:.2f} s, {program['cpu_time']:.2f} s of CPU"
                why = f"waited past its wall-clock limit ({spent}): idleness limit exceeded"
                return CaseVerdict(IDLENESS, why), said
        ended = verdict_of_exit(program)
        if status in ("TimeLimitExceeded", "MemoryLimitExceeded"):
            return ended, said
        if jury["status"] == "Finished" and jury["return_code"] == -signal.SIGPIPE:
            why = "it stopped reading before the interactor was done (the interactor's reply "
            return CaseVerdict(WRONG, why + "found its input closed)"), said
        judged = verdict_of_jury(jury, message, self.spec, "interactor")
        if judged.verdict != ACCEPTED or ended.verdict == ACCEPTED:
            return judged, said
        return ended, said

    def close(self) -> None:
        self.submission.close()


def _side_by_side(
    solution: Launch,
    limits: RunLimits,
    jury: Launch,
    jury_limits: RunLimits,
    steps: Steps,
) -> tuple[tuple[Finished, str], tuple[Finished, str]]:
    """Both started on crossed pipes and watched to their ends; each one's ending and stderr.
    The interactor is stopped as soon as the program is stopped by a limit: it has nobody
    left to talk to. ``steps``: the program's, which say how its run is accounted and what
    lives beside its runs for all of them (its template), which no sweep may take."""
    to_jury_r, to_jury_w = os.pipe()
    to_solution_r, to_solution_w = os.pipe()
    solution_err_r, solution_err_w = os.pipe()
    jury_err_r, jury_err_w = os.pipe()
    ours = [to_jury_r, to_jury_w, to_solution_r, to_solution_w, solution_err_w, jury_err_w]
    try:
        jury_child = jury.start((to_jury_r, to_solution_w, jury_err_w))
        try:
            solution_child = solution.start((to_solution_r, to_jury_w, solution_err_w))
        except BaseException as exc:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(jury_child.pid, signal.SIGKILL)
            os.waitpid(jury_child.pid, 0)
            if isinstance(exc, OSError):
                raise _ProgramNotStarted(exc.errno, exc.strerror) from exc
            raise
    except BaseException:
        for fd in (solution_err_r, jury_err_r):
            os.close(fd)
        raise
    finally:
        for fd in ours:
            os.close(fd)
    memory = limits.memory_mb * 1024 or None
    beside = steps.spared()
    spared = (jury_child.pid, *beside)
    program = Monitor(
        solution_child,
        limits.seconds,
        limits.cpu_seconds,
        memory,
        True,
        steps.usage((jury_child.pid,)),
        solution.domain,
    )
    interactor = Monitor(jury_child, jury_limits.seconds, None, jury_limits.memory_mb * 1024, True)
    program_err, jury_err = Capture(OUTPUT_SLACK_CHARS), Capture(OUTPUT_SLACK_CHARS)
    swept = False

    def after_the_program() -> None:
        """Once the program has ended, what it left is killed (a process it left could hold
        the interactor's pipes open); once stopped by a limit, the interactor too: it has
        nobody left to talk to."""
        nonlocal swept
        if program.reaped is not None and not swept:  # reaped here, not by the sweep
            swept = True
            sweep(spared)
        if program.time_exceeded or program.memory_exceeded:
            interactor.stop()

    try:
        Outputs({solution_err_r: program_err, jury_err_r: jury_err}).follow(
            [program, interactor], after_the_program
        )
        return (program.finish(), program_err.getvalue()), (
            interactor.finish(),
            jury_err.getvalue(),
        )
    finally:
        sweep(beside)


class _ProgramNotStarted(OSError):
    """The program could not be started (the interactor was, and has been killed)."""


def _written(where: str) -> str:
    """What the interactor wrote to its output file (empty when it wrote none)."""
    try:
        fd = open_dir(where)
    except OSError:
        return ""
    try:
        data = read_beneath(fd, CASE_FILES[1], MAX_WRITTEN_BYTES)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace") if data is not None else ""
