"""What a compile step made, kept for the rest of the session: judging one submission on fifty
inputs compiles it once.

An entry's key is a hash of everything the compile step sees: the language, its toolchain (real
path, size and time of each program), the compile command, the source and the files written
beside it. An entry holds the step's outputs (``Language.outputs``) and its result. It lives in
the session's workspace (``.a2e/compiled/<key>``), made by the tool, never by the program: the
compiler and every program run confined to their own run directory (``sandbox.landlock
.confine_writes``), so a submission cannot plant a binary for another one. Where that
confinement is not to be had, ``run_code`` does not use the cache.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from a2e_engine.tools.languages import Language

__all__ = ["CompileCache", "outputs_of"]

_RESULT = "compile_result.json"


class CompileCache:
    def __init__(self, workspace: str) -> None:
        self.root = os.path.join(workspace, ".a2e", "compiled")

    @staticmethod
    def key(language: Language, code: str, files: Mapping[str, Any], argv: list[str]) -> str:
        seen = [
            language.name,
            [list(part) for part in language.toolchain()],
            argv,
            code,
            sorted((str(path), str(content)) for path, content in files.items()),
        ]
        return hashlib.sha256(json.dumps(seen).encode()).hexdigest()

    def lookup(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """The entry's directory and its compile result, or None."""
        entry = os.path.join(self.root, key)
        try:
            with open(os.path.join(entry, _RESULT)) as fh:
                result = json.load(fh)
        except (OSError, ValueError):
            return None
        return entry, result if isinstance(result, dict) else {}

    def store(
        self, key: str, built: str, patterns: tuple[str, ...], result: dict[str, Any]
    ) -> None:
        """Copy the outputs out of ``built`` before anything else runs there. Two calls that
        compile the same thing at once: the first to rename its entry in keeps it."""
        os.makedirs(self.root, exist_ok=True)
        staging = tempfile.mkdtemp(prefix=".staging-", dir=self.root)
        try:
            for relative in outputs_of(built, patterns):
                path, target = os.path.join(built, relative), os.path.join(staging, relative)
                os.makedirs(os.path.dirname(target), exist_ok=True)
                shutil.copy2(path, target)
            with open(os.path.join(staging, _RESULT), "w") as fh:
                json.dump(result, fh)
            os.rename(staging, os.path.join(self.root, key))
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)  # someone else's entry is there already

    @staticmethod
    def place(entry: str, where: str) -> None:
        """The entry's outputs, copied into a run's directory (a copy: the program may change
        its own files, not the entry)."""
        for name in os.listdir(entry):
            if name != _RESULT:
                source = os.path.join(entry, name)
                if os.path.isdir(source):
                    shutil.copytree(source, os.path.join(where, name), dirs_exist_ok=True)
                else:
                    shutil.copy2(source, os.path.join(where, name))


def outputs_of(where: str, patterns: tuple[str, ...]) -> list[str]:
    """The files beneath ``where`` that ``patterns`` match, relative to it."""
    found: list[str] = []
    for pattern in patterns:
        for path in glob.glob(os.path.join(where, pattern)):
            if os.path.isfile(path):
                found.append(os.path.relpath(path, where))
    return found
