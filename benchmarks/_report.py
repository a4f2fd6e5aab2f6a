"""How a benchmark hands over its report: the table printed, the JSON written where asked."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

__all__ = ["publish", "refuse_unwritable"]


def refuse_unwritable(parser: argparse.ArgumentParser, flag: str, path: str | None) -> None:
    """Before anything is measured: a run of minutes must not end in a file that cannot be
    written (``parser.error``, which exits)."""
    if path and not os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        parser.error(f"{flag}: cannot write {path} (its directory is missing or read-only)")


def publish(report: dict[str, Any], table: str, json_path: str | None, indent: int = 2) -> None:
    print(table)
    if json_path:
        with open(json_path, "w") as out:
            json.dump(report, out, indent=indent)
        print(f"\nJSON report: {json_path}")
