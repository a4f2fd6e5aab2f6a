"""SandboxFusion's second procedure for the code in a free-form answer
(``extract_code_from_freeform_completion_v2`` and ``postprocess_completion_v2``, bytedance/
SandboxFusion 469de08, ``sandbox/utils/extraction.py``), written anew: MBXP's dataset reads
its completions with it.

What sets it apart from the first (``_sandbox_fusion_extraction.freeform_code``): an empty fence
pair (three backticks, a newline, three backticks) read as one fence first; an untagged block
whose first line names the language (Llama 3 writes them) tagged with it; ``exactly_match``
keeping only the blocks tagged with the language; and its own cuts per language: a Python
program's main part, C and C++'s ``int main()``, Java's class (or, with
``inner_function_only``, the first static method alone), C#'s first static method, Go's and
Kotlin's ``main`` function taken out, Scala's ``object`` body.

SandboxFusion finds the methods and bodies with regular expressions whose lazy ``.*`` take time
quadratic (C# and Java: cubic) in text that never closes them, on the server's loop; each is
found here in one pass, as the same expression would find it.
"""

from __future__ import annotations

import re

from a2e_engine.engine.service._sandbox_fusion_extraction import (
    LISTED_ALIASES,
    CodeBlock,
    code_found,
    fenced_blocks,
)

__all__ = ["freeform_code_v2"]

_MAIN_FUNCTION = {
    "go": re.compile(r"func\s+main\("),
    "kotlin": re.compile(r"fun\s+main\("),
}
_STATIC_METHOD = {
    "java": re.compile(r"(?:public|private|protected)\s+static\s"),
    "csharp": re.compile(r"(?:public|private|protected|internal)\s+static\s"),
}
_PARAMETERS_END = re.compile(r"\)\s*\{")
_SCALA_OBJECT = re.compile(r"object\s+\w+(?:\s+extends\s+\w+)?\s*\{")


def _tagged(blocks: list[CodeBlock], language: str) -> list[CodeBlock]:
    """SandboxFusion's ``adjust_code_block``: an untagged block whose first line is one of the
    language's tags takes the language, and loses that line."""
    if language not in LISTED_ALIASES:
        return blocks
    adjusted = []
    for block in blocks:
        lines = block.code.splitlines()
        if block.language == "" and lines and lines[0].strip() in LISTED_ALIASES[language]:
            block = CodeBlock(block.priority, language, "\n".join(lines[1:]))
        adjusted.append(block)
    return adjusted


def freeform_code_v2(
    completion: str,
    language: str,
    *,
    first_block_only: bool,
    exactly_match: bool,
    inner_function_only: bool,
    no_removal: bool,
) -> tuple[str, str]:
    """The code and how it was found (``fenced``, ``incomplete_fenced``, ``heuristic`` or
    ``empty``), as SandboxFusion's second procedure gives them."""
    text = completion.replace("```\n```", "```")
    blocks = _tagged(fenced_blocks(text), language)
    if exactly_match and language:
        tags = LISTED_ALIASES.get(language, ())
        blocks = [block for block in blocks if block.language in tags]
    code, found = code_found(blocks, text, language, first_block_only)
    code = _cuts(code, language, inner_function_only, no_removal, completion)
    if "# Example usage" in code:
        code = code[: code.index("# Example usage")].strip()
    return code, found


def _cuts(code: str, language: str, inner_only: bool, no_removal: bool, original: str) -> str:
    """``postprocess_completion_v2``: what it cuts from or keeps of the code, per language."""
    if language == "python":
        lines = code.splitlines()
        mains = [i for i, line in enumerate(lines) if "__name__" in line and "__main__" in line]
        return "\n".join(lines[: mains[0]] if mains else lines)
    if language in ("cpp", "c"):
        if "int main()" in code:
            code = code[: code.index("int main()")].strip()
    elif language == "java":
        if inner_only:
            body = _static_method(code, _STATIC_METHOD["java"])
            if body is not None:
                code = code[body[0] : body[1]]
        else:
            if "public class Main {\n" in code:
                code = code.replace("public class Main {\n", "class Solution {\n")
                code = code.replace("public static void main(String[] args)", "")
            code = code.replace("public class Solution {", "class Solution {")
    elif language in ("go", "kotlin"):
        if language == "go" and not no_removal:
            code = code.replace("package main", "")
        body = _function(code, _MAIN_FUNCTION[language])
        if body is not None:
            code = code[: body[0]] + code[body[1] :]
    elif language == "scala":
        header = _SCALA_OBJECT.search(code)
        last = code.rfind("}")
        if header is not None and last >= header.end():
            code = code[header.end() : last]
    elif language == "verilog":
        code = _verilog_module(code) or code or original
    elif language == "csharp" and inner_only:
        body = _static_method(code, _STATIC_METHOD["csharp"])
        if body is not None:
            code = code[body[0] : body[1]]
    return code


def _function(code: str, header: re.Pattern[str]) -> tuple[int, int] | None:
    """Where ``<header>(.*?)\\)\\s*{`` first matches, with its braces' body: the first header
    such that some ``)`` followed by ``{`` comes after it, and the first of those."""
    found = header.search(code)
    if found is None:
        return None
    end = _PARAMETERS_END.search(code, found.end())
    return _body(code, found.start(), end.end()) if end else None


def _static_method(code: str, prefix: re.Pattern[str]) -> tuple[int, int] | None:
    """``(public|...)\\s+(static\\s+)(.*?)\\((.*?)\\)\\s*{``: the first such prefix, the first
    ``(`` after it, then the first ``)`` followed by ``{`` after that (a later prefix could only
    find fewer), with its braces' body."""
    found = prefix.search(code)
    if found is None:
        return None
    opening = code.find("(", found.end())
    end = _PARAMETERS_END.search(code, opening + 1) if opening != -1 else None
    return _body(code, found.start(), end.end()) if end else None


def _body(code: str, start: int, after_brace: int) -> tuple[int, int] | None:
    """SandboxFusion's ``find_inner_function_body`` from a match: the text to the brace that
    closes the one the match ended with, counting every brace."""
    depth = 1
    for index in range(after_brace, len(code)):
        if code[index] == "{":
            depth += 1
        elif code[index] == "}":
            depth -= 1
            if depth == 0:
                return start, index + 1
    return None


def _verilog_module(code: str) -> str:
    """``module\\s+\\w+\\s+\\((.*?)\\);(.*?)endmodule``'s second part and ``endmodule``: from
    the first ``);`` after the first module header to the first ``endmodule`` after it."""
    header = re.search(r"module\s+\w+\s+\(", code)
    if header is None:
        return ""
    ports_end = code.find(");", header.end())
    end = code.find("endmodule", ports_end + 2) if ports_end != -1 else -1
    return code[ports_end + 2 : end] + "\nendmodule" if end != -1 else ""
