"""``a2e doctor``: which isolation layers this host gives the sandbox and why not where not, the
limits per call, the zygotes, and what each language has; exit status 1 when a required layer
is missing."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import textwrap

from a2e_engine.engine._config import UNMEASURED_LIMIT
from a2e_engine.engine._memory_bound import HIGH_WATER, PRESSURE
from a2e_engine.engine.cli._arguments import Subcommands
from a2e_engine.engine.cli._engine_options import add_engine_options, engine_from_args, started
from a2e_engine.sandbox.layers import CATALOG, LayerReports, missing_layers
from a2e_engine.tools._languages import toolchains

__all__ = ["register"]


def register(sub: Subcommands) -> None:
    """Add ``a2e doctor``."""
    doctor = sub.add_parser("doctor", help="which isolation layers this host has, and why not")
    doctor.add_argument("--json", dest="json_output", action="store_true", help="print JSON")
    add_engine_options(doctor)
    doctor.set_defaults(func=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    """Which layers this host gives the sandbox, why not where not, and the limits per call."""
    with started(engine_from_args(args, reporting=True)) as engine:
        layers = engine.layers
        limits = engine.config.limits
        zygotes = engine.zygotes
        bound = engine.worker_bound
        status = engine.status()
        live, most = status.resident_workers, status.max_resident_workers
    missing = missing_layers(tuple(args.require), layers)
    languages = toolchains()
    if args.json_output:
        report = {
            "layers": layers,
            "limits": limits.to_dict(),
            "missing": missing,
            "languages": languages,
            "zygotes": zygotes,
            "max_workers": {"workers": bound.workers, "busy": bound.busy, "why": bound.why},
            "sandbox_memory_mb": layers.fact("memory_cgroup", "total_mb") or 0,
            "resident_workers": {
                "live": live,
                **dataclasses.asdict(engine.config.resident),
                "most": most,
            },
        }
        print(json.dumps(report, indent=2))
        return 1 if missing else 0
    print(f"a2e doctor: kernel {os.uname().release}, euid {os.geteuid()}\n")
    for name, layer in CATALOG.items():
        print(f"  {'on ' if layers.active(name) else 'OFF'}  {name}")
        if not layers.active(name):
            print(f"       why not: {layers.reason(name)}")
        print(textwrap.fill(layer.stops, 96, initial_indent=" " * 7, subsequent_indent=" " * 7))
    print(
        f"\nlimits per call: address space {limits.memory_mb} MiB{_uncapped(layers)}, "
        f"CPU {limits.cpu_seconds} s, "
        f"{limits.open_files} open files, files up to {limits.file_size_mb} MiB, "
        f"{limits.processes} processes and threads, {limits.call_memory_mb} MiB in all, "
        f"/tmp {limits.tmp_mb} MiB; per session: {engine.config.workspace_mb} MiB on disk"
    )
    print(
        f"calls at once: {bound.busy} whatever they do ({bound.why}); the rest queue"
        if bound.busy < bound.workers
        else f"calls at once: {bound.workers} ({bound.why}); the rest queue"
    )
    print(_sandbox_memory(layers))
    resident = engine.config.resident
    counted = (
        f"at most {most} at once"
        if resident.limit or most == UNMEASURED_LIMIT
        else "as many as the sandbox's memory bound has room for"
    )
    print(
        f"stateful sessions (python_session): {live} live, {counted}, "
        f"each worker kept until {resident.idle_s:g} s idle or {resident.lifetime_s:g} s old"
    )
    print("\nzygotes (every worker is a fork of its plugin's):")
    for zygote in zygotes:
        print(
            f"  {zygote['name']:<11}{zygote.get('rss_kib', 0) / 1024:5.1f} MiB resident, "
            f"{zygote.get('private_kib', 0) / 1024:4.1f} MiB its own, "
            f"{zygote.get('mapped_kib', 0) / 1024:5.1f} MiB mapped, "
            f"{zygote.get('modules', 0)} modules"
        )
    print("\nlanguages (run_code, code_eval):")
    for name, language in languages.items():
        print(f"  {'on ' if language['available'] else 'OFF'}  {name:<11}", end="")
        print(language.get("version") or language.get("missing") or "")
        libraries = language.get("libraries")
        if isinstance(libraries, dict) and libraries:
            has = ", ".join(label for label, present in libraries.items() if present) or "none"
            lacks = [label for label, present in libraries.items() if not present]
            print(f"{'':16}with {has}" + (f"; without {', '.join(lacks)}" if lacks else ""))
    if missing:
        print(f"\nmissing required layers: {'; '.join(missing)}")
        return 1
    return 0


def _uncapped(layers: LayerReports) -> str:
    profiles = layers.fact("rlimits", "address_space_uncapped") or []
    return f" (but {' and '.join(profiles)}: the memory cgroup caps them)" if profiles else ""


def _sandbox_memory(layers: LayerReports) -> str:
    """What the whole sandbox may hold, and what happens near it (``engine._memory_bound``)."""
    total = layers.fact("memory_cgroup", "total_mb")
    if not total:
        return (
            "the whole sandbox: no memory group here; each session's workspace quota is "
            "reserved against the bound instead"
        )
    return (
        f"the whole sandbox: at most {total} MiB (running calls, resident workers, every "
        f"workspace); new sessions refused past {HIGH_WATER:.0%}, the session holding the most "
        f"ended past {PRESSURE:.0%}"
    )
