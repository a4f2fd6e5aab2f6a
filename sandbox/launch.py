"""Starting and stopping the zygote process from the supervisor."""

from __future__ import annotations

import os
import socket
import threading
from typing import Any

import multiprocess
from multiprocess import spawn as mp_spawn

from a2e_engine.sandbox.zygote import zygote_main

__all__ = ["join_or_kill", "spawn_zygote"]

_SPAWN_LOCK = threading.Lock()


def spawn_zygote(ctrl: socket.socket, settings_json: str, plugins_blob: bytes) -> Any:
    """Start the zygote as a fresh interpreter (``multiprocess`` spawn) *without* re-running
    the host's ``__main__``.

    Spawn normally re-executes the parent's main script in the child so that pickled references
    to ``__main__`` resolve. The zygote needs none of that (its target is importable and plugins
    arrive by value through dill), and re-running a host script that has no
    ``if __name__ == "__main__"`` guard would start a second engine inside the zygote. So the
    main-module entries are dropped from the preparation data of this one spawn.
    """
    original = mp_spawn.get_preparation_data

    def without_main(name: str) -> dict[str, Any]:
        data = original(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        # Nothing of the host's command line (it may hold a --token) or its multiprocessing
        # key reaches the zygote, whose memory every worker inherits.
        data["sys_argv"] = ["a2e-zygote"]
        data["authkey"] = os.urandom(32)
        return data

    ctx = multiprocess.get_context("spawn")
    process = ctx.Process(
        target=zygote_main, args=(ctrl, settings_json, plugins_blob), name="a2e-zygote", daemon=True
    )
    process.authkey = os.urandom(32)
    with _SPAWN_LOCK:
        mp_spawn.get_preparation_data = without_main
        try:
            process.start()
        finally:
            mp_spawn.get_preparation_data = original
    return process


def join_or_kill(process: Any, grace: float = 5.0) -> None:
    process.join(grace)
    if process.is_alive():
        process.kill()
        process.join(5)
