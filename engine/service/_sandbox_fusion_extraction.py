"""The code in a model's completion, cut out as SandboxFusion cuts it (bytedance/SandboxFusion
469de08, ``sandbox/utils/extraction.py``), written anew: a dataset judged here must judge the
same program SandboxFusion would, or its rewards change.

Two procedures, both SandboxFusion's:

- ``default_extract_helper`` (CommonOJ, LiveCodeBench, HumanEval's free-form functions): every
  fenced block (priority 30), the heuristic blocks for Python, SQL and Bash (10) and every
  incomplete fence (20); of the blocks of the highest priority, the first in the asked language,
  else the first. A fence's language tag is mapped through SandboxFusion's aliases as its
  dictionary resolves them (``javascript`` is ``javascript``, not ``nodejs``; only ``js`` is).
- ``freeform_code`` (MBPP, HumanEval and MultiPL-E's stop-token form): complete fences, else
  incomplete ones, else the heuristic, never mixed; the first block or all joined; ``\\r``
  removed; then its cuts for Python, C++, Java and Go.

SandboxFusion's ``custom_extract_logic`` (Python it ``exec``s in its server) has no counterpart:
nothing a client sends runs outside a sandbox here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["CodeBlock", "default_extract_helper", "freeform_code", "remove_entry_points"]

_FENCED = re.compile(r"```([^\n]*)\n(.*?)\n\s*```", re.DOTALL | re.MULTILINE)
_INCOMPLETE = re.compile(r"```([^\n]*)\n(.*)", re.DOTALL | re.MULTILINE)
_PYTHON = re.compile(
    r"(?:^(?:import|from|#)[^\n]+\n)*^(?:def|class) [^\n]+\n(?:\s+[^\n]+\n)+", re.MULTILINE
)
_SQL = re.compile(r"^\s*(?:select|with\s[^\n]+as)[^;]*", re.MULTILINE | re.IGNORECASE)

#: SandboxFusion's ``language_to_aliases``; where a name is listed twice, as its dictionary
#: resolves it, the later entry.
_ALIASES: dict[str, tuple[str, ...]] = {
    "python": ("python", "Python", "py", "Python3", "python3", "PY"),
    "cpp": ("cpp", "c++", "C++", "Cpp", "CPP"),
    "nodejs": ("JS", "js"),
    "go": ("go", "Go"),
    "java": ("java", "Java"),
    "php": ("php", "PHP"),
    "csharp": ("csharp", "c#", "C#"),
    "bash": ("bash", "Bash", "BASH", "sh", "shell"),
    "typescript": ("typescript",),
    "rust": ("rust", "Rust", "rs"),
    "sql": ("sql", "SQL", "Sql"),
    "D": ("D", "d"),
    "julia": ("julia", "Julia", "jl"),
    "lua": ("lua", "Lua"),
    "perl": ("perl", "Perl", "PERL"),
    "R": ("R", "r"),
    "ruby": ("ruby", "Ruby"),
    "scala": ("scala", "Scala"),
    "kotlin": ("kotlin", "Kotlin"),
    "c": ("c", "C"),
    "html": ("html", "Html", "HTML"),
    "javascript": ("javascript", "Javascript", "JavaScript"),
    "verilog": ("verilog", "Verilog", "VERILOG"),
    "racket": ("racket",),
    "swift": ("swift",),
}
_LANGUAGE_OF_TAG = {alias: name for name, aliases in _ALIASES.items() for alias in aliases}
#: The tags of ``nodejs`` and ``javascript`` as SandboxFusion's unresolved dictionary lists them,
#: for ``exactly_match``: a block tagged with another language's alias is dropped.
_LISTED_ALIASES = {**_ALIASES, "nodejs": ("javascript", "Javascript", "JavaScript", "JS", "js")}

FENCED, INCOMPLETE, HEURISTIC = 30, 20, 10


@dataclass(frozen=True)
class CodeBlock:
    priority: int
    language: str
    code: str


def fenced_blocks(completion: str) -> list[CodeBlock]:
    return [
        CodeBlock(FENCED, _LANGUAGE_OF_TAG.get(tag.strip(), ""), code)
        for tag, code in _FENCED.findall(completion)
    ]


def incomplete_blocks(completion: str) -> list[CodeBlock]:
    return [
        CodeBlock(INCOMPLETE, _LANGUAGE_OF_TAG.get(tag.strip(), ""), code)
        for tag, code in _INCOMPLETE.findall(completion)
    ]


def heuristic_blocks(completion: str, language: str) -> list[CodeBlock]:
    """Python's functions and classes, SQL's queries, or the whole text as Bash, each read with
    the blank lines taken out; nothing for another language."""
    text = "\n".join(line for line in completion.split("\n") if line.strip() != "") + "\n"
    if language == "python":
        return [CodeBlock(HEURISTIC, "python", found) for found in _PYTHON.findall(text)]
    if language == "sql":
        return [CodeBlock(HEURISTIC, "sql", found) for found in _SQL.findall(text)]
    if language == "bash":
        return [CodeBlock(HEURISTIC, "bash", text)]
    return []


def default_extract_helper(completion: str, language: str | None) -> str:
    """The first block of the highest priority in ``language``, else of any; ``""`` if none."""
    target = language or ""
    blocks = (
        fenced_blocks(completion)
        + heuristic_blocks(completion, target)
        + incomplete_blocks(completion)
    )
    if not blocks:
        return ""
    best = max(block.priority for block in blocks)
    blocks = [block for block in blocks if block.priority == best]
    in_language = [block for block in blocks if block.language == target]
    return (in_language or blocks)[0].code


def freeform_code(
    completion: str,
    language: str,
    *,
    first_block_only: bool = False,
    is_fewshot_task: bool = False,
    exactly_match: bool = False,
    entry_point: str = "",
    declaration: str = "",
) -> tuple[str, str]:
    """SandboxFusion's ``extract_code_from_freeform_completion``: the code and how it was found
    (``fenced``, ``incomplete_fenced``, ``heuristic`` or ``empty``)."""
    found = "empty"
    blocks = fenced_blocks(completion)
    if is_fewshot_task:
        first = next((i for i, b in enumerate(blocks) if b.language == language), -1)
        if first == -1:
            first = next((i for i, b in enumerate(blocks) if b.language == ""), -1)
        if first != -1:
            blocks = blocks[: first + 1]
    if exactly_match and language:
        others = {
            a for name, aliases in _LISTED_ALIASES.items() if name != language for a in aliases
        }
        blocks = [block for block in blocks if block.language not in others]
    if blocks:
        found = "fenced"
    else:
        blocks = incomplete_blocks(completion)
        if blocks:
            found = "incomplete_fenced"
        else:
            blocks = heuristic_blocks(completion, language)
            if blocks:
                found = "heuristic"
    if first_block_only:
        code = blocks[0].code.replace("\r", "") if blocks else ""
    else:
        code = "\n\n".join(block.code for block in blocks).replace("\r", "")
    return _language_cuts(code, language, entry_point, declaration), found


def _language_cuts(code: str, language: str, entry_point: str, declaration: str) -> str:
    """What SandboxFusion cuts from or adds to free-form code, per language."""
    if language == "java":
        if "public class Main {\n" in code:
            code = code.replace("public class Main {\n", "class Solution {\n")
            code = code.replace("public static void main(String[] args)", "")
        if "class Solution" not in code:
            for line in code.split("\n"):
                if entry_point and entry_point in line:
                    code = code.replace(line, "class Solution {\n" + line) + "\n}"
                    break
        for line in declaration.split("\n"):
            if "import" in line:
                code = line + "\n" + code
    return remove_entry_points(code, language)


def remove_entry_points(code: str, language: str) -> str:
    """SandboxFusion's ``remove_entripoints``: a Python or C++ program's main part cut off, Go's
    ``package main`` taken out, and anything from ``# Example usage`` on."""
    if language == "python":
        main = 'if __name__ == "__main__":'
        if main in code:
            code = code[: code.index(main)].strip()
    elif language == "cpp":
        if "int main()" in code:
            code = code[: code.index("int main()")].strip()
    elif language == "go":
        code = code.replace("package main", "")
    if "# Example usage" in code:
        code = code[: code.index("# Example usage")].strip()
    return code
