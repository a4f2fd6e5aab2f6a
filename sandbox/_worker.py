"""A worker's life: harden, wait for one job, run it, report through frames, exit.

Everything the worker says travels as frames on its result pipe, as ``sandbox._messages``
declares them: a setup error, events, then one result. The supervisor treats all of it as
hostile input: tool code runs in this process and can write anything to the pipe.
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import signal
import tempfile
import threading
from collections.abc import Callable
from typing import Any, cast

from a2e import _jsonwire as jsonwire
from a2e.caps.tools._plugin import ToolCancelled, ToolContext, ToolExecutionError, ToolPlugin
from a2e.caps.tools._reasons import FailureReason
from a2e_engine.sandbox import _contain as contain
from a2e_engine.sandbox import _forks as forks
from a2e_engine.sandbox import _offers as offers
from a2e_engine.sandbox import _run_root as run_root
from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._beneath import open_unlinked
from a2e_engine.sandbox._call_input import reader
from a2e_engine.sandbox._case_group import forget_case_group
from a2e_engine.sandbox._frames import write_frame, write_frame_bytes
from a2e_engine.sandbox._messages import (
    FailureFrame,
    Job,
    encode_job,
    event_frame,
    failure_frame,
    job_with_payload,
    read_job,
    read_layers,
    read_payload,
    result_frame,
    setup_error_frame,
)
from a2e_engine.sandbox._preparation import Preparation, Worker
from a2e_engine.sandbox._template import Template, fork_serving

__all__ = ["EXIT_SETUP_FAILED", "run_worker"]

EXIT_SETUP_FAILED = 70


def _raise_cancelled(signum: int, frame: object) -> None:
    raise ToolCancelled("the call was cancelled or timed out; clean up now")


class JobSetupError(Exception):
    """The job could not be started (its uid, its directories): said on the pipe, no tool ran."""


#: Failures that depend only on the arguments: retrying the same call cannot help.
DETERMINISTIC_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    TypeError,
    KeyError,
    LookupError,
    PermissionError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    FileExistsError,
    NotImplementedError,
    SyntaxError,
)


def _failure_frame(exc: BaseException) -> FailureFrame:
    if isinstance(exc, ToolExecutionError):
        return failure_frame(str(exc), exc.data, exc.retryable, reason=exc.reason)
    if isinstance(exc, MemoryError):
        return failure_frame("out of memory (MemoryError)", reason=FailureReason.OUT_OF_MEMORY)
    return failure_frame(
        f"{type(exc).__name__}: {exc}", retryable=not isinstance(exc, DETERMINISTIC_ERRORS)
    )


def _encoded_result(data: Any, max_frame: int) -> str | FailureFrame:
    """The result's JSON, encoded once (it may be megabytes: measuring its size and then
    encoding the frame would encode it twice); a failure frame if it cannot be sent."""
    try:
        encoded = jsonwire.dumps(data)
    except (TypeError, ValueError) as exc:
        return failure_frame(f"tool returned a result that is not JSON-serialisable: {exc}")
    if len(encoded) > max_frame - 1024:  # ASCII escapes: characters are bytes
        return failure_frame(
            f"tool result of {len(encoded)} bytes exceeds the limit of {max_frame - 1024} bytes",
            reason=FailureReason.OUTPUT_LIMIT,
        )
    return encoded


def run_first_job(
    prep: Preparation,
    job: Job,
    result_fd: int,
    template: Template | None = None,
    job_fd: int = -1,
) -> None:
    """The job this worker was forked for, its layers taken: the tool (given the clean
    template, when its plugin asked for one, and its input from ``job_fd``, when the call
    takes some)."""
    if float(job.get("cancel_grace_s") or 0) > 0:
        signal.signal(signal.SIGTERM, _raise_cancelled)
    max_frame = prep.settings.max_frame
    given = reader(job_fd, max_frame) if job.get("input") and job_fd >= 0 else None
    execute_job(prep.plugins[job["plugin"]], job, result_fd, max_frame, template, given)


def _take_job(prep: Preparation, worker: Worker, job: Job) -> None:
    """The job's layers' last steps in this process, its workspace the working directory and
    its directories the environment's (what its clean template inherits)."""
    try:
        contain.on_job(prep, worker, job)
        _enter(job["workspace"])
    except (OSError, KeyError) as exc:
        raise JobSetupError(f"the job could not start: {type(exc).__name__}: {exc}") from None
    home = job.get("home", "")
    os.environ["HOME"] = (
        home if home and run_root.link_home(home, job["workspace"]) else (job["workspace"])
    )
    os.environ["TMPDIR"] = job["tmp_dir"]
    tempfile.tempdir = job["tmp_dir"]  # the zygote may have cached the host's /tmp already


def _enter(directory: str) -> None:
    """Make ``directory`` the working directory, refusing a link anywhere on its way: the
    session's programs may have put one where the engine made its workspace."""
    fd = open_unlinked(directory)
    try:
        os.fchdir(fd)
    finally:
        os.close(fd)


