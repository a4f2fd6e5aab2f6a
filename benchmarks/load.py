"""A load test of ``a2e serve --http``: many concurrent clients for a while, then the checks a
service needs. ``python -m a2e_engine.benchmarks.load [--clients 64] [--seconds 60]``.

The server runs as a subprocess on 127.0.0.1 with ``--max-workers 4`` and a queue
(``max_pending_calls``) smaller than the clients, so that it must turn some away. Half the
clients call over REST (``POST /v1/tools/python_eval``), half over WebSocket
(``AsyncToolAPI``), each call printing a number of its own. A 429 (or ``overloaded``) is counted
and retried after its ``Retry-After``, as a client should. At the end: every call answered
exactly once with its own number (0 lost, 0 duplicated, 0 wrong), the server's memory flat
(RSS at the end against the one after a warm-up), and no file descriptor or process left
behind once the clients are gone. Loopback only, bounded in clients and time.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from a2e.caps.tools._async_client import AsyncToolAPI
from a2e_engine.benchmarks._calling import http_service

__all__ = ["load_test", "main"]

MAX_RSS_GROWTH = 0.15
WARM_UP_S = 5.0
SETTLE_S = 3.0


@dataclass
class Tally:
    answered: dict[int, int] = field(default_factory=dict)  # call number -> times answered
    wrong: list[int] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    overloaded: int = 0
    sent: int = 0


def _footprint(pid: int) -> dict[str, int]:
    process = psutil.Process(pid)
    return {
        "rss_kb": process.memory_info().rss // 1024,
        "fds": process.num_fds(),
        "processes": len(process.children(recursive=True)),
    }


async def _rest_client(url: str, numbers: itertools.count[int], until: float, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        while time.monotonic() < until:
            number = next(numbers)
            tally.sent += 1
            while True:
                body = {"arguments": {"code": f"print({number})"}, "timeout": 60}
                try:
                    response = await http.post("/v1/tools/python_eval", json=body)
                except httpx.HTTPError as exc:
                    tally.failed.append(f"{number}: {type(exc).__name__}: {exc}")
                    break
                if response.status_code == 429:
                    tally.overloaded += 1
                    await asyncio.sleep(float(response.headers.get("retry-after", "1")))
                    continue
                result = response.json()
                _check(number, result.get("success"), result.get("data"), result, tally)
                break


async def _ws_client(url: str, numbers: itertools.count[int], until: float, tally: Tally) -> None:
    async with await AsyncToolAPI.connect(url.replace("http", "ws", 1) + "/a2e") as tools:
        while time.monotonic() < until:
            number = next(numbers)
            tally.sent += 1
            while True:
                result = await tools.call("python_eval", {"code": f"print({number})"}, timeout=60)
                if result.error_code == "overloaded":
                    tally.overloaded += 1
                    await asyncio.sleep(1.0)
                    continue
                _check(number, result.success, result.data, result.error, tally)
                break


def _check(number: int, success: Any, data: Any, detail: Any, tally: Tally) -> None:
    if not success:
        tally.failed.append(f"{number}: {detail}")
        return
    tally.answered[number] = tally.answered.get(number, 0) + 1
    if not isinstance(data, dict) or data.get("stdout") != f"{number}\n":
        tally.wrong.append(number)


async def _drive(url: str, clients: int, seconds: float, pid: int) -> tuple[Tally, dict]:
    tally = Tally()
    numbers = itertools.count()
    until = time.monotonic() + seconds
    tasks = [
        asyncio.create_task(
            (_rest_client if i % 2 == 0 else _ws_client)(url, numbers, until, tally)
        )
        for i in range(clients)
    ]
    await asyncio.sleep(min(WARM_UP_S, seconds / 4))
    warm = _footprint(pid)
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for outcome in results:
        if isinstance(outcome, BaseException):
            tally.failed.append(f"a client stopped: {type(outcome).__name__}: {outcome}")
    return tally, warm


def load_test(clients: int = 64, seconds: float = 60.0, workers: int = 4) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="a2e-load-") as scratch:
        config = Path(scratch) / "engine.toml"
        config.write_text(f"[engine.admission]\nmax_pending_calls = {max(1, clients * 3 // 4)}\n")
        flags = ("--max-workers", str(workers), "--prefork", "2", "--config", str(config))
        with http_service(*flags) as (url, pid):
            time.sleep(1.0)
            before = _footprint(pid)
            started = time.monotonic()
            tally, warm = asyncio.run(_drive(url, clients, seconds, pid))
            elapsed = time.monotonic() - started
            end = _footprint(pid)
            time.sleep(SETTLE_S)
            after = _footprint(pid)
    lost = tally.sent - len(tally.answered) - len(tally.failed)
    duplicated = sum(1 for times in tally.answered.values() if times > 1)
    growth = (end["rss_kb"] - warm["rss_kb"]) / max(1, warm["rss_kb"])
    checks = {
        "no call lost": lost == 0,
        "no call answered twice": duplicated == 0,
        "no wrong answer": not tally.wrong,
        "no call failed": not tally.failed,
        f"server RSS grew under {MAX_RSS_GROWTH:.0%} after the warm-up": growth < MAX_RSS_GROWTH,
        "no file descriptor left": after["fds"] <= before["fds"],
        "no process left": after["processes"] <= before["processes"],
    }
    return {
        "ok": all(checks.values()),
        "checks": checks,
        "clients": clients,
        "seconds": round(elapsed, 1),
        "workers": workers,
        "calls": len(tally.answered),
        "calls_per_s": round(len(tally.answered) / elapsed, 1),
        "overloaded_then_retried": tally.overloaded,
        "lost": lost,
        "duplicated": duplicated,
        "wrong": len(tally.wrong),
        "failed": tally.failed[:10],
        "server": {"before": before, "after_warm_up": warm, "end": end, "settled": after},
        "rss_growth": round(growth, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m a2e_engine.benchmarks.load")
    parser.add_argument("--clients", type=int, default=64, help="concurrent clients (64)")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long (60)")
    parser.add_argument("--workers", type=int, default=4, help="the server's --max-workers (4)")
    parser.add_argument("--json", metavar="PATH", help="also write the report as JSON")
    args = parser.parse_args(argv)
    if not 1 <= args.clients <= 512 or not 0 < args.seconds <= 3600:
        parser.error("--clients must be 1-512 and --seconds 0-3600")
    report = load_test(args.clients, args.seconds, args.workers)
    text = json.dumps(report, indent=2)
    if args.json:
        Path(args.json).write_text(text + "\n")
    print(text)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
