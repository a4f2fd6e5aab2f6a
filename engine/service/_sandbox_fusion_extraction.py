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

__all__ = [
    "LISTED_ALIASES",
    "CodeBlock",
    "code_found",
    "default_extract_helper",
    "fenced_blocks",
    "freeform_code",
    "heuristic_blocks",
    "incomplete_blocks",
    "remove_entry_points",
]

FENCE = "```"
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
#: The tags of each language as SandboxFusion's dictionary lists them (``nodejs``'s with
#: ``javascript``'s), for ``exactly_match`` and for an untagged block's first line.
LISTED_ALIASES = {**_ALIASES, "nodejs": ("javascript", "Javascript", "JavaScript", "JS", "js")}

FENCED, INCOMPLETE, HEURISTIC = 30, 20, 10


@dataclass(frozen=True)
class CodeBlock:
    priority: int
    language: str
    code: str


def fenced_blocks(completion: str) -> list[CodeBlock]:
    """SandboxFusion's complete fences (its regular expression: three backticks, a tag line,
    the shortest content, a newline, any whitespace, three backticks), found in one pass: its
    expression takes time quadratic in the backticks of a completion that never closes its
    fences, on the server's event loop."""
    blocks: list[CodeBlock] = []
    at = completion.find(FENCE)
    while at != -1:
        tag_end = completion.find("\n", at + 3)
        if tag_end == -1:
            break  # no later fence has a tag line either
        closing = _closing(completion, tag_end + 1)
        if closing is None:
            break  # nor a closing: every later fence's would be this one's
        end, fence = closing
        tag = completion[at + 3 : tag_end]
        blocks.append(
            CodeBlock(FENCED, _LANGUAGE_OF_TAG.get(tag.strip(), ""), completion[tag_end + 1 : end])
        )
        at = completion.find(FENCE, fence + 3)
    return blocks


def _closing(text: str, start: int) -> tuple[int, int] | None:
    """Where the shortest content from ``start`` ends and its closing fence is: the first
    newline at or after ``start`` from which only whitespace leads to a fence."""
    fence = text.find(FENCE, start)
    while fence != -1:
        run = fence
        while run > start and text[run - 1].isspace():
            run -= 1
        newline = text.find("\n", run, fence)
        if newline != -1:
            return newline, fence
        fence = text.find(FENCE, fence + 1)
    return None


def incomplete_blocks(completion: str) -> list[CodeBlock]:
    """SandboxFusion's incomplete fence: the first fence with a tag line, to the end; in one
    pass, as ``fenced_blocks``."""
    at = completion.find(FENCE)
    tag_end = completion.find("\n", at + 3) if at != -1 else -1
    if tag_end == -1:
        return []
    tag = completion[at + 3 : tag_end]
    return [CodeBlock(INCOMPLETE, _LANGUAGE_OF_TAG.get(tag.strip(), ""), completion[tag_end + 1 :])]


def heuristic_blocks(completion: str, language: str) -> list[CodeBlock]:
    """Python's functions and classes, SQL's queries, or the whole text as Bash, each read with
    the blank lines taken out; nothing for another language."""
    lines = [line for line in completion.split("\n") if line.strip() != ""]
    text = "\n".join(lines) + "\n"
    if language == "python":
        return [CodeBlock(HEURISTIC, "python", found) for found in _python_blocks(lines)]
    if language == "sql":
        return [CodeBlock(HEURISTIC, "sql", found) for found in _SQL.findall(text)]
    if language == "bash":
        return [CodeBlock(HEURISTIC, "bash", text)]
    return []


def _python_blocks(lines: list[str]) -> list[str]:
    """What SandboxFusion's Python heuristic finds (its regular expression: any lines that
    start with ``import``, ``from`` or ``#``, then one that starts with ``def `` or ``class ``,
    then one or more that start with whitespace), line by line: its expression takes time
    quadratic in a run of import lines that no ``def`` follows."""
    found: list[str] = []
    run = 0  # where the import lines before the current one start
    index = 0
    while index < len(lines):
        line = lines[index]
        if any(line.startswith(p) and len(line) > len(p) for p in ("def ", "class ")):
            body = index + 1
            while body < len(lines) and _indented(lines[body]):
                body += 1
            if body > index + 1:
                found.append("".join(f"{part}\n" for part in lines[run:body]))
                index = run = body
                continue
        if not any(line.startswith(p) and len(line) > len(p) for p in ("import", "from", "#")):
            run = index + 1  # not ``^(?:import|from|#)[^\n]+``: the run before a def ends
        index += 1
    return found


def _indented(line: str) -> bool:
    """Whitespace then more, on a line that is not blank: it starts with whitespace."""
    return line[:1].isspace()


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
    blocks = fenced_blocks(completion)
    if is_fewshot_task:
        first = next((i for i, b in enumerate(blocks) if b.language == language), -1)
        if first == -1:
            first = next((i for i, b in enumerate(blocks) if b.language == ""), -1)
        if first != -1:
            blocks = blocks[: first + 1]
    if exactly_match and language:
        others = {
            a for name, aliases in LISTED_ALIASES.items() if name != language for a in aliases
        }
        blocks = [block for block in blocks if block.language not in others]
    code, found = code_found(blocks, completion, language, first_block_only)
    return _language_cuts(code, language, entry_point, declaration), found


def code_found(
    fenced: list[CodeBlock], completion: str, language: str, first_block_only: bool
) -> tuple[str, str]:
    """The code of the fenced blocks kept, else of the incomplete fence, else of the
    heuristic's blocks, never mixed: the first block or all joined, without ``\\r``; and which
    of the three it was (``empty`` for none). Both of SandboxFusion's free-form procedures end
    so."""
    blocks, found = fenced, "fenced"
    if not blocks:
        blocks, found = incomplete_blocks(completion), "incomplete_fenced"
    if not blocks:
        blocks, found = heuristic_blocks(completion, language), "heuristic"
    if not blocks:
        return "", "empty"
    if first_block_only:
        return blocks[0].code.replace("\r", ""), found
    return "\n\n".join(block.code for block in blocks).replace("\r", ""), found


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
