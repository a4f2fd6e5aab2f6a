"""Where the sandbox's processes spend their CPU, from ``perf``: each CPU sample of the server's
process tree charged to a process role (the server, a zygote, a worker, a program a worker ran)
and to what it was doing (the fork's copy of page tables, copy-on-write and other page faults,
the exit's teardown, a system call, user code), and a worker's samples to the phase of its life
they fall in:

- **hardening**: from its fork until it returns to normal priority (``sched_setscheduler``,
  ``sandbox._forking``), at idle priority, before any job is given;
- **ready**: capabilities and seccomp, until its first ``read`` after that (of the job's frame:
  it waits in it, at no CPU), or the first of its samples after a pause (the wait) where no
  ``read`` was seen;
- **job**: the tool, the frames, the result, until ``exit_group``;
- **exit**: the kernel tearing the process down.

The samples are counted, not timed; the caller scales the shares by each role's CPU that psutil
measured. Needs ``perf`` and root (``perf record -a``); ``available`` says why not.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["KernelProfile", "available", "recorded"]

#: Nanoseconds of CPU between two samples (2,000 a second per CPU). A period, not
#: ``perf record -F``: with a frequency, perf samples the tracepoints too, and most of the
#: marks below would be missed.
PERIOD_NS = 500_000
#: The tracepoints that mark a worker's phases.
MARKS = (
    "syscalls:sys_enter_sched_setscheduler",
    "syscalls:sys_enter_read",
    "syscalls:sys_exit_read",
    "syscalls:sys_enter_exit_group",
)
#: A pause between two samples of a ready worker longer than this is its wait for a job.
WAIT_S = 3 * PERIOD_NS / 1e9
ROLES = ("server", "zygote", "worker", "program")
PHASES = ("hardening", "ready", "job", "exit")

_FORK = re.compile(r"PERF_RECORD_FORK\((\d+):(\d+)\):\((\d+):(\d+)\)")
_HEAD = re.compile(r"^\s*(\d+)/(\d+)\s+([\d.]+):\s+(\S+):(?:\s|$)")
_SYSCALL = re.compile(r"__(?:x64|do)_sys_(\w+)")


def available() -> str:
    """``""`` if ``perf`` can record every CPU here; else why not."""
    if shutil.which("perf") is None:
        return "perf is not installed"
    if os.geteuid() != 0:
        return "perf record -a needs root"
    return ""


@dataclass
class KernelProfile:
    """Samples by (role, what) and a worker's by phase."""

    by_role: collections.Counter[str] = field(default_factory=collections.Counter)
    by_what: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    by_phase: collections.Counter[str] = field(default_factory=collections.Counter)

    def shares(self, role: str) -> dict[str, float]:
        """What ``role``'s samples were doing, as fractions, largest first."""
        total = self.by_role[role] or 1
        found = [(what, n / total) for (r, what), n in self.by_what.items() if r == role]
        return dict(sorted(found, key=lambda item: -item[1]))

    def phase_shares(self) -> dict[str, float]:
        total = sum(self.by_phase.values()) or 1
        return {phase: self.by_phase[phase] / total for phase in PHASES}


@contextlib.contextmanager
def recorded(root: int, scratch: str) -> Iterator[KernelProfile]:
    """Records every CPU while the block runs; the profile of ``root``'s tree is filled in
    when it ends. The recording is enabled, and acknowledged, before the block starts: perf
    takes a while to set its events up."""
    data = os.path.join(scratch, "perf.data")
    control, ack = os.path.join(scratch, "perf.control"), os.path.join(scratch, "perf.ack")
    for fifo in (control, ack):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(fifo)
        os.mkfifo(fifo, 0o600)
    marks = [arg for mark in MARKS for arg in ("-e", mark)]
    command = [
        "perf", "record", "-a", "-g", "-e", f"cpu-clock/period={PERIOD_NS}/", *marks,
        "-D", "-1", "--control", f"fifo:{control},{ack}", "-o", data,
    ]  # fmt: skip
    recorder = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    profile = KernelProfile()
    try:
        with _Controls(recorder, control, ack) as controls:
            controls.send("enable")
            yield profile
            controls.send("disable")
    finally:
        recorder.send_signal(signal.SIGINT)
        _, said = recorder.communicate(timeout=60)
    if recorder.returncode not in (0, -signal.SIGINT):
        raise RuntimeError(f"perf record failed: {said.decode(errors='replace').strip()[-300:]}")
    script = subprocess.run(
        ["perf", "script", "-i", data, "--show-task-events", "-F", "pid,tid,time,event,ip,sym"],
        capture_output=True,
        text=True,
        check=False,
    )
    if script.returncode != 0:
        raise RuntimeError(f"perf script failed: {script.stderr.strip()[-300:]}")
    _read(script.stdout, root, profile)


#: How long perf has to open its control FIFO, and to acknowledge a command.
CONTROL_TIMEOUT_S = 30


