"""Starting and stopping the zygote process from the supervisor.

The zygote is a fresh interpreter (``sys.executable``), so it inherits no supervisor threads or
locks, and it runs nothing of the host's ``__main__`` (a host script without an
``if __name__ == "__main__"`` guard would otherwise start a second engine inside it). It gets
exactly two fds: its control socket, and a memfd holding what it boots from (its settings
and its plugins, pickled by value with dill). Its command line holds the supervisor's
``sys.path``, so that plugins import in the zygote from wherever the host found them, and
nothing of the host's own command line (it may hold a ``--token``), which every worker would
otherwise inherit in its memory.

No ``multiprocessing`` (or ``multiprocess``) machinery is involved: its start-up would import
``pickle`` helpers, ``dill`` and the package itself into the zygote, several MiB that every
worker would then pay for on fork and on exit.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys

__all__ = ["BOOT_HEADER", "join_or_kill", "spawn_zygote"]

#: The boot memfd starts with the length of its JSON header; the plugins' pickle follows it.
BOOT_HEADER = struct.Struct(">Q")


def spawn_zygote(
    ctrl: socket.socket, settings_json: str, plugins_blob: bytes
) -> subprocess.Popen[bytes]:
    """Start the zygote (``sandbox._boot``) with ``ctrl`` as its control socket."""
    boot_fd = _boot_memfd(settings_json, plugins_blob)
    try:
        path = [os.fspath(entry) for entry in sys.path if isinstance(entry, str | os.PathLike)]
        code = (
            f"import sys; sys.path[:] = {path!r}; from a2e_engine.sandbox._boot import main; main()"
        )
        return subprocess.Popen(
            [sys.executable, "-c", code, str(ctrl.fileno()), str(boot_fd)],
            env=_zygote_environment(),
            pass_fds=(ctrl.fileno(), boot_fd),
            # stdout may be the host's protocol channel (a2e serve --stdio): never write there.
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            # A session of its own: whoever kills the supervisor's process group (Ray's raylet
            # does, for an actor that died; a terminal's Ctrl-C signals it) must leave the
            # zygote to see its control socket close and clear what the supervisor made
            # (cgroups, session mounts) before it exits.
            start_new_session=True,
        )
    finally:
        os.close(boot_fd)


def _zygote_environment() -> dict[str, str]:
    """The supervisor's environment without what sets the interpreter's flags
    (``PYTHONDONTWRITEBYTECODE``, ``PYTHONUNBUFFERED``, ``PYTHONHASHSEED``, ...): a program run
    as a fork of a worker (``tools._python_main``) must find the flags of ``python main.py`` in
    a worker's environment, which has none of them. ``PYTHONHOME`` says where the standard
    library is; the zygote's ``sys.path`` is given on its command line."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("PYTHON") or name == "PYTHONHOME"
    }


def _boot_memfd(settings_json: str, plugins_blob: bytes) -> int:
    """A memfd with what the zygote boots from: written at once however large the plugins
    are (a pipe would block the event loop until the zygote read it), read back by it."""
    header = json.dumps({"settings": settings_json}).encode()
    fd = os.memfd_create("a2e-zygote-boot", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as out:
            out.write(BOOT_HEADER.pack(len(header)) + header)
            out.write(plugins_blob)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def join_or_kill(process: subprocess.Popen[bytes], grace: float = 5.0) -> None:
    try:
        process.wait(grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)
