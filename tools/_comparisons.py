"""How an output is compared with the expected one: the engine's own rules, and the rules of
the graders whose verdicts a caller must get exactly (an RL reward moved onto the engine must
not change).

The engine's rules:

* ``whitespace`` (the default, as most judges do): the same tokens, however they are spaced
  or broken into lines;
* ``lines``: the same lines, each with its trailing whitespace dropped, and trailing empty lines
  dropped (``\\r\\n`` counts as ``\\n``);
* ``exact``: the same characters;
* ``float``: the same tokens, where two that are both decimal numbers may differ by
  ``float_tolerance``, absolute or relative to the expected one, whichever is larger.

The graders' rules, each as that grader's own code decides a stdin/stdout case (read at the
commit named; docs/grading.md has each rule in full and tests/test_comparisons.py the verdicts
their code gave on a corpus of tricky outputs):

* ``verl``: verl's SandboxFusion code reward (``sandbox_fusion/utils.py``, volcengine/verl
  b178a3c): the texts equal once trailing ``\\n`` are dropped, nothing else forgiven;
* ``prime``: verl's PRIME code reward (``prime_code/testing_util.py``, the same commit): the
  cascade it inherits from APPS, with numbers compared only when not every line is digits;
* ``apps``: APPS (hendrycks/apps 362aedc, ``eval/testing_util.py``): the same cascade, numbers
  always, then lines as unordered sets of token sets, then with numbers rounded to 3 places;
* ``taco``: TACO (FlagOpen/TACO 245eba3, ``metrics/testing_util.py``): the texts equal once
  stripped, plus what APPS's later steps make of a text rather than of a list of lines;
* ``livecodebench``: LiveCodeBench (28fef95, ``grade_stdio``): the same lines once stripped,
  a line that differs equal when its tokens are the same ``Decimal`` numbers;
* ``codecontests``: DeepMind's CodeContests (fa7a4f8, ``OutputsMatch``): the same ASCII
  tokens in any lines, ignoring ASCII case, numbers within 1e-5 absolute;
* ``sandboxfusion``: SandboxFusion's CommonOJ judge (469de08, ``check_stdio_test_case``): the
  same lines once stripped, ignoring case, numbers within 1e-5 relative.

Where a grader's code errs on an output (LiveCodeBench on a signalling NaN), the output is
wrong here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation

__all__ = ["COMPARISONS", "DEFAULT_TOLERANCE", "compare_outputs"]

DEFAULT_TOLERANCE = 1e-6

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def compare_outputs(got: str, expected: str, rule: str, tolerance: float) -> bool:
    return COMPARISONS[rule](got, expected, tolerance)


# -- the engine's rules --


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _numbers_close(got: str, expected: str, tolerance: float) -> bool:
    if got == expected:
        return True
    if not (_NUMBER.fullmatch(got) and _NUMBER.fullmatch(expected)):
        return False
    a, b = float(got), float(expected)
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    return abs(a - b) <= tolerance * max(1.0, abs(b))


def _same_floats(got: str, expected: str, tolerance: float) -> bool:
    mine, theirs = got.split(), expected.split()
    return len(mine) == len(theirs) and all(
        _numbers_close(a, b, tolerance) for a, b in zip(mine, theirs, strict=True)
    )


# -- the graders' rules --


def _allclose(got: list[float], expected: list[float], rtol: float, atol: float) -> bool:
    """numpy's ``allclose`` (its defaults: rtol 1e-5, atol 1e-8), which the Python graders
    call: relative to the expected value; an infinity only equal to itself; NaN never."""

    def close(a: float, b: float) -> bool:
        if math.isnan(a) or math.isnan(b):
            return False
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= atol + rtol * abs(b)

    return len(got) == len(expected) and all(map(close, got, expected))


def _floats(texts: list[str]) -> list[float] | None:
    try:
        return [float(text) for text in texts]
    except (ValueError, OverflowError):
        return None


def _verl(got: str, expected: str) -> bool:
    return got.rstrip("\n") == expected.rstrip("\n")


def _apps_lines(got: str, expected: str) -> tuple[bool, list[str], list[str]]:
    """The first steps APPS (and PRIME after it) take with a program's output, as the lines
    its capture kept (``splitlines``): whether one passed; else the non-empty output lines and
    the expected ones, stripped, for the steps after."""
    lines = got.splitlines()
    if "\n".join(lines).strip() == expected.strip():
        return True, [], []
    if "\n".join(line.strip() for line in lines).strip() == expected.strip():
        return True, [], []
    wanted = [line.strip() for line in expected.split("\n") if line]
    if lines == [expected] or lines == wanted:
        return True, [], []
    kept = [line for line in lines if line]
    return kept == wanted, kept, wanted


def _prime(got: str, expected: str) -> bool:
    passed, lines, wanted = _apps_lines(got, expected)
    if passed:
        return True
    if len(lines) != len(wanted) or all(
        a.isdigit() and b.isdigit() for a, b in zip(lines, wanted, strict=True)
    ):
        return False
    mine, theirs = _floats(lines), _floats(wanted)
    return mine is not None and theirs is not None and _allclose(mine, theirs, 1e-5, 1e-8)


def _token_sets(lines: list[str]) -> set[frozenset[str]]:
    return {frozenset(line.split()) for line in lines}


def _rounded_sets(lines: list[list[str]]) -> set[frozenset[float]] | None:
    try:
        return {frozenset(round(float(token), 3) for token in line) for line in lines}
    except (ValueError, OverflowError):
        return None


def _apps(got: str, expected: str) -> bool:
    passed, lines, wanted = _apps_lines(got, expected)
    if passed:
        return True
    mine, theirs = _floats(lines), _floats(wanted)
    if mine is not None and theirs is not None and _allclose(mine, theirs, 1e-5, 1e-8):
        return True
    lines = [line for line in lines if line.split()]
    if _token_sets(lines) == _token_sets(wanted):
        return True
    rounded = _rounded_sets([line.split() for line in lines])
    return rounded is not None and rounded == _rounded_sets([w.split() for w in wanted])


def _taco(got: str, expected: str) -> bool:
    # TACO reads the program's output as text (universal newlines) and runs APPS's steps on
    # that text, not on a list of its lines: where APPS walks lines, it walks characters.
    text = got.replace("\r\n", "\n").replace("\r", "\n")
    if text.strip() == expected.strip():
        return True
    wanted = [line.strip() for line in expected.split("\n") if line]
    characters = list(text)
    if len(characters) == len(wanted):
        mine, theirs = _floats(characters), _floats(wanted)
        if mine is not None and theirs is not None and _allclose(mine, theirs, 1e-5, 1e-8):
            return True
    tokens = set(text.split())
    if {frozenset(token) for token in tokens} == _token_sets(wanted):
        return True
    rounded = _rounded_sets([list(token) for token in tokens])
    return rounded is not None and rounded == _rounded_sets([w.split() for w in wanted])


def _livecodebench(got: str, expected: str) -> bool:
    mine = [line.strip() for line in got.strip().split("\n")]
    theirs = [line.strip() for line in expected.strip().split("\n")]
    if len(mine) != len(theirs):
        return False
    for a, b in zip(mine, theirs, strict=True):
        if a == b:
            continue
        try:
            if [Decimal(t) for t in a.split()] != [Decimal(t) for t in b.split()]:
                return False
        except (InvalidOperation, ValueError):
            return False
    return True


_ASCII_SPACE = re.compile(r"[ \n\t\r\v]+")
_INT32 = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+[ \t\n\v\f\r]*")


def _ascii_lower(token: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in token)


def _contest_number(token: str) -> float | None:
    """abseil's ``SimpleAtoi`` (an int32) or ``SimpleAtod``: ASCII only, no ``_``."""
    if not token.isascii() or "_" in token:
        return None
    token = token.strip(" \t\n\v\f\r")
    # An int32 has at most 10 digits (and Python refuses int() of thousands of them).
    if len(token) <= 11 and _INT32.fullmatch(token):
        value = int(token)
        if -(2**31) <= value < 2**31:
            return float(value)
    unsigned = token.removeprefix("+")
    if not unsigned or (unsigned[0] in "+-" and token != unsigned):
        return None
    try:
        if unsigned.lower().startswith(("0x", "-0x")):
            return float.fromhex(unsigned)
        return float(unsigned)
    except (ValueError, OverflowError):
        return None


