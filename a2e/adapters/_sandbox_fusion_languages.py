"""SandboxFusion's language names and this engine's (``tools._languages``), with no import
beyond the standard library: the verl drop-in (``a2e.adapters.verl``) reads them in a trainer's
process, and so does the engine's ``/run_code``, which answers SandboxFusion's clients."""

from __future__ import annotations

__all__ = ["SANDBOX_FUSION_LANGUAGES", "SANDBOX_FUSION_NOT_SERVED"]

#: SandboxFusion's language name -> the ``run_code`` tool's (``tools._languages``).
SANDBOX_FUSION_LANGUAGES: dict[str, str] = {
    "python": "python",
    "bash": "bash",
    "cpp": "cpp",
    "c": "c",
    "java": "java",
    "nodejs": "nodejs",
    "typescript": "typescript",
    "go": "go",
    "rust": "rust",
    "perl": "perl",
    "ruby": "ruby",
    "lua": "lua",
    "php": "php",
    "R": "r",
    "D_ut": "d",
    "csharp": "csharp",
    "pytest": "pytest",
    "junit": "junit",
    "verilog": "verilog",
    "go_test": "go_test",
    "racket": "racket",
    "scala": "scala",
    "jest": "jest",
    "kotlin_script": "kotlin_script",
    "sql": "sql",
    "js": "nodejs",
    "ts": "typescript",
}
#: SandboxFusion's languages that this engine cannot serve, each with why: what a client that
#: asks for one reads in the ``SandboxError``'s message.
SANDBOX_FUSION_NOT_SERVED: dict[str, str] = {
    "julia": "Debian 12 has no Julia, and its registry packages only download one from the web",
    "swift": "Debian 12 has no Swift compiler (its package 'swift' is OpenStack's object store)",
    "lean": "Lean 4 and the Mathlib its runs build against come only from GitHub's releases",
    "cuda": "CUDA programs need an NVIDIA GPU; this engine runs programs on CPUs only",
    "python_gpu": "python_gpu needs an NVIDIA GPU; this engine runs programs on CPUs only",
}
