"""What this machine allows any design that runs each call in a fresh Python process: the costs
no engine code can remove, measured with bare Python, without isolation or protocol.

    python -m a2e_engine.benchmarks.bounds [--forks 200] [--calls 200] [--json FILE]

* **fork and exit**: the CPU of one ``os.fork`` in the parent (it copies the page tables) and of
  the child's exit (it tears them down), from this small process and again with more memory
  held, whence the cost of each MiB a zygote holds;
* **copy-on-write**: the CPU of a child's first write to a page it shares with its parent. A
  forked Python child writes hundreds of pages before it runs any code of its own (reference
  counts are writes);
* **pre-forked round trip**: the latency of one call to a child forked and warmed *before* the
  call, asked through one pipe from the calling thread and answering through another. That is
  the least a pre-forked design in Python can offer, before any thread hop, protocol or layer.

On virtual machines whose page tables the hypervisor shadows in software, the first two cost
many times what they cost on bare metal, and they dominate the CPU of a call. The last one is
dominated by waking an idle virtual CPU. ``a2e bench`` measures ratios; these figures say where
its floor and its latency targets stand on the machine at hand.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import resource
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = ["Bounds", "measure_bounds"]

PAGE = mmap.PAGESIZE
#: Memory a typical engine zygote holds beyond a bare interpreter (its anonymous memory is ~22
#: MiB where a bare interpreter's is ~7 MiB).
EXTRA_MIB = 16
#: Shared pages an engine worker writes in its life (503 counted through ``/proc/<pid>/pagemap``
#: in one that had hardened itself and was waiting for its job).
COW_PAGES = 500


@dataclass(frozen=True)
class Bounds:
    own_mib: float  # anonymous memory of this process when it forks without extra memory
    fork_ms: float  # parent CPU per fork
    exit_ms: float  # child CPU per life (nothing but exit)
    fork_ms_per_mib: float
    exit_ms_per_mib: float
    cow_fault_us: float  # child CPU per page it writes that it shares with its parent
    prefork_idle_ms: float  # median round trip, sent 20 ms after the child is ready
    prefork_hot_ms: float  # the same, sent the moment the child is ready (no CPU idles)
    cpus: int

    def fork_call_cpu_ms(self, mib: float, cow_pages: int) -> float:
        """The least CPU a call costs that forks a process holding ``mib`` MiB more than a bare
        interpreter and writes ``cow_pages`` shared pages before it exits."""
        per_mib = self.fork_ms_per_mib + self.exit_ms_per_mib
        return self.fork_ms + self.exit_ms + mib * per_mib + cow_pages * self.cow_fault_us / 1000


def _cpu_s(usage: resource.struct_rusage) -> float:
    return usage.ru_utime + usage.ru_stime


def _anonymous_mib() -> float:
    with open("/proc/self/smaps_rollup") as fh:
        for line in fh:
            if line.startswith("Anonymous:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _touched(mib: int) -> mmap.mmap:
    """``mib`` MiB of private memory, every page written (present, as a zygote's heap is)."""
    buf = mmap.mmap(-1, max(mib, 1) << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for offset in range(0, len(buf), PAGE):
        buf[offset] = 1
    return buf


def _fork_and_reap(forks: int, in_child: Callable[[], None]) -> tuple[float, float]:
    """(parent CPU s per fork, child CPU s per life) over ``forks`` children."""
    parent = child = 0.0
    for _ in range(forks):
        before = resource.getrusage(resource.RUSAGE_SELF)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            code = 0
            try:
                in_child()
            except BaseException:
                code = 1
            os._exit(code)
        after = resource.getrusage(resource.RUSAGE_SELF)
        parent += _cpu_s(after) - _cpu_s(before)
        _, status, usage = os.wait4(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("a measuring child failed")
        child += _cpu_s(usage)
    return parent / forks, child / forks


def fork_exit_costs(forks: int, extra_mib: int = EXTRA_MIB) -> dict[str, float]:
    """Fork and exit CPU from this process as it is, and with ``extra_mib`` MiB more held."""
    own = _anonymous_mib()
    fork_s, exit_s = _fork_and_reap(forks, lambda: None)
    held = _touched(extra_mib)
    try:
        fork_big, exit_big = _fork_and_reap(forks, lambda: None)
    finally:
        held.close()
    return {
        "own_mib": own,
        "fork_ms": fork_s * 1000,
        "exit_ms": exit_s * 1000,
        "fork_ms_per_mib": max(0.0, fork_big - fork_s) * 1000 / extra_mib,
        "exit_ms_per_mib": max(0.0, exit_big - exit_s) * 1000 / extra_mib,
    }


def cow_fault_us(forks: int, pages: int = COW_PAGES) -> float:
    """Child CPU per shared page written: children writing ``pages`` pages against children
    writing none, from the same parent."""
    shared = _touched((pages * 2 * PAGE >> 20) + 1)
    stride = 2 * PAGE  # every other page: no two writes land on one page

    def write_pages() -> None:
        for index in range(pages):
            shared[index * stride] = 2

    try:
        _, idle = _fork_and_reap(forks, lambda: None)
        _, writing = _fork_and_reap(forks, write_pages)
    finally:
        shared.close()
    return max(0.0, writing - idle) / pages * 1e6


def _answer_one_job(job_r: int, result_w: int) -> None:  # pragma: no cover - in the child
    """A pre-forked child: warm the path once, then serve exactly one job and exit."""
    warm = json.dumps({"tool": "noop", "arguments": {"warm": True}})
    json.loads(json.dumps({"ok": True, "data": json.loads(warm)["arguments"]}))
    os.write(result_w, b"r")  # ready: warm, about to wait
    data = os.read(job_r, 65536)
    if not data:
        os._exit(0)
    job = json.loads(data)
    os.write(result_w, json.dumps({"ok": True, "data": job["arguments"]}).encode())
    os._exit(0)


def _prefork() -> tuple[int, int, int]:
    job_r, job_w = os.pipe()
    result_r, result_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        os.close(job_w)
        os.close(result_r)
        _answer_one_job(job_r, result_w)
    os.close(job_r)
    os.close(result_w)
    return pid, job_w, result_r


def prefork_round_trip_ms(calls: int, gap_s: float) -> float:
    """Median latency of a call to a warm pre-forked child, ``gap_s`` after it said it is ready
    (the fork and the warm-up are outside the measured time, as a pool does them ahead)."""
    latencies = []
    for index in range(calls):
        pid, job_w, result_r = _prefork()
        try:
            if os.read(result_r, 1) != b"r":
                raise RuntimeError("the pre-forked child died before it was ready")
            time.sleep(gap_s)
            started = time.perf_counter()
            os.write(job_w, json.dumps({"tool": "noop", "arguments": {"n": index}}).encode())
            reply = json.loads(os.read(result_r, 65536) or b"null")
            latencies.append(time.perf_counter() - started)
        finally:
            os.close(job_w)  # a child still waiting reads EOF and exits
            os.close(result_r)
            os.waitpid(pid, 0)
        if reply != {"ok": True, "data": {"n": index}}:
            raise RuntimeError(f"the pre-forked child answered {reply!r}")
    return statistics.median(latencies) * 1000


def measure_bounds(forks: int = 200, calls: int = 200) -> Bounds:
    costs = fork_exit_costs(forks)
    return Bounds(
        own_mib=costs["own_mib"],
        fork_ms=costs["fork_ms"],
        exit_ms=costs["exit_ms"],
        fork_ms_per_mib=costs["fork_ms_per_mib"],
        exit_ms_per_mib=costs["exit_ms_per_mib"],
        cow_fault_us=cow_fault_us(forks),
        prefork_idle_ms=prefork_round_trip_ms(calls, gap_s=0.02),
        prefork_hot_ms=prefork_round_trip_ms(calls, gap_s=0.0),
        cpus=len(os.sched_getaffinity(0)),
    )


def report(bounds: Bounds) -> str:
    call_ms = bounds.fork_call_cpu_ms(EXTRA_MIB, COW_PAGES)
    return "\n".join(
        [
            "what this machine allows a fresh Python process per call (bare Python, no isolation)",
            f"  fork of this {bounds.own_mib:.0f} MiB process: {bounds.fork_ms:.3f} ms of CPU in "
            f"the parent, {bounds.exit_ms:.3f} ms in the child to exit",
            f"  each MiB more the parent holds: +{bounds.fork_ms_per_mib:.3f} ms to fork, "
            f"+{bounds.exit_ms_per_mib:.3f} ms to exit",
            f"  a child's first write to a shared page: {bounds.cow_fault_us:.1f} us",
            f"  a call to a warm pre-forked child, one pipe each way, from the calling thread: "
            f"median {bounds.prefork_idle_ms:.3f} ms at idle, {bounds.prefork_hot_ms:.3f} ms "
            "the moment it is ready",
            f"  => a process {EXTRA_MIB} MiB larger, forked per call and writing {COW_PAGES} "
            f"shared pages, costs at least {call_ms:.2f} ms of CPU per call: at most "
            f"{bounds.cpus * 1000 / call_ms:.0f} calls/s on {bounds.cpus} CPU(s)",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=200, help="children per fork figure")
    parser.add_argument("--calls", type=int, default=200, help="calls per round-trip figure")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    if args.forks < 1 or args.calls < 1:
        parser.error("--forks and --calls must be at least 1")
    bounds = measure_bounds(args.forks, args.calls)
    print(report(bounds))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(asdict(bounds), fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
