"""The languages ``run_code`` runs: one declarative entry each.

An entry says where the source goes, how it is compiled (if it is) and how it runs, with
``{source}`` and ``{binary}`` standing for the file names, and which programs its toolchain
needs, so that a missing one is refused with what to install. A new language is one entry.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass

__all__ = ["LANGUAGES", "Language"]


@dataclass(frozen=True)
class Language:
    name: str
    source: str  # the file the code is written to, in the run's directory
    run: tuple[str, ...]
    compile: tuple[str, ...] | None = None
    binary: str = ""  # what the compile step makes, for ``{binary}``
    install: str = ""  # what to install when the toolchain is missing (Debian package)

    def argv(self, step: tuple[str, ...]) -> list[str]:
        return [part.format(source=self.source, binary=self.binary) for part in step]

    def missing(self) -> str | None:
        """Why this host cannot run the language, or None."""
        for step in (self.compile, self.run):
            if step and shutil.which(step[0]) is None:
                hint = f"; install {self.install}" if self.install else ""
                return f"{self.name} needs {step[0]}, which this host does not have{hint}"
        return None


LANGUAGES: dict[str, Language] = {
    language.name: language
    for language in (
        # The engine's own interpreter: the one the sandbox already lets workers run.
        Language("python", "main.py", (sys.executable, "{source}")),
        Language("bash", "main.sh", ("/bin/bash", "{source}"), install="bash"),
    )
}
