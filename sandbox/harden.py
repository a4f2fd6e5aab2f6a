"""The hardening of a freshly forked worker: the worker's half of each layer, in one order.

Each layer's module holds its whole life (what the zygote prepares once, what the worker
applies here, what it applies once the job is known; ``sandbox.layers`` lists them). The order
matters: the empty network namespace is joined before its fd is closed; fds are closed first
of the rest, so that nothing below runs with the zygote's control socket open; the cgroups are
joined next, so that everything after counts; the mount namespace needs the capabilities that
are dropped afterwards; rlimits go before seccomp because seccomp forbids changing them;
seccomp is last, after which the process can only lose privileges.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from a2e_engine.sandbox import (
    capabilities,
    cgroups,
    clean_start,
    landlock,
    mount_template,
    network,
    rlimits,
    seccomp,
)
from a2e_engine.sandbox.forking import leave_idle_priority
from a2e_engine.sandbox.landlock import LandlockPlan, Ruleset
from a2e_engine.sandbox.limits import Limits
from a2e_engine.sandbox.mount_template import MountPlan

__all__ = ["Hardening", "harden_worker"]


@dataclass(frozen=True)
class Hardening:
    """What one worker applies to itself before it reads its job, each layer's part."""

    keep_fds: tuple[int, ...]  # its job and result pipes (and the template, closed once used)
    parent_pid: int  # the zygote's
    network_fd: int | None  # the empty network namespace to join (network)
    cgroups: tuple[str, ...]  # its slots (cgroups)
    mounts: MountPlan | None  # its mount namespace's template (mount_template)
    landlock: LandlockPlan | None
    limits: Limits  # (rlimits)
    cap_address_space: bool  # RLIMIT_AS, or the memory cgroup alone (rlimits)
    change_identity: bool  # keep CAP_SETUID/SETGID until the job names the uid (identity)
    seccomp_bpf: bytes


def harden_worker(
    setup: Hardening, while_idle: Callable[[Ruleset | None], None] | None = None
) -> Ruleset | None:
    """Apply every layer; raise on the first that fails (the caller reports it and exits).

    ``while_idle`` is the worker's own preparation (``rehearse_job_path``): it runs before the
    worker leaves idle priority, so that, like the fork and the layers above it, it only takes
    CPU time no call in flight wants. It runs our code only, before any job exists.

    Returns the Landlock ruleset with its fixed rules in place, for ``landlock.on_job`` to
    complete with the job's directories and enforce (``None`` without Landlock)."""
    network.enter(setup.network_fd)
    clean_start.close_inherited_fds(setup.keep_fds)
    cgroups.join(setup.cgroups)
    clean_start.detach(setup.parent_pid)
    mount_template.enter(setup.mounts)
    ruleset = landlock.begin(setup.landlock)
    # The environment, bounding and ambient sets: cleared by the zygote, inherited.
    rlimits.apply_rlimits(setup.limits, setup.cap_address_space)
    if while_idle is not None:
        while_idle(ruleset)
    leave_idle_priority()  # the last step that needs a capability (see sandbox.forking)
    capabilities.drop(keep_for_identity=setup.change_identity)
    seccomp.install(setup.seccomp_bpf)
    return ruleset