def execute_job(
    plugin: ToolPlugin,
    job: Job,
    result_fd: int,
    max_frame: int,
    template: Template | None = None,
    given: Callable[[], bytes | None] | None = None,
) -> None:
    """The tool run on ``job`` in this process as it is now, its events and its result framed
    on ``result_fd``: the part of a job that a resident worker repeats for each of its jobs.
    ``given``: the call's input, when it takes some."""
    plugin.context = _context(job, template, given)

    # Tool code may emit from several threads; frames larger than PIPE_BUF would interleave.
    # Once the result is written, late events (a lingering thread) are dropped, not sent.
    lock = threading.Lock()
    finished = False

    def send_event(kind: str, data: dict[str, Any]) -> None:
        with lock:
            if not finished:
                write_frame(result_fd, event_frame(str(kind), data))

    def send_offer(frame: bytes) -> None:
        with lock:
            if not finished:
                write_frame_bytes(result_fd, frame)

    plugin.set_event_sink(send_event)  # emit() checks the data; no ToolEvent needed here
    offers.set_share_sink(send_offer, max_frame)
    result: str | FailureFrame
    try:
        result = _encoded_result(plugin._execute_tool(job["tool"], job["arguments"]), max_frame)
    except BaseException as exc:  # SystemExit from tool code is a failure, not an exit
        result = _failure_frame(exc)
        del exc
    frame = _final_frame(result)
    with lock:
        finished = True
        write_frame_bytes(result_fd, frame)


def _context(
    job: Job, template: Template | None = None, given: Callable[[], bytes | None] | None = None
) -> ToolContext:
    """What the tool sees of its job."""
    return ToolContext(
        input=given,
        workspace=job["workspace"],
        tmp_dir=job["tmp_dir"],
        read_roots=tuple(job.get("read_roots", ())),
        streaming=bool(job.get("streaming")),
        call_id=job.get("call_id", ""),
        secrets=dict(job.get("secrets") or {}),
        template=template,
    )


def _final_frame(result: str | FailureFrame) -> bytes:
    """The result frame with the worker's account of itself; a success's data spliced in."""
    rusage = resource.getrusage(resource.RUSAGE_SELF)
    cpu_ms, maxrss_kb = int((rusage.ru_utime + rusage.ru_stime) * 1000), int(rusage.ru_maxrss)
    return result_frame(result, cpu_ms, maxrss_kb)


#: The job the rehearsal sends itself: whole, as the supervisor's are, and of no tool.
_REHEARSAL: Job = {
    "zygote": "",
    "plugin": -1,
    "tool": "",
    "arguments": {},
    "profile": "",
    "workspace": "/",
    "tmp_dir": "/",
    "streaming": False,
    "read_roots": [],
    "call_id": "",
    "uid": None,
    "cancel_grace_s": 0.0,
    "secrets": {},
}


def rehearse_job_path(prep: Preparation, worker: Worker) -> None:
    """Run the job path's own machinery once on dummy values, while no job is waiting.

    A forked worker shares every page with the zygote until it writes one, and in CPython even
    reading an object writes its reference count: each function, type and module the job path
    touches for the first time costs a copy-on-write fault, and ctypes resolves a C function on
    its first call. Taken now, at idle priority, they leave the call's path. Nothing here
    widens what the worker may do: the Landlock rule repeats one it has, the directory and
    environment are set again by the job.
    """
    max_frame = prep.settings.max_frame
    rehearsal_r, rehearsal_w = os.pipe2(os.O_CLOEXEC)
    try:
        write_frame_bytes(rehearsal_w, encode_job(_REHEARSAL))
        job = read_job(rehearsal_r, max_frame)
    finally:
        os.close(rehearsal_r)
        os.close(rehearsal_w)
    contain.rehearse(prep, worker)
    with contextlib.suppress(OSError):  # a host whose /tmp is a link: the job's own is not
        _enter("/tmp")
    os.chdir("/")
    os.environ["HOME"] = os.environ["TMPDIR"] = "/"
    _context(job)
    with threading.Lock():
        _final_frame(_encoded_result({"ok": True}, max_frame))


def serve_later_jobs(
    plugins: list[ToolPlugin], first: Job, job_fd: int, result_fd: int, max_frame: int
) -> None:
    """A resident worker's life after its first job: each next job of its session, as the
    supervisor sends them, run in this same process (what the tool kept stays), until the
    supervisor closes the job pipe. The layers the first job set up (uid, Landlock, working
    directory) hold for all of them: every job of a resident worker is of one session."""
    settling = False  # a copy, until its first tool job
    while True:
        try:
            job = read_job(job_fd, max_frame)
        except EOFError:
            return
        if job.get("copies"):
            went_on = _copy_turn(job, job_fd, result_fd, max_frame)
            if went_on is None:  # nothing was forked
                continue
            if len(went_on) == 2:  # a copy: the supervisor has its own ends by now
                forks.close_supervisor_ends((went_on[0], went_on[1]))
            # A copy, or this worker going on beside its copies: apart at its next tool job,
            # and its temporary directory its session's from now on.
            first = cast(Job, {**first, "tmp_dir": job["tmp_dir"]})
            settling = True
            continue
        if settling:
            try:
                forks.settle_copy(first["workspace"], first["tmp_dir"])
            except OSError:
                return  # it cannot be kept apart: it ends, and the supervisor says so
            settling = False
        job = cast(Job, {**job, "workspace": first["workspace"], "tmp_dir": first["tmp_dir"]})
        execute_job(plugins[first["plugin"]], job, result_fd, max_frame)


