"""What the layers share: the ``Layer`` steps each one implements, the zygote's ``Preparation``
that they fill, and the ``Worker`` each of them hardens.

``sandbox._contain.LAYERS`` runs every layer's steps, in its one order: ``prepare`` in the zygote
once (probe what the host allows, prepare what every worker will use, report the layer under
its names, active or why not: what ``a2e doctor`` and ``EngineConfig.require`` read); for each
worker, in the zygote, ``spawning`` (what it will be given) and ``before_fork``, then
``after_fork`` in the reverse order; ``apply`` in the forked worker before it reads its job
(and ``rehearse`` while it waits), ``on_job`` once the job is known; ``reaped`` in the zygote
once the worker is gone, and ``stop`` when the zygote ends. A layer keeps what it prepared in
its own field of the ``Preparation`` (named after its module below): the
zygote forks workers as copies of itself, so each worker finds it there.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack

from a2e_engine.sandbox._settings import ZygoteSettings
from a2e_engine.sandbox.layers import Facts, LayerReports

if TYPE_CHECKING:
    from a2e_engine.sandbox._cgroups import Slot, SlotGroups
    from a2e_engine.sandbox._forking import ForkPlan
    from a2e_engine.sandbox._identity import Crossing
    from a2e_engine.sandbox._landlock import LandlockPlan, Ruleset
    from a2e_engine.sandbox._messages import Job
    from a2e_engine.sandbox._mount_template import MountPlan
    from a2e_engine.sandbox._namespaces import PidNamespaces

__all__ = ["Layer", "Preparation", "Worker"]


@dataclass
class Preparation:
    settings: ZygoteSettings
    #: Why the zygote runs without a user namespace of its own ("": it runs in one).
    userns_reason: str = "running as root: not needed"
    #: The plugins the zygote serves, loaded (``landlock`` hands them their own directories).
    plugins: list[Any] = field(default_factory=list)
    #: What a worker may need to import from: the Python installation, our packages and the
    #: plugins' (``landlock.readable_code_paths``).
    code_paths: tuple[str, ...] = ()
    layers: LayerReports = field(default_factory=LayerReports)

    # What each layer prepared, by its module.
    in_user_namespace: bool = False  # userns
    empty_net_fd: int | None = None  # network: the namespace workers without sockets join
    cgroups: dict[str, SlotGroups] = field(default_factory=dict)  # cgroups, by controller
    pidns: PidNamespaces | None = None  # namespaces
    no_pidns: str = ""  # namespaces: why there is none (the mount template's layers go with it)
    identity_ways: tuple[Crossing, ...] = ()  # identity: the closed directories to open
    change_identity: bool = False  # identity: calls run as their session's uid
    mounts: MountPlan | None = None  # mount_template
    #: The layers that go off when the mount template cannot be made (``Layer.withdraw``).
    need_mounts: list[Layer] = field(default_factory=list)
    landlock: LandlockPlan | None = None  # landlock
    address_space_capped: dict[str, bool] = field(default_factory=dict)  # rlimits, by profile
    forking: ForkPlan | None = None  # forking
    filters: dict[str, bytes] = field(default_factory=dict)  # seccomp: BPF by profile

    def report(self, layer: str, why_not: str | None, **facts: Unpack[Facts]) -> None:
        self.layers[layer] = {"active": why_not is None, "reason": why_not or "", **facts}


@dataclass
class Worker:
    """One forked worker, as its layers see it: what the zygote gave it, and what its layers
    leave for the steps after them."""

    profile: str  # its tools' profile (sandbox._profiles)
    keep_fds: tuple[int, ...]  # its job and result pipes (and the template, closed once used)
    parent_pid: int  # the zygote's
    slots: dict[str, Slot] = field(default_factory=dict)  # cgroups: its group per controller
    oom: bool = False  # cgroups, once it is reaped: the OOM killer struck in one of its slots
    #: The worker's own preparation (``worker.rehearse_job_path``), run at idle priority
    #: before it leaves it (forking), when the fork and the layers before it ran there too.
    while_idle: Callable[[Worker], None] | None = None
    ruleset: Ruleset | None = None  # landlock's, begun, for its ``on_job`` to complete


class Layer:
    """One layer's steps (each a no-op unless the layer has one), in ``contain.LAYERS``'s
    order. A step raises to refuse: in the zygote that is fatal (no worker without its
    layers), in a worker it is the worker's setup error."""

    def prepare(self, prep: Preparation) -> None:
        """In the zygote, once, after the layers before it."""

    def apply(self, prep: Preparation, worker: Worker) -> None:
        """In the freshly forked worker, before it reads its job."""

    def on_job(self, prep: Preparation, worker: Worker, job: Job) -> None:
        """In the worker, once its job is known, before any tool code runs."""

    def rehearse(self, prep: Preparation, worker: Worker) -> None:
        """In the worker while it waits for a job (``worker.rehearse_job_path``): its
        ``on_job``'s first calls, on what the worker already may do, so that their first-call
        costs (a C function resolved, the pages they touch copied) are behind it. Nothing here
        may widen what the worker may do."""

    def spawning(self, prep: Preparation, worker: Worker) -> None:
        """In the zygote, before ``worker`` is forked: what it will be given. ``OSError``
        refuses the worker: this layer and those before it take back what they gave with
        ``reaped``."""

    def before_fork(self, prep: Preparation) -> None:
        """In the zygote, right before a worker is forked. A layer with this step has
        ``after_fork`` too: it is called whenever this one ran."""

    def after_fork(self, prep: Preparation) -> None:
        """In the zygote, right after a worker was forked or failed to be (not in the worker;
        in the reverse order)."""

    def reaped(self, prep: Preparation, worker: Worker, alive: Collection[int]) -> None:
        """In the zygote, once ``worker`` and its whole tree are gone, or when it could not
        be forked after all; ``alive``: the workers that are."""

    def stop(self, prep: Preparation, alive: Collection[int]) -> None:
        """In the zygote as it ends, once every worker is gone (``alive``: the pids that were
        its workers), or when its preparation failed: what it made in the host, undone."""

    def withdraw(self, prep: Preparation, why: str) -> None:
        """In the zygote: a later layer this one relies on could not be had after all (it
        listed itself in ``prep.need_mounts``); off, reported why."""
