"""Paths a caller names, confined beneath a directory, and the files a caller hands over or
asks back as base64 (SandboxFusion's ``files`` and ``fetch_files``), written and read beneath
their directory without following a link (``sandbox._beneath``). Not a plugin's module: every
tool that takes paths imports it, and with it nothing of another plugin."""

from __future__ import annotations

import base64
import binascii
import os
from typing import TYPE_CHECKING, Any

from a2e_engine.sandbox._beneath import open_dir, read_beneath, write_beneath
from a2e_engine.sandbox._paths import under
from a2e_engine.sandbox._run_root import program_writable

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolParameter

__all__ = [
    "decoded_files",
    "exchange_parameters",
    "fetch_base64_files",
    "resolve_confined",
    "write_base64_files",
    "write_decoded",
]


def resolve_confined(path: str, workspace: str, roots: tuple[str, ...]) -> str:
    """The real path of ``path`` (relative to the workspace) if it lies inside an allowed root."""
    if "\x00" in path:
        raise ValueError("path contains a NUL byte")
    candidate = path if os.path.isabs(path) else os.path.join(workspace, path)
    real = os.path.realpath(candidate)
    for root in (workspace, *roots):
        real_root = os.path.realpath(root)
        if under(real, real_root):
            return real
    allowed = ", ".join((workspace, *roots))
    raise PermissionError(f"{path!r} resolves to {real!r}, outside the allowed roots ({allowed})")


def decoded_files(where: str, files: Any) -> list[tuple[str, bytes]]:
    """``files`` (path to base64, as SandboxFusion sends them) checked, each with its content
    (a ``null`` content is skipped): a relative path beneath ``where``, given back relative to
    it; an absolute one beneath the run layer's own directories (``sandbox._run_root``: a
    program's ``/mnt/data/input.csv``), given back absolute."""
    if not isinstance(files, dict):
        raise ValueError("files must be an object of path to base64 content")
    decoded = []
    real_where = os.path.realpath(where)
    named: dict[str, str] = {}
    for path, content in files.items():
        if content is None:
            continue
        target = resolve_confined(str(path), where, program_writable())
        if target in named:  # which one would be written would depend on the order
            raise ValueError(f"files names one file twice: {named[target]!r} and {path!r}")
        named[target] = str(path)
        try:
            data = base64.b64decode(str(content), validate=True)
        except binascii.Error:
            raise ValueError(f"files[{path!r}] is not base64") from None
        inside = under(target, real_where)
        decoded.append((os.path.relpath(target, real_where) if inside else target, data))
    return decoded


def write_base64_files(where: str, files: Any) -> None:
    """``files`` (``decoded_files``) written, every one checked first."""
    decoded = decoded_files(where, files)
    fd = open_dir(where)
    try:
        for path, data in decoded:
            write_decoded(fd, path, data)
    finally:
        os.close(fd)


def write_decoded(where: int, path: str, data: bytes) -> None:
    """One of ``decoded_files``' files written: a relative path beneath the directory
    ``where`` (a descriptor), an absolute one beneath the run layer's directory that holds
    it; never through a link (another call of the session may have put one there)."""
    if not os.path.isabs(path):
        write_beneath(where, path, data)
        return
    root = next(root for root in program_writable() if under(path, root))
    fd = open_dir(root)
    try:
        write_beneath(fd, os.path.relpath(path, root), data)
    finally:
        os.close(fd)


def fetch_base64_files(where: str, paths: list[str], cap: int) -> dict[str, str]:
    """The regular files asked for that exist, base64: a relative path beneath ``where``, an
    absolute one wherever the call could read it (its run layer included, ``sandbox._run_root``:
    what a program wrote to ``/mnt/out``), as SandboxFusion fetches them; either without a
    link anywhere on its way (a program may have left one to read what it may not). Others
    are left out; past ``cap`` bytes in all, a ``ValueError``."""
    fetched: dict[str, str] = {}
    left = cap
    for path in paths:
        try:
            path = str(path)
            relative = path.lstrip("/") if os.path.isabs(path) else path
            root = open_dir("/" if os.path.isabs(path) else where)
            try:
                data = read_beneath(root, relative, left + 1)
            finally:
                os.close(root)
        except (OSError, ValueError):
            continue
        if data is None:
            continue
        if len(data) > left:
            raise ValueError(f"the files to fetch come to more than {cap} bytes")
        left -= len(data)
        fetched[path] = base64.b64encode(data).decode()
    return fetched


def exchange_parameters() -> list[ToolParameter]:
    """A tool's ``files`` and ``fetch_files`` parameters, as SandboxFusion names them."""
    from a2e.caps.tools._models import ToolParameter

    return [
        ToolParameter(
            name="files",
            type="object",
            description="files written first: path (relative) to base64 content",
        ),
        ToolParameter(
            name="fetch_files", type="array", description="paths whose content comes back, base64"
        ),
    ]
