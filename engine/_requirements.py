"""What the engine requires of the sandbox it got, checked once the zygote has said which
layers this host gives it (``sandbox.layers``): a start that cannot keep its promises is
refused with the reason, never run weaker in silence.

* every layer named in ``EngineConfig.require``;
* as root, at least one layer that keeps workers off root-owned host files, unless
  ``allow_unprotected_root`` accepts the risk;
* limits a worker can run under (an address space a worker's own start already needs).

Where the engine may run but a layer is missing, ``protect_supervisor`` makes up for what it
can, and says so.
"""

from __future__ import annotations

import logging
import os

from a2e_engine.engine._config import EngineConfig
from a2e_engine.sandbox import _syscalls as syscalls
from a2e_engine.sandbox.layers import LayerReports, missing_layers

__all__ = ["IsolationUnavailable", "LimitTooLow", "protect_supervisor", "refusal"]

log = logging.getLogger("a2e.engine")

#: Layers that keep a uid-0 worker off root-owned host files.
ROOT_GUARDS = ("identity", "readonly_filesystem", "landlock")


class IsolationUnavailable(RuntimeError):
    """A layer the configuration requires is not available here; the engine did not start."""


class LimitTooLow(ValueError):
    """A limit is below what a worker needs to run at all; the engine did not start."""


def refusal(config: EngineConfig, layers: LayerReports) -> Exception | None:
    """Why the engine must not run with these layers and limits (``None``: it may)."""
    missing = missing_layers(config.require, layers)
    if missing:
        return IsolationUnavailable(
            "required isolation layers are not available on this host: " + "; ".join(missing)
        )
    if (
        os.geteuid() == 0
        and not config.allow_unprotected_root
        and not any(layers.active(name) for name in ROOT_GUARDS)
    ):
        reasons = "; ".join(f"{name} ({layers.reason(name)})" for name in ROOT_GUARDS)
        return IsolationUnavailable(
            "workers would run as root with write access to root-owned host files (such as "
            f"/proc/sys/kernel/core_pattern): none of {reasons} is active. Enable one, or set "
            "allow_unprotected_root=True (--allow-unprotected-root) to accept that"
        )
    least = layers.fact("rlimits", "least_memory_mb")
    if isinstance(least, int) and config.limits.memory_mb < least:
        return LimitTooLow(
            f"limits.memory_mb is {config.limits.memory_mb} MiB, below what a worker needs "
            f"here: its own start takes most of that address space, and a thread it starts "
            f"needs a stack more; give it at least {least} MiB"
        )
    return None


def protect_supervisor(layers: LayerReports) -> None:
    """Make up, in this process, for layers that would have kept workers away from it."""
    if os.geteuid() != 0 and not layers.active("private_proc"):
        # Workers run as our own uid and see our /proc entry: without this they could read
        # this process's memory and environment through /proc/<pid>/mem and environ.
        syscalls.prctl(syscalls.PR_SET_DUMPABLE, 0)
        log.warning(
            "workers share this process's uid and /proc: made this process non-dumpable "
            "so that they cannot read its memory (core dumps and debuggers are off too)"
        )
    if os.geteuid() == 0 and not layers.active("pid_namespace"):
        log.warning(
            "running as root without PID namespaces (%s): workers share the host's process "
            "table and /proc and can signal or inspect host processes; only run trusted code",
            layers.reason("pid_namespace"),
        )
