"""What each isolation layer costs per worker, measured side by side in one process.

    python -m a2e_engine.benchmarks.layer_costs [--workers N]

Each row forks N children from this process; a child applies the layers of its row (each row
adds one layer to the previous) and exits. The cost of a layer is its row minus the previous
row. All of these are paid while a worker is pre-forked, off the call's path, except where the
table says "on path". Must run as root (namespaces, cgroups); rows that cannot run here say why.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable

import a2e
from a2e_engine import sandbox, tools
from a2e_engine.sandbox import _landlock as landlock
from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox._cgroups import SlotGroups, join_cgroup, remove_cgroup_tree
from a2e_engine.sandbox._clean_start import (
    close_inherited_fds,
    scrub_environment,
    zero_initial_environ,
)
from a2e_engine.sandbox._identity import become, closed_ancestors
from a2e_engine.sandbox._limits import Limits
from a2e_engine.sandbox._mount_template import (
    create_mount_template,
    enter_copy_of_template,
    mount_private_tmp,
    tmp_binds,
)
from a2e_engine.sandbox._namespaces import PidNamespaces
from a2e_engine.sandbox._probe import namespace_made_in_child
from a2e_engine.sandbox._profiles import PROFILES
from a2e_engine.sandbox._quota import mount_session_quota, share_state_dir, unmount
from a2e_engine.sandbox._rlimits import apply_rlimits
from a2e_engine.sandbox._seccomp import compile_profile
from a2e_engine.sandbox._settings import DEFAULT_UID_RANGE

Step = Callable[[], None]


def time_forks(
    steps: list[Step], workers: int, before_fork: Step | None = None, after_fork: Step | None = None
) -> float:
    """Milliseconds per fork + the steps in the child + exit + reap."""
    started = time.perf_counter()
    for _ in range(workers):
        if before_fork:
            before_fork()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                for step in steps:
                    step()
            except BaseException as exc:
                with open(os.path.join(tempfile.gettempdir(), "a2e-layer-error.txt"), "w") as fh:
                    fh.write(repr(exc))  # stderr is /dev/null by then
                code = 1
            os._exit(code)
        if after_fork:
            after_fork()
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError("a layer failed in the child; see a2e-layer-error.txt in tmp")
    return (time.perf_counter() - started) / workers * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=100, help="forks per row and round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    state_dir = tempfile.mkdtemp(prefix="a2e-bench-")
    os.chmod(state_dir, 0o711)
    share_state_dir(state_dir)  # as the engine does for session quotas
    bpf = compile_profile(PROFILES["compute"])
    syscalls.prepare_seccomp_bpf(bpf)
    # As the zygote does once for all its workers (this process is never used for more).
    zero_initial_environ()
    scrub_environment()
    syscalls.empty_inherited_capability_sets()
    pidns = PidNamespaces.open()
    net_fd = namespace_made_in_child("net", lambda: syscalls.unshare(syscalls.CLONE_NEWNET))
    abi = landlock.abi_version()
    read_paths = (
        *landlock.SYSTEM_READ_PATHS,
        *landlock.readable_code_paths([a2e, sandbox, tools, sys.modules[__name__]]),
    )
    crossings = closed_ancestors([*read_paths, state_dir])
    started = time.perf_counter()
    template_fd = create_mount_template((state_dir,), crossings, (state_dir,))
    template_ms = (time.perf_counter() - started) * 1000
    uid = DEFAULT_UID_RANGE[0]
    slots: dict[str, str] = {}
    all_groups: list[SlotGroups] = []
    for controller, settings in (("pids", {"pids.max": "512"}), ("memory", {})):
        try:
            groups = SlotGroups.create(controller, {}, settings)
        except OSError as exc:
            print(f"(no {controller} cgroup row: {exc})")
            continue
        all_groups.append(groups)
        slots[controller] = groups.take_slot().path

    def join(controller: str) -> list[Step]:
        return [lambda: join_cgroup(slots[controller])] if controller in slots else []

    def landlock_fixed() -> None:
        ruleset = landlock.Ruleset(abi)
        ruleset.allow_read(read_paths)
        ruleset.allow_devices(("/dev",))
        ruleset.allow_write((state_dir,))
        ruleset.restrict()

    def join_net() -> None:
        syscalls.setns(net_fd, syscalls.CLONE_NEWNET)

    # (row, steps it adds, in a fresh PID namespace): the order of sandbox._contain.LAYERS.
    rows: list[tuple[str, list[Step], bool]] = [
        ("fork + exit + reap (the floor)", [], False),
        ("+ join the empty network namespace", [join_net], False),
        ("+ close fds, stdio on /dev/null", [lambda: close_inherited_fds((template_fd,))], False),
        ("+ join a pids cgroup slot", join("pids"), False),
        ("+ join a memory cgroup slot", join("memory"), False),
        ("+ PID namespace (pid 1)", [], True),
        (
            "+ own copy of the mount template, IPC namespace, /proc",
            [lambda: enter_copy_of_template(template_fd)],
            True,
        ),
        ("+ private /tmp", [lambda: mount_private_tmp(64, tmp_binds((state_dir,)))], True),
        ("+ rlimits", [lambda: apply_rlimits(Limits())], True),
        (
            "+ drop capabilities (but CAP_SETUID/GID)",
            [lambda: syscalls.keep_only_capabilities((syscalls.CAP_SETUID, syscalls.CAP_SETGID))],
            True,
        ),
        (
            "+ seccomp (install the precompiled BPF)",
            [lambda: syscalls.install_seccomp_bpf(bpf)],
            True,
        ),
        ("+ Landlock (~0.2 ms of it on the call's path)", [landlock_fixed] if abi else [], True),
        ("+ become the session's uid (on the call's path)", [lambda: become(uid, uid)], True),
    ]
    if not abi:
        print("(no Landlock here: its row adds nothing)")
    print(f"{'layers (cumulative)':56} {'ms/worker':>10} {'+ms':>7}")
    # Cumulative steps per row; rounds interleave the rows so that drift hits them all alike,
    # and the best round of each row is kept.
    plans: list[tuple[str, list[Step], bool]] = []
    steps: list[Step] = []
    for name, new_steps, in_pidns in rows:
        steps = steps + new_steps
        plans.append((name, steps, in_pidns))
    best = [float("inf")] * len(plans)
    try:
        for _ in range(args.rounds):
            for index, (_, row_steps, in_pidns) in enumerate(plans):
                hooks = (
                    (pidns.before_fork, pidns.after_fork_in_parent) if in_pidns else (None, None)
                )
                best[index] = min(best[index], time_forks(row_steps, args.workers, *hooks))
        previous = None
        for (name, _, _), cost in zip(plans, best, strict=True):
            delta = "" if previous is None else f"{cost - previous:+7.3f}"
            print(f"{name:56} {cost:10.3f} {delta:>7}")
            previous = cost
        print(
            f"\nonce per zygote: {template_ms:.3f} ms to build the mount template (private "
            "propagation, minimal /dev, the way to the interpreter, read-only tree)"
        )
        print(
            f"per session, by the supervisor: {quota_mount_ms(state_dir):.3f} ms to mount and "
            "unmount its quota tmpfs"
        )
    finally:
        os.close(template_fd)
        for groups in all_groups:
            remove_cgroup_tree(groups.path)
        unmount(state_dir)
        os.rmdir(state_dir)


def quota_mount_ms(state_dir: str, sessions: int = 200) -> float:
    path = os.path.join(state_dir, "session")
    os.mkdir(path)
    started = time.perf_counter()
    for _ in range(sessions):
        mount_session_quota(path, 1024)
        unmount(path)
    elapsed = (time.perf_counter() - started) / sessions * 1000
    os.rmdir(path)
    return elapsed


if __name__ == "__main__":
    main()
