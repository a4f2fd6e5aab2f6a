"""The layers, in the one order every step of theirs runs in: ``prepare`` in the zygote;
``spawning`` and ``before_fork`` in the zygote for each worker, ``after_fork`` in the reverse
order once it is forked; ``apply`` in each forked worker (and ``rehearse`` while it waits),
``on_job`` in the worker once its job is known; ``reaped`` in the zygote when a worker is
gone, ``stop`` when the zygote ends (the steps are ``sandbox._preparation.Layer``'s; what each
layer stops is in ``sandbox.layers``). The zygote does nothing for a worker's isolation by
hand: it calls these.

Why this order:

- the user namespace is the zygote's first (``userns.enter`` runs before the zygote exists);
  the subreaper catches orphans from the first fork on, a plugin's preload's included;
- the plugins' preload (``plugin_code``, no isolation layer) comes before the probes that
  fork and before ``forking`` counts the zygote's threads; the code paths it works out are
  read by ``identity``, the mount template and Landlock;
- a worker joins the empty network namespace before ``clean_start`` closes the fd that holds
  it; ``clean_start`` closes every other fd, and detaches the worker from the zygote (its own
  session, a death signal), before anything else runs;
- the cgroups are joined next, so that everything after counts against the worker's slots;
- the PID namespace is probed before ``identity`` (whose way to the interpreter needs a mount
  namespace) and both before the mount template, which opens that way and, failing, takes
  both back;
- Landlock's plan reads the mount template's (a private ``/tmp``, the run layer) and
  ``identity``'s (may a call list ``/``); on a job, ``identity`` becomes the session's uid
  before Landlock adds the workspace, which root without capabilities could not open;
- rlimits before seccomp, which refuses to raise them; the worker's own preparation and its
  return from idle priority (``forking``) are the last steps that need a capability;
- capabilities are dropped then (``CAP_SETUID``/``CAP_SETGID`` kept for ``identity``'s job
  step), and seccomp comes last, after which the process can only lose privileges.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Collection

from a2e_engine.sandbox import (
    _capabilities as capabilities,
)
from a2e_engine.sandbox import (
    _cgroups as cgroups,
)
from a2e_engine.sandbox import (
    _clean_start as clean_start,
)
from a2e_engine.sandbox import (
    _forking as forking,
)
from a2e_engine.sandbox import (
    _identity as identity,
)
from a2e_engine.sandbox import (
    _landlock as landlock,
)
from a2e_engine.sandbox import (
    _mount_template as mount_template,
)
from a2e_engine.sandbox import (
    _namespaces as namespaces,
)
from a2e_engine.sandbox import (
    _network as network,
)
from a2e_engine.sandbox import (
    _plugin_code as plugin_code,
)
from a2e_engine.sandbox import (
    _rlimits as rlimits,
)
from a2e_engine.sandbox import (
    _seccomp as seccomp,
)
from a2e_engine.sandbox import (
    _subreaper as subreaper,
)
from a2e_engine.sandbox import (
    _userns as userns,
)
from a2e_engine.sandbox._messages import Job
from a2e_engine.sandbox._preparation import Layer, Preparation, Worker

__all__ = [
    "LAYERS",
    "fork",
    "harden",
    "on_job",
    "prepare",
    "reaped",
    "rehearse",
    "spawning",
    "stop",
]

LAYERS: tuple[Layer, ...] = (
    userns.LAYER,
    subreaper.LAYER,
    plugin_code.LAYER,
    network.LAYER,
    clean_start.LAYER,
    cgroups.LAYER,
    namespaces.LAYER,
    identity.LAYER,
    mount_template.LAYER,
    landlock.LAYER,
    rlimits.LAYER,
    forking.LAYER,
    capabilities.LAYER,
    seccomp.LAYER,
)


def _with(step: str) -> tuple[Layer, ...]:
    return tuple(
        layer for layer in LAYERS if getattr(type(layer), step) is not getattr(Layer, step)
    )


#: The layers with a step of each kind: only those are called (each object a fresh fork
#: touches copies a page of the zygote's, and ``on_job`` is on the call's path).
_APPLYING = _with("apply")
_ON_JOB = _with("on_job")
_REHEARSING = _with("rehearse")
_SPAWNING = _with("spawning")
_FORKING = _with("before_fork")
_REAPED = _with("reaped")
_STOPPING = _with("stop")


def prepare(prep: Preparation) -> None:
    """The zygote's half of every layer; each reports its layers."""
    for layer in LAYERS:
        layer.prepare(prep)


def harden(prep: Preparation, worker: Worker) -> None:
    """A freshly forked worker's half of every layer; raises on the first that fails (the
    worker reports it and exits)."""
    for layer in _APPLYING:
        layer.apply(prep, worker)


def on_job(prep: Preparation, worker: Worker, job: Job) -> None:
    """What each layer needs the job for, before any tool code runs."""
    for layer in _ON_JOB:
        layer.on_job(prep, worker, job)


def rehearse(prep: Preparation, worker: Worker) -> None:
    """What each layer's ``on_job`` will call first, called once on what the worker already
    may do, while it waits."""
    for layer in _REHEARSING:
        layer.rehearse(prep, worker)


def spawning(prep: Preparation, worker: Worker, alive: Collection[int]) -> None:
    """What each layer gives ``worker`` before it is forked. On ``OSError`` the layers that
    gave it something, the one that refused included, take it back (their ``reaped``;
    ``alive``: the workers that are), and the error goes on."""
    for done, layer in enumerate(_SPAWNING):
        try:
            layer.spawning(prep, worker)
        except OSError:
            for given in _SPAWNING[: done + 1]:
                given.reaped(prep, worker, alive)
            raise


def fork(prep: Preparation, fork_now: Callable[[], int]) -> int:
    """``fork_now`` between the layers' ``before_fork`` and, in this process only, their
    ``after_fork``: in the reverse order, for each layer whose ``before_fork`` ran, each one
    whatever the others did (a zygote left in a worker's PID namespace could fork no more).
    A child whose fork could not be undone around it is killed before the error goes on."""
    pid = -1
    try:
        with contextlib.ExitStack() as undo:
            for layer in _FORKING:
                layer.before_fork(prep)
                undo.callback(layer.after_fork, prep)
            pid = fork_now()
            if pid == 0:
                undo.pop_all()  # the worker goes on to ``harden``
    except BaseException:
        if pid > 0:
            with contextlib.suppress(ProcessLookupError, ChildProcessError):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        raise
    return pid


def reaped(prep: Preparation, worker: Worker, alive: Collection[int]) -> None:
    """``worker`` and its tree are gone: what the layers held for it is given back."""
    for layer in _REAPED:
        layer.reaped(prep, worker, alive)


def stop(prep: Preparation, alive: Collection[int]) -> None:
    """The zygote ends (or never got ready): what the layers made in the host is undone."""
    for layer in _STOPPING:
        layer.stop(prep, alive)
