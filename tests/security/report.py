"""Render the suite's report (``A2E_SECURITY_REPORT=path.json``) as a markdown table: one row
per attack, the layer that stops it with every layer on, what holds with the optional layers
off, and the outcome of its runs in each mode."""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from typing import Any


def render(entries: list[dict[str, Any]]) -> str:
    cases: dict[str, dict[str, Any]] = {}
    outcomes: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for entry in entries:
        cases.setdefault(entry["name"], entry)
        outcomes[entry["name"]][entry["mode"]].append(entry["outcome"])
    rows = [
        "| case | runs | stopped by (every layer on) | result | optional layers off | result |",
        "|---|---|---|---|---|---|",
    ]
    for name, case in cases.items():
        full, reduced = outcomes[name]["full"], outcomes[name]["reduced"]
        rows.append(
            f"| {name} | {len(full)} | {case['full']} | {_summary(full)} | {case['reduced']} "
            f"| {_summary(reduced)} |"
        )
    return "\n".join(rows) + "\n"


def _summary(outcomes: list[str]) -> str:
    if not outcomes:
        return "not run"
    counts = {o: outcomes.count(o) for o in dict.fromkeys(outcomes)}
    return ", ".join(f"{n} {o}" for o, n in counts.items())


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        print(render(json.load(fh)), end="")