class _Controls:
    """``perf record --control``'s two FIFOs: a command written, its ``ack`` awaited."""

    def __init__(self, recorder: subprocess.Popen[bytes], control: str, ack: str) -> None:
        self.recorder, self.control_path, self.ack_path = recorder, control, ack
        self.control = self.ack = -1

    def __enter__(self) -> _Controls:
        self.ack = os.open(self.ack_path, os.O_RDONLY | os.O_NONBLOCK)
        deadline = time.monotonic() + CONTROL_TIMEOUT_S
        while self.control < 0:
            try:
                self.control = os.open(self.control_path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:  # ENXIO: perf has not opened it yet
                if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                    raise RuntimeError(f"perf record did not start: {exc}") from None
                if self.recorder.poll() is not None:
                    raise RuntimeError("perf record ended as it started") from None
                time.sleep(0.02)
        return self

    def send(self, command: str) -> None:
        os.write(self.control, f"{command}\n".encode())
        ready, _, _ = select.select([self.ack], [], [], CONTROL_TIMEOUT_S)
        if not ready or not os.read(self.ack, 64).startswith(b"ack"):
            raise RuntimeError(f"perf record did not acknowledge {command!r}")

    def __exit__(self, *exc_info: object) -> None:
        for fd in (self.control, self.ack):
            if fd >= 0:
                os.close(fd)


@dataclass
class _Life:
    parent: int
    normal_at: float | None = None  # back to normal priority
    job_at: float | None = None  # it waits for its job's frame
    exit_at: float | None = None


def _read(text: str, root: int, profile: KernelProfile) -> None:
    lives: dict[int, _Life] = {}
    samples: list[tuple[int, float, list[str]]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        fork = _FORK.search(line)
        if fork:
            pid, tid, ppid, _ = (int(n) for n in fork.groups())
            if pid == tid and pid not in lives:
                lives[pid] = _Life(ppid)
            current = None
            continue
        head = _HEAD.match(line)
        if head:
            pid, when, event = int(head.group(1)), float(head.group(3)), head.group(4)
            current = None
            life = lives.get(pid)
            if event.startswith("cpu-clock"):
                current = []
                samples.append((pid, when, current))
            elif life is not None:
                _mark(life, event, when)
            continue
        if current is not None and line.strip():
            parts = line.split(None, 1)
            current.append(parts[1].strip() if len(parts) > 1 else "")
    last_seen: dict[int, float] = {}
    for pid, when, _ in samples:
        life = lives.get(pid)
        if life is not None and _ready_for_job(life, when, last_seen.get(pid, when)):
            life.job_at = when
        last_seen[pid] = when
    for pid, when, stack in samples:
        role = _role(pid, root, lives)
        if role is None:
            continue
        what = _what(stack)
        profile.by_role[role] += 1
        profile.by_what[(role, what)] += 1
        if role == "worker":
            profile.by_phase[_phase(lives[pid], when, what)] += 1


def _ready_for_job(life: _Life, when: float, seen_before: float) -> bool:
    """Whether a sample at ``when`` is a ready worker's first after its wait for a job."""
    if life.normal_at is None or life.job_at is not None:
        return False
    return when > life.normal_at and when - seen_before > WAIT_S


def _mark(life: _Life, event: str, when: float) -> None:
    if event.endswith("sched_setscheduler") and life.normal_at is None:
        life.normal_at = when
    elif "_read" in event and life.normal_at is not None and life.job_at is None:
        life.job_at = when
    elif event.endswith("exit_group") and life.exit_at is None:
        life.exit_at = when


def _role(pid: int, root: int, lives: dict[int, _Life]) -> str | None:
    """The role of ``pid`` by its depth beneath ``root``; a process forked before the recording
    began is known only if it is ``root`` or a child of it (a zygote)."""
    depth = 0
    while pid != root:
        life = lives.get(pid)
        if life is None:
            return None
        pid, depth = life.parent, depth + 1
        if depth >= len(ROLES):
            return None
    return ROLES[depth]


def _phase(life: _Life, when: float, what: str) -> str:
    if what.startswith("exit") or (life.exit_at is not None and when >= life.exit_at):
        return "exit"
    if life.job_at is not None and when >= life.job_at:
        return "job"
    if life.normal_at is not None and when >= life.normal_at:
        return "ready"
    return "hardening"


def _what(stack: list[str]) -> str:
    joined = " ".join(stack)
    if "do_exit" in joined:
        return "exit: teardown" if "exit_mmap" in joined else "exit: other"
    if "copy_page_range" in joined or "dup_mm" in joined or "copy_process" in joined:
        return "fork: copying page tables"
    if "do_wp_page" in joined or "wp_page_copy" in joined:
        return "copy-on-write faults"
    if "exc_page_fault" in joined:
        return "other page faults"
    if "do_syscall_64" in joined:
        called = _SYSCALL.search(joined)
        return f"syscall: {called.group(1) if called else 'other'}"
    if any(symbol.startswith(("asm_", "irq", "__sysvec")) for symbol in stack):
        return "interrupts"
    return "user code"