def _codecontests(got: str, expected: str) -> bool:
    mine = [_ascii_lower(t) for t in _ASCII_SPACE.split(got) if t]
    theirs = [_ascii_lower(t) for t in _ASCII_SPACE.split(expected) if t]
    if mine == theirs:
        return True
    if len(mine) != len(theirs):
        return False
    for a, b in zip(mine, theirs, strict=True):
        if a == b:
            continue
        x, y = _contest_number(a), _contest_number(b)
        if x is None or y is None or not abs(x - y) < 1e-5:
            return False
    return True


def _sandboxfusion(got: str, expected: str) -> bool:
    mine, theirs = got.strip().split("\n"), expected.strip().split("\n")
    if len(mine) != len(theirs):
        return False
    for a, b in zip(mine, theirs, strict=True):
        a, b = a.lower().strip(), b.lower().strip()
        if a == b:
            continue
        x, y = _floats([a]), _floats([b])
        if x is None or y is None or not abs(x[0] - y[0]) / max(abs(y[0]), 1e-10) < 1e-5:
            return False
    return True


def _ignoring_tolerance(rule: Callable[[str, str], bool]) -> Callable[[str, str, float], bool]:
    """A grader's rule, whose tolerance is its own."""
    return lambda got, expected, _tolerance: rule(got, expected)


COMPARISONS: dict[str, Callable[[str, str, float], bool]] = {
    "whitespace": lambda got, expected, _: got.split() == expected.split(),
    "lines": lambda got, expected, _: _lines(got) == _lines(expected),
    "exact": lambda got, expected, _: got == expected,
    "float": _same_floats,
    "verl": _ignoring_tolerance(_verl),
    "prime": _ignoring_tolerance(_prime),
    "apps": _ignoring_tolerance(_apps),
    "taco": _ignoring_tolerance(_taco),
    "livecodebench": _ignoring_tolerance(_livecodebench),
    "codecontests": _ignoring_tolerance(_codecontests),
    "sandboxfusion": _ignoring_tolerance(_sandboxfusion),
}
