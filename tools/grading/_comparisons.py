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
  same lines once stripped, ignoring case, numbers within 1e-5 relative;
* ``evalplus``: EvalPlus (evalplus/evalplus 26d6d00, ``unsafe_execute`` in
  ``evalplus/eval/__init__.py``) on the values the two texts are as Python literals: equal,
  or within ``numpy.allclose`` (rtol 1e-7, atol the problem's, at least 1e-6 for floats); the
  one grader's rule that takes ``float_tolerance``, as its atol (``_evalplus`` says why).

Where a grader's code errs on an output (LiveCodeBench on a signalling NaN), the output is
wrong here.
"""

from __future__ import annotations

import ast
import cmath
import itertools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

__all__ = ["COMPARISONS", "DEFAULT_TOLERANCE", "compare_outputs", "default_tolerance"]

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


# -- EvalPlus: Python values rather than text --

_Number = int | float | complex  # bool is an int
_PYTHON_SPACE = " \t\n\r\f\v"
_EVALPLUS_RTOL = 1e-7
_EVALPLUS_FLOAT_ATOL = 1e-6


@dataclass(frozen=True)
class _Text:
    """An output that is no Python literal, kept as its text: equal only to the same text,
    and of a type no literal has, so that every step of EvalPlus's (``==``, its type check,
    ``allclose``) fails it against a value, as it fails a function that returned the wrong
    kind of thing."""

    text: str


class _FloatNames(ast.NodeTransformer):
    """``inf`` and ``nan`` as the floats ``repr`` prints them for: in Python's grammar they
    are names, which ``ast.literal_eval`` refuses, and a printed ``[1.0, inf]`` is a list of
    floats."""

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id in ("inf", "nan"):
            return ast.copy_location(ast.Constant(float(node.id)), node)
        return node


def _python_value(text: str) -> object:
    """What a printed value is: the Python literal the text reads as (surrounding whitespace
    is not part of it, as ``eval`` ignores it), else the text itself less the one newline
    ``print`` adds. Python's own limits stay: an int of more digits than it converts (4300
    by default), or nesting deeper than its parser takes (200), is text."""
    try:
        tree = ast.parse(text.strip(_PYTHON_SPACE), mode="eval")
        return ast.literal_eval(_FloatNames().visit(tree))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        # ValueError: not a literal (a name, a call), a NUL; TypeError: {[1]: 2}.
        return _Text(text.removesuffix("\n"))


def _is_floats(value: object) -> bool:
    """EvalPlus's ``is_floats``: a float, or a non-empty list or tuple of nothing but floats
    (a nested list of floats is not)."""
    if isinstance(value, float):
        return True
    return (
        isinstance(value, list | tuple)
        and bool(value)
        and all(isinstance(item, float) for item in value)
    )


def _array(value: object) -> tuple[tuple[int, ...], list[object]] | None:
    """The shape and elements of the array numpy makes of ``value`` (a list or tuple, at any
    depth, is an axis; anything else an element), or None where it cannot make one: a ragged
    list, which makes ``allclose`` raise."""
    if not isinstance(value, list | tuple):
        return (), [value]
    inner: tuple[int, ...] | None = None
    elements: list[object] = []
    for item in value:
        part = _array(item)
        if part is None or (inner is not None and part[0] != inner):
            return None
        inner = part[0]
        elements.extend(part[1])
    return (len(value), *(inner or ())), elements


def _in_machine_ints(item: object) -> bool:
    """Whether numpy stores an element as a number: a Python int must fit int64 or uint64,
    else the array is one of objects."""
    return isinstance(item, _Number) and not (type(item) is int and not -(2**63) <= item < 2**64)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's broadcast shape of two shapes, or None where numpy refuses them."""
    width = max(len(a), len(b))
    a, b = (1,) * (width - len(a)) + a, (1,) * (width - len(b)) + b
    shape = []
    for i, j in zip(a, b, strict=True):
        if i != j and 1 not in (i, j):
            return None
        shape.append(j if i == 1 else i)
    return tuple(shape)


def _strides(shape: tuple[int, ...], full: tuple[int, ...]) -> list[int]:
    """Steps through an array's elements for each axis of the shape it is broadcast to: 0
    along an axis it has once."""
    padded = (1,) * (len(full) - len(shape)) + shape
    strides, step = [], 1
    for size in reversed(padded):
        strides.append(0 if size == 1 else step)
        step *= size
    return strides[::-1]


def _inexact(value: object) -> float | complex:
    """An element as numpy computes with it. Raises where numpy's arithmetic does: TypeError
    for what is no number (None, a dict, a string among objects), OverflowError for an int
    past a float's range."""
    if isinstance(value, float | complex):
        return value
    if isinstance(value, int):
        return float(value)
    raise TypeError(f"numpy cannot subtract {type(value).__name__}")


def _fits_a_float(value: object) -> bool:
    """Whether numpy can take a Python value as it is given: an int must convert to a float,
    which numpy does to a Python int even where nothing is left to compare."""
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            return False
    return True


def _isclose(x: float | complex, y: float | complex, rtol: float, atol: float) -> bool:
    """numpy's ``isclose``: relative to the expected ``y``; an infinity only equal to itself;
    NaN never (``equal_nan`` is off in ``allclose``)."""
    return (abs(x - y) <= atol + rtol * abs(y) and cmath.isfinite(y)) or x == y


