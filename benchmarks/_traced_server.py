"""``a2e`` run with every Python function call of the process watched, for
``benchmarks.path_files``: ``python -m a2e_engine.benchmarks._traced_server OUT serve ...``.

SIGUSR1 starts a recording and SIGUSR2 ends it, writing to ``OUT`` (JSON) each of the project's
files whose code ran meanwhile, in any thread, with the functions of it that ran. A profile hook
(``sys.setprofile``, and ``threading.setprofile`` for the threads to come) sees every call and
costs the process about as much again while it runs, so this is a way to read a path, not to
time it. The engine's zygotes and workers are other processes, and are not watched.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

#: The protocol's package and the engine's, as Python sees their files (links resolved): a file
#: is named from the folder that holds its package, ``a2e/_client.py``, ``engine/_calls.py``.
_A2E = Path(__import__("a2e").__file__ or "").resolve().parent
_ENGINE = Path(__import__("a2e_engine.engine").engine.__file__ or "").resolve().parent.parent

_recording: dict[str, set[str]] | None = None
_names: dict[Any, str | None] = {}


def _ours(filename: str) -> str | None:
    path = Path(filename).resolve()
    for package, base in ((_A2E, _A2E.parent), (_ENGINE, _ENGINE)):
        if path.is_relative_to(package) and not path.is_relative_to(base / "benchmarks"):
            return str(path.relative_to(base))
    return None


def _hook(frame: FrameType, event: str, _arg: object) -> None:
    recording = _recording
    if recording is None or event != "call":
        return
    code = frame.f_code
    name = _names.get(code, "")
    if name == "":
        name = _names[code] = _ours(code.co_filename)
    if name is not None:
        recording.setdefault(name, set()).add(code.co_qualname)


def _start(_signum: int, _frame: object) -> None:
    global _recording
    _recording = {}


def _stop(out: str) -> None:
    global _recording
    recorded, _recording = _recording or {}, None
    for _ in range(100):  # a thread may still be adding what it ran as the recording ends
        try:
            listing = {name: sorted(functions) for name, functions in list(recorded.items())}
            break
        except RuntimeError:
            time.sleep(0.001)
    else:
        listing = {}
    # Whole or not at all: the reader waits for the file.
    staging = Path(f"{out}.partial")
    staging.write_text(json.dumps(dict(sorted(listing.items())), indent=1))
    staging.rename(out)


def main() -> None:
    out, argv = sys.argv[1], sys.argv[2:]
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, lambda _s, _f: _stop(out))
    threading.setprofile(_hook)
    sys.setprofile(_hook)
    from a2e_engine.engine.cli import main as a2e

    sys.exit(a2e(argv))


if __name__ == "__main__":
    main()
