"""What a zygote holds once it is ready: the memory and the modules every worker inherits.

A worker is a fork of its zygote, so whatever the zygote imported and allocated is paid again
by every worker: on fork (page tables), as copy-on-write faults while it runs, and on exit
(unmapping). The zygote measures itself after ``prepare`` and reports it in its ``ready``
message; ``a2e doctor --json`` and ``a2e bench`` show it. The supervisor checks the report
like any other message from the zygote (``check_footprint``).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["MAX_PACKAGES", "check_footprint", "measure"]

#: The most top-level package names a report may carry (a zygote of ours imports ~150).
MAX_PACKAGES = 2000


def measure() -> dict[str, Any]:
    """This process: resident, private and mapped memory (KiB), modules, and top-level
    packages. Mapped is every page a worker's exit unmaps, resident or not."""
    rollup = _kib_fields("/proc/self/smaps_rollup")
    status = _kib_fields("/proc/self/status")
    packages = sorted({name.partition(".")[0] for name in sys.modules})
    return {
        "rss_kib": status.get("VmRSS", 0),
        "mapped_kib": status.get("VmSize", 0),
        "private_kib": rollup.get("Private_Clean", 0) + rollup.get("Private_Dirty", 0),
        "modules": len(sys.modules),
        "packages": packages[:MAX_PACKAGES],
    }


def _kib_fields(path: str) -> dict[str, int]:
    """``Name:  123 kB`` lines of a /proc file; empty where the kernel has no such file."""
    fields: dict[str, int] = {}
    try:
        with open(path) as lines:
            for line in lines:
                name, _, rest = line.partition(":")
                value = rest.split()
                if len(value) == 2 and value[1] == "kB" and value[0].isdigit():
                    fields[name] = int(value[0])
    except OSError:
        pass
    return fields


def check_footprint(report: Any) -> dict[str, Any]:
    """``report`` if it has the fields ``measure`` gives, of their types; ``ValueError``."""
    if not isinstance(report, dict):
        raise ValueError("a footprint is an object")
    for name in ("rss_kib", "private_kib", "mapped_kib", "modules"):
        value = report.get(name)
        if type(value) is not int or value < 0:
            raise ValueError(f"footprint: bad {name} {value!r:.40}")
    packages = report.get("packages")
    if (
        not isinstance(packages, list)
        or len(packages) > MAX_PACKAGES
        or not all(isinstance(p, str) and 0 < len(p) <= 200 for p in packages)
    ):
        raise ValueError("footprint: packages must be a list of package names")
    fields = ("rss_kib", "private_kib", "mapped_kib", "modules", "packages")
    return {name: report[name] for name in fields}