def _numpy_allclose(got: object, expected: object, rtol: float, atol: float) -> bool:
    """``numpy.allclose(got, expected, rtol=rtol, atol=atol)`` on Python values, as numpy 2
    computes it (2.4 read, and checked against on 200,000 random pairs), ``False`` where numpy
    raises, as EvalPlus fails a case that raises. Written out rather than imported: the rule
    is then numpy 2's whatever numpy a host has (1.x differs on ragged lists and huge ints),
    and judging a case does not load numpy into the worker.

    numpy's ways, kept: each element passes when ``|x - y| <= atol + rtol * |y|`` with ``y``
    finite, or when ``x == y``, ints and bools as floats. The expected value must be numbers
    numpy stores as such (a Python scalar, or an array without a string, None, or an int
    past int64 and uint64): otherwise numpy cannot take ``abs`` of it, or promote it. Shapes
    broadcast (``[[1.0]]`` against ``[[1.0, 1.0]]`` passes), and where they broadcast to no
    element at all nothing is computed, so ``[[]]``, and even ``[[None]]``, passes against
    ``[[1.0]]``; the output's elements are only refused by the arithmetic, but for strings
    and bytes alone, whose arrays numpy will not subtract from at all."""
    mine, theirs = _array(got), _array(expected)
    if mine is None or theirs is None:
        return False
    if not all(
        isinstance(item, _Number) if not theirs[0] else _in_machine_ints(item) for item in theirs[1]
    ):
        return False
    if any(isinstance(item, str | bytes) for item in mine[1]) and all(
        isinstance(item, str | bytes) or _in_machine_ints(item) for item in mine[1]
    ):
        return False  # an array of strings or bytes, rather than of objects
    shape = _broadcast(mine[0], theirs[0])
    if shape is None:
        return False
    if 0 in shape:
        # Nothing to compare, but a Python number is converted whatever the shapes.
        return all(_fits_a_float(value) for value in (got, expected))
    try:
        xs = [_inexact(item) for item in mine[1]]
        ys = [_inexact(item) for item in theirs[1]]
    except (OverflowError, TypeError):
        return False
    x_steps, y_steps = _strides(mine[0], shape), _strides(theirs[0], shape)
    for index in itertools.product(*map(range, shape)):
        x = xs[sum(i * step for i, step in zip(index, x_steps, strict=True))]
        y = ys[sum(i * step for i, step in zip(index, y_steps, strict=True))]
        if not _isclose(x, y, rtol, atol):
            return False
    return True


def _evalplus(got: str, expected: str, atol: float) -> bool:
    """EvalPlus's verdict on one output (``unsafe_execute``, evalplus/evalplus 26d6d00; the
    same since v0.3.1 but for ``find_zero``'s bookkeeping, and ``np.allclose`` since 5f4ebca,
    2024-04: before it, ``np.testing.assert_allclose``, under which NaN equalled NaN).

    EvalPlus compares the values a function returns, not text. Here each of the two texts is
    the value a program printed with ``repr`` (as ``print`` prints every value but a string):
    the Python literal it reads as (numbers, strings, bytes, lists, tuples, dicts, sets, bools,
    None, and ``inf``/``nan``, which ``repr`` prints for floats), or, where it reads as none
    (``007``, ``abc``, two lines of values, nothing at all), a text equal only to the same
    text, its one trailing newline aside. Then, as EvalPlus:

    * equal values pass (``==``: ``1`` is ``1.0``, ``True`` is ``1``, ``(1, 2)`` is not
      ``[1, 2]``, and NaN is not NaN);
    * else, with ``atol`` 0 and the expected value a float or a non-empty list or tuple of
      floats only, atol is 1e-6 (EvalPlus "enforces" it);
    * else, with atol 0, fail; with an atol, pass when both values are of the same type (an
      int is not a float here), lists or tuples as long, and ``numpy.allclose(got, expected,
      rtol=1e-7, atol=atol)`` holds, whatever the values (so ints, and nested lists, are
      compared within the tolerance too).

    ``atol`` is ``float_tolerance``: each EvalPlus problem has its own (``atol`` in HumanEval+
    and MBPP+: 0 for most, 1e-6 for HumanEval/2 and /4, 1e-4 for HumanEval/32 and nineteen of
    MBPP+'s), and this is the call's one way to give it; without one it is 0, EvalPlus's
    own default (``default_tolerance``).

    Not here: the problem-specific oracles (HumanEval's ``find_zero``, checked by its
    polynomial; MBPP+'s set-equal, not-None and other special tasks), which need the inputs;
    EvalPlus's raising atol to 1e-6 for the rest of a problem's inputs once one expected
    value is a float (each case is judged alone here); and a NaN equal to itself when both
    sides hold the very same float object, which two printed values never are.
    """
    out, exp = _python_value(got), _python_value(expected)
    if out == exp:
        return True
    if atol == 0 and _is_floats(exp):
        atol = _EVALPLUS_FLOAT_ATOL
    if atol == 0 or type(out) is not type(exp):
        return False
    if isinstance(out, list | tuple) and isinstance(exp, list | tuple) and len(out) != len(exp):
        return False
    return _numpy_allclose(out, exp, _EVALPLUS_RTOL, atol)


def default_tolerance(rule: str) -> float:
    """``float_tolerance`` when a call gives none: EvalPlus's atol is 0 unless a problem sets
    one; ``float``'s is ``DEFAULT_TOLERANCE``; the other rules have their own."""
    return 0.0 if rule == "evalplus" else DEFAULT_TOLERANCE


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
    "evalplus": _evalplus,
}
