"""The zygote's first steps in its fresh interpreter (started by ``sandbox._launch``).

It takes its control socket and boot memfd from its command line, reads the settings and the
plugins, closes the memfd and hands over to ``sandbox._zygote``. The plugins' pickle came from
the supervisor (never from a worker) and is read with the standard library's ``pickle``:
``dill`` is imported only if the pickle names it, for a plugin defined by value (in a script or
inside a function); a plugin from an importable module is pickled by reference and needs none.
"""

from __future__ import annotations

import json
import pickle
import socket
import sys
from typing import Any

from a2e_engine.sandbox._launch import BOOT_HEADER
from a2e_engine.sandbox._zygote import zygote_main

__all__ = ["main"]


def main() -> None:
    ctrl_fd, boot_fd = (int(arg) for arg in sys.argv[1:3])
    sys.argv = ["a2e-zygote"]
    ctrl = socket.socket(fileno=ctrl_fd)
    zygote_main(ctrl, lambda: _read_boot(boot_fd))


def _read_boot(fd: int) -> tuple[str, list[Any]]:
    """The settings (JSON) and the plugins, from the boot memfd, which is closed after."""
    with open(fd, "rb") as boot:
        data = boot.read()
    (length,) = BOOT_HEADER.unpack_from(data)
    header = json.loads(data[BOOT_HEADER.size : BOOT_HEADER.size + length])
    plugins = pickle.loads(data[BOOT_HEADER.size + length :])
    return header["settings"], plugins
