"""File tools for working on a tree without a shell, confined to allowed roots.

Reading tools (``read_file``, ``list_dir``, ``glob``, ``grep``, ``stat``) may look at the session
workspace and the engine's configured read-only roots (e.g. ``/etc``); writing tools
(``write_file``, ``make_dir``, ``delete``, ``move``) only at the workspace. Paths are resolved
*after* following symlinks, then checked against the roots, so ``..`` and symlinks that point
outside are refused with a clear error rather than followed; a write never follows a symlink in its
last component. Text is UTF-8; binary content travels as base64 when asked for
(``encoding: "base64"``) and is refused as text otherwise. Sizes and result counts are capped.
The sandbox (Landlock, read-only mounts, a session uid) holds even if this code had a bug.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import os
import re
import shutil
import stat
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from a2e.caps.tools._plugin import SandboxProfile, ToolPlugin
from a2e_engine.tools._confined import resolve_confined

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition, ToolParameter

__all__ = ["FileTools", "resolve_confined"]

MAX_READ_BYTES = 4 * 1024 * 1024
MAX_WRITE_BYTES = 4 * 1024 * 1024
MAX_ENTRIES = 10_000
MAX_MATCHES = 1_000
MAX_GREP_FILE_BYTES = 4 * 1024 * 1024
ENCODINGS = ("text", "base64")
#: How deep ``list_dir`` goes at most.
MAX_DEPTH = 32


def _param(name: str, type_: str, description: str, required: bool = False) -> ToolParameter:
    from a2e.caps.tools._models import ToolParameter

    return ToolParameter(name=name, type=type_, description=description, required=required)  # type: ignore[arg-type]


def _tool(
    name: str, description: str, *params: ToolParameter, writes: bool = False
) -> ToolDefinition:
    from a2e.caps.tools._models import ToolDefinition

    return ToolDefinition(
        name=name,
        description=description,
        input_parameters=list(params),
        idempotent=not writes,
        tags=["fs", "write" if writes else "read"],
        toolkit="fs",
    )


class FileTools(ToolPlugin):
    name = "files"
    sandbox_profile = SandboxProfile.COMPUTE

    def _list_tools(self) -> list[ToolDefinition]:
        path = _param("path", "string", "a path, relative to the workspace or absolute", True)
        directory = _param(
            "path", "string", "a directory, relative to the workspace (default: the workspace)"
        )
        encoding = _param(
            "encoding", "string", "'text' (UTF-8, the default) or 'base64' for binary"
        )
        return [
            _tool(
                "read_file",
                f"Read a file (UTF-8 text, or base64), up to {MAX_READ_BYTES >> 20} MiB; "
                "optionally a byte range.",
                path,
                encoding,
                _param("offset", "integer", "first byte to read (default 0)"),
                _param("length", "integer", "how many bytes (default: to the end)"),
            ),
            _tool(
                "write_file",
                f"Create, overwrite or append to a file in the workspace (up to "
                f"{MAX_WRITE_BYTES >> 20} MiB per call).",
                path,
                _param("content", "string", "what to write", required=True),
                _param(
                    "mode",
                    "string",
                    "'create' (fail if it exists), 'overwrite' (default) or 'append'",
                ),
                encoding,
                _param("make_dirs", "boolean", "create missing parent directories"),
                writes=True,
            ),
            _tool(
                "list_dir",
                f"List a directory: name, type, size, and with full, path, mode and time "
                f"(up to {MAX_ENTRIES} entries).",
                directory,
                _param("depth", "integer", f"levels to go down, 1 to {MAX_DEPTH} (default 1)"),
                _param("full", "boolean", "each entry's path, mode, time and link target too"),
            ),
            _tool(
                "make_dir",
                "Create a directory in the workspace, and its missing parents.",
                path,
                writes=True,
            ),
            _tool(
                "glob",
                f"Paths matching a glob pattern ('**' for any depth), up to {MAX_ENTRIES}.",
                _param("pattern", "string", "e.g. '**/*.py'", required=True),
                directory,
            ),
            _tool(
                "grep",
                f"Lines matching a regular expression in text files under a directory (up to "
                f"{MAX_MATCHES} matches).",
                _param("pattern", "string", "a Python regular expression", required=True),
                directory,
                _param("include", "string", "only files whose name matches this glob"),
                _param("ignore_case", "boolean", "match case-insensitively"),
            ),
            _tool("stat", "Type, size, permissions and modification time of a path.", path),
            _tool(
                "delete",
                "Delete a file, or a directory with recursive: true (never the workspace itself).",
                path,
                _param("recursive", "boolean", "delete a directory and everything in it"),
                writes=True,
            ),
            _tool(
                "move",
                "Move or rename a file or directory within the workspace.",
                _param("source", "string", "what to move", required=True),
                _param("destination", "string", "where to", required=True),
                _param("overwrite", "boolean", "replace an existing file at the destination"),
                writes=True,
            ),
        ]

    # -- plumbing --

    @property
    def _workspace(self) -> str:
        return self.context.workspace if self.context else os.getcwd()

    def _readable(self, path: str) -> str:
        roots = self.context.read_roots if self.context else ()
        return resolve_confined(path, self._workspace, roots)

    def _writable(self, path: str, link_ok: bool = False) -> str:
        """The real path to write at: its directory resolved and confined to the workspace, its
        last component never a symlink (followed links could point anywhere) unless the link
        itself is what is acted on (``link_ok``: moving or deleting it)."""
        if "\x00" in path:
            raise ValueError("path contains a NUL byte")
        absolute = path if os.path.isabs(path) else os.path.join(self._workspace, path)
        parent, name = os.path.split(os.path.normpath(absolute))
        if not name or name in (".", ".."):
            raise ValueError(f"{path!r} does not name a file")
        real = os.path.join(resolve_confined(parent, self._workspace, ()), name)
        if os.path.islink(real) and not link_ok:
            raise PermissionError(f"{path!r} is a symbolic link; writes do not follow links")
        return real

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        handlers: dict[str, Callable[..., dict[str, Any]]] = {
            "read_file": self._read_file,
            "write_file": self._write_file,
            "list_dir": self._list_dir,
            "make_dir": self._make_dir,
            "glob": self._glob,
            "grep": self._grep,
            "stat": self._stat,
            "delete": self._delete,
            "move": self._move,
        }
        if tool_name not in handlers:
            raise ValueError(f"unknown tool {tool_name!r}")
        return handlers[tool_name](**arguments)

    # -- the tools --

    def _read_file(
        self, path: str, encoding: str = "text", offset: int = 0, length: int | None = None
    ) -> dict[str, Any]:
        _check_encoding(encoding)
        real = self._readable(path)
        size = os.path.getsize(real)
        if offset < 0 or (length is not None and length < 0):
            raise ValueError("offset and length must not be negative")
        wanted = size - offset if length is None else min(length, max(0, size - offset))
        if wanted > MAX_READ_BYTES:
            raise ValueError(
                f"{path!r}: {wanted} bytes asked for; the limit is {MAX_READ_BYTES} (read it in "
                "parts with offset and length)"
            )
        with open(real, "rb") as fh:
            fh.seek(offset)
            raw = fh.read(max(0, wanted))
        result: dict[str, Any] = {"size": size}
        if encoding == "base64":
            result["content_base64"] = base64.b64encode(raw).decode()
            return result
        try:
            result["content"] = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(
                f"{path!r} is not UTF-8 text; read it with encoding: 'base64'"
            ) from None
        return result

    def _write_file(
        self,
        path: str,
        content: str,
        mode: str = "overwrite",
        encoding: str = "text",
        make_dirs: bool = False,
    ) -> dict[str, Any]:
        _check_encoding(encoding)
        flags = {
            "create": os.O_CREAT | os.O_EXCL,
            "overwrite": os.O_CREAT | os.O_TRUNC,
            "append": os.O_CREAT | os.O_APPEND,
        }.get(mode)
        if flags is None:
            raise ValueError("mode must be 'create', 'overwrite' or 'append'")
        if encoding == "base64":
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError("content is not valid base64") from None
        else:
            data = content.encode("utf-8")
        if len(data) > MAX_WRITE_BYTES:
            raise ValueError(f"{len(data)} bytes to write; the limit is {MAX_WRITE_BYTES}")
        if make_dirs:
            absolute = path if os.path.isabs(path) else os.path.join(self._workspace, path)
            directory = os.path.dirname(os.path.normpath(absolute))
            existing = directory
            while not os.path.exists(existing):
                existing = os.path.dirname(existing)
            resolve_confined(existing, self._workspace, ())  # new directories go in there
            os.makedirs(directory, exist_ok=True)
        real = self._writable(path)
        fd = os.open(real, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC | flags, 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return {"path": real, "bytes_written": len(data), "size": os.path.getsize(real)}

    def _list_dir(self, path: str = ".", depth: int = 1, full: bool = False) -> dict[str, Any]:
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
            raise ValueError(f"depth must be a whole number from 1 to {MAX_DEPTH}")
        real = self._readable(path)
        entries: list[dict[str, Any]] = []
        truncated = False
        below = [(real, 1)]
        while below and not truncated:
            directory, level = below.pop(0)
            with os.scandir(directory) as it:
                for entry in sorted(it, key=lambda e: e.name):
                    if len(entries) >= MAX_ENTRIES:
                        truncated = True
                        break
                    name = os.path.relpath(entry.path, real) if depth > 1 else entry.name
                    entries.append(_describe(name, entry.path, full))
                    if level < depth and entry.is_dir(follow_symlinks=False):
                        below.append((entry.path, level + 1))
        return {"path": real, "entries": entries, **({"truncated": True} if truncated else {})}

    def _make_dir(self, path: str) -> dict[str, Any]:
        real = self._writable(path)
        existing = real
        while not os.path.lexists(existing):
            existing = os.path.dirname(existing)
        resolve_confined(existing, self._workspace, ())  # new directories go in there
        if os.path.lexists(real):
            if not os.path.isdir(real):
                raise FileExistsError(f"{path!r} exists and is not a directory")
            return {"path": real, "created": False}
        os.makedirs(real)
        return {"path": real, "created": True}

    def _glob(self, pattern: str, path: str = ".") -> dict[str, Any]:
        if os.path.isabs(pattern) or ".." in pattern.split("/"):
            raise ValueError("the pattern must be relative and without '..' (use path)")
        base = self._readable(path)
        matches: list[str] = []
        for relative in _walk(base):
            if fnmatch.fnmatchcase(relative, pattern) or (
                pattern.startswith("**/") and fnmatch.fnmatchcase(relative, pattern[3:])
            ):
                matches.append(relative)
                if len(matches) >= MAX_ENTRIES:
                    return {"path": base, "matches": matches, "truncated": True}
        return {"path": base, "matches": matches}

    def _grep(
        self, pattern: str, path: str = ".", include: str = "", ignore_case: bool = False
    ) -> dict[str, Any]:
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise ValueError(f"pattern: {exc}") from None
        base = self._readable(path)
        matches: list[dict[str, Any]] = []
        skipped = 0
        for relative in _walk(base, files_only=True):
            if include and not fnmatch.fnmatchcase(os.path.basename(relative), include):
                continue
            full = os.path.join(base, relative)
            text = _text_of(full)
            if text is None:
                skipped += 1
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    matches.append({"path": relative, "line": number, "text": line[:1000]})
                    if len(matches) >= MAX_MATCHES:
                        return {"matches": matches, "truncated": True, "skipped_files": skipped}
        return {"matches": matches, "skipped_files": skipped}

    def _stat(self, path: str) -> dict[str, Any]:
        real = self._readable(path)
        return _describe(os.path.basename(real) or real, real, full=True)

    def _delete(self, path: str, recursive: bool = False) -> dict[str, Any]:
        absolute = path if os.path.isabs(path) else os.path.join(self._workspace, path)
        if os.path.realpath(absolute) == os.path.realpath(self._workspace):
            raise PermissionError("the workspace itself cannot be deleted")
        real = self._writable(path, link_ok=True)
        if os.path.isdir(real) and not os.path.islink(real):
            if not recursive:
                raise IsADirectoryError(f"{path!r} is a directory; pass recursive: true")
            shutil.rmtree(real)
        else:
            os.unlink(real)
        return {"deleted": real}

    def _move(self, source: str, destination: str, overwrite: bool = False) -> dict[str, Any]:
        src = self._writable(source, link_ok=True)
        if not os.path.lexists(src):
            raise FileNotFoundError(f"{source!r} does not exist")
        dst = self._writable(destination)
        if os.path.isdir(dst):
            dst = os.path.join(dst, os.path.basename(src))
        if os.path.lexists(dst) and not overwrite:
            raise FileExistsError(f"{destination!r} exists; pass overwrite: true")
        os.replace(src, dst)
        return {"source": src, "destination": dst}


def _check_encoding(encoding: str) -> None:
    if encoding not in ENCODINGS:
        raise ValueError(f"encoding must be one of {', '.join(ENCODINGS)}")


def _describe(name: str, path: str, full: bool = False) -> dict[str, Any]:
    info = os.lstat(path)
    kind = (
        "link"
        if stat.S_ISLNK(info.st_mode)
        else "dir"
        if stat.S_ISDIR(info.st_mode)
        else "file"
        if stat.S_ISREG(info.st_mode)
        else "other"
    )
    facts: dict[str, Any] = {"name": name, "type": kind, "size": info.st_size}
    if full:
        facts.update(
            path=path,
            mode=oct(stat.S_IMODE(info.st_mode)),
            modified=info.st_mtime,
            **({"target": os.readlink(path)} if kind == "link" else {}),
        )
    return facts


def _walk(base: str, files_only: bool = False) -> Iterator[str]:
    """Relative paths under ``base``, sorted, without following symlinked directories."""
    for directory, dirs, files in os.walk(base):
        dirs.sort()
        relative_dir = os.path.relpath(directory, base)
        names = sorted(files) if files_only else sorted([*dirs, *files])
        for name in names:
            yield name if relative_dir == "." else os.path.join(relative_dir, name)


def _text_of(path: str) -> str | None:
    """A regular file's text, or ``None`` (binary, too big, unreadable, a link)."""
    try:
        info = os.lstat(path)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_GREP_FILE_BYTES:
            return None
        with open(path, "rb") as fh:
            raw = fh.read()
        if b"\x00" in raw[:8192]:
            return None
        return raw.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
