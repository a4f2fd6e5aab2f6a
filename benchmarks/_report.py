"""How a benchmark hands over its report: the table printed, the JSON written where asked."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["publish"]


def publish(report: dict[str, Any], table: str, json_path: str | None, indent: int = 2) -> None:
    print(table)
    if json_path:
        with open(json_path, "w") as out:
            json.dump(report, out, indent=indent)
        print(f"\nJSON report: {json_path}")