def _copy_turn(
    job: Job, job_fd: int, result_fd: int, max_frame: int
) -> tuple[int, int] | tuple[()] | None:
    """A turn that forks this worker into ``copies`` copies (``sandbox._forks``). In a copy
    it returns what the copy must close at its first job. In this worker it returns None
    where nothing was forked (the failure reported), and ``()`` where it goes on beside its
    copies: only a worker with one thread may (a thread left in its domain could reach
    them); one with more forks one more copy to go on in its place, reports, and never
    returns (it runs no tool again; the supervisor stops it for good or kills it)."""
    why_not = forks.copies_refused()
    if why_not is None:
        goes_on = _one_thread()
        count = int(job.get("copies") or 0) + (0 if goes_on else 1)
        try:
            made = forks.fork_copies(count, job_fd, result_fd)
        except OSError as exc:
            why_not = f"the sandbox could not be copied: {exc}"
        else:
            if isinstance(made, tuple):
                return made
            encoded = _encoded_result({"copies": made, "goes_on": goes_on}, max_frame)
            write_frame_bytes(result_fd, _final_frame(encoded))
            if goes_on:
                return ()
            while True:
                signal.pause()
    write_frame_bytes(result_fd, _final_frame(failure_frame(why_not, retryable=False)))
    return None


def _one_thread() -> bool:
    """Whether this process runs one thread (False where it cannot tell)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _template_for(prep: Preparation, layers: Job, job_fd: int, result_fd: int) -> Template | None:
    """The clean template, forked now that the worker has taken the job's layers and before it
    reads the payload, where the job's plugin asks for one; None where it does not (or a
    resident job), or where it cannot be forked (the tool then says it cannot run what needed
    it). The template closes the job and result pipes first thing."""
    plugin = prep.plugins[layers["plugin"]]
    if not getattr(plugin, "clean_template", False) or layers.get("resident"):
        return None

    def life(channel: int) -> None:
        _template_life(plugin, layers, channel)

    try:
        return Template(*fork_serving(life, (job_fd, result_fd)))
    except OSError:
        return None


def _template_life(plugin: ToolPlugin, layers: Job, channel: int) -> None:
    """In the template: the plugin's ``template_main``, with what a tool of the job sees of it
    but its payload; it dies with the worker."""
    syscalls.prctl(syscalls.PR_SET_PDEATHSIG, signal.SIGKILL)
    forget_case_group()  # the worker's to use: what the template runs must not hold it
    plugin.context = _context(layers)
    # As the worker before its tool: what the zygote made stays frozen, the rest is collected.
    gc.freeze()
    gc.enable()
    plugin.template_main(channel)


def run_worker(prep: Preparation, worker: Worker, job_fd: int, result_fd: int) -> None:
    """Entry point in the forked child. Never returns."""
    # No collection before the job: the objects the zygote made since it froze its heap are
    # shared with us, and collecting them writes to (and copies) their pages.
    gc.disable()
    max_frame = prep.settings.max_frame
    code = 0
    try:
        try:
            worker.while_idle = lambda worker: rehearse_job_path(prep, worker)
            contain.harden(prep, worker)
        except BaseException as exc:
            write_frame(result_fd, setup_error_frame(f"{type(exc).__name__}: {exc}"))
            os._exit(EXIT_SETUP_FAILED)
        try:
            layers = read_layers(job_fd, max_frame)
        except EOFError:
            os._exit(0)  # never used: the supervisor shut down or discarded us
        _take_job(prep, worker, layers)
        template = _template_for(prep, layers, job_fd, result_fd)
        job = job_with_payload(layers, read_payload(job_fd, max_frame))
        if not job.get("resident") and not job.get("input"):
            os.close(job_fd)
        # The tool's own garbage is collected as usual; what exists now is left alone for good.
        gc.freeze()
        gc.enable()
        run_first_job(prep, job, result_fd, template, job_fd)
        if job.get("resident"):
            serve_later_jobs(prep.plugins, job, job_fd, result_fd, max_frame)
    except JobSetupError as exc:
        code = 1
        write_frame(result_fd, setup_error_frame(str(exc)))
    except BaseException:
        code = 1
    finally:
        # Closing first lets the supervisor see the end before the kernel tears down our memory.
        try:
            os.close(result_fd)
        finally:
            os._exit(code)
