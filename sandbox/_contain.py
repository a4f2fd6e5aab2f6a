"""The layers, in the one order every step of theirs runs in: ``prepare`` in the zygote,
``apply`` in each forked worker, ``on_job`` in the worker once its job is known (the steps are
``sandbox._preparation.Layer``'s; what each layer stops is in ``sandbox.layers``).

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

__all__ = ["LAYERS", "harden", "on_job", "prepare"]

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


#: The layers with a step of each kind: a worker calls only those (each object a fresh fork
#: touches copies a page of the zygote's, and ``on_job`` is on the call's path).
_APPLYING = tuple(layer for layer in LAYERS if type(layer).apply is not Layer.apply)
_ON_JOB = tuple(layer for layer in LAYERS if type(layer).on_job is not Layer.on_job)


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
