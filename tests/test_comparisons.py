"""Each grader's comparison rule gives that grader's verdicts (``tools.grading._comparisons``).

``VERDICTS`` is what each grader's own code said of each (program output, expected output)
pair, run unchanged at the commit named in ``tools/grading/_comparisons.py``: verl's SandboxFusion
reward (``_process_single_case``), verl's PRIME reward and APPS (``run_test``, on Python 3.10
as they need), TACO (``run_test``), LiveCodeBench (``grade_stdio``), CodeContests
(``OutputsMatch``, compiled against abseil), SandboxFusion's CommonOJ judge
(``check_stdio_test_case``'s comparison) and EvalPlus (``untrusted_check``, evalplus/evalplus
26d6d00, numpy 2.4.6, with atol 0 as most HumanEval+ problems have it). ``P``: passed, ``F``:
failed (LiveCodeBench's error on a signalling NaN is a failure here), ``-``: not run. The pairs
are the ones where graders part: trailing spaces, missing and extra newlines, ``\\r\\n``,
leading zeros, floats near and far, empty output, case, unicode, order.

EvalPlus compares Python values, not text: its verdicts here, in ``VERDICTS`` and in
``EVALPLUS_VERDICTS`` (its own corpus, each row with the atol given), are those of its
``untrusted_check`` run on ``def f(x): return x`` with the output's value as the input and the
expected one's as the expected output, each read from its text as ``tools.grading._comparisons`` reads
it (a Python literal, else the text itself). So they check EvalPlus's comparison on values, and
the reading of the texts is this module's own (its docstring says what it is and why).
"""

from __future__ import annotations

import math
import random
import warnings

import pytest

from a2e_engine.tools.grading._comparisons import (
    COMPARISONS,
    DEFAULT_TOLERANCE,
    _numpy_allclose,
    compare_outputs,
)
from a2e_engine.tools.grading._stdio_judge import judge_options

#: The graders whose rules take no tolerance of ours; then EvalPlus, whose atol is
#: ``float_tolerance`` (0 in ``VERDICTS``).
GRADERS = ("verl", "prime", "livecodebench", "apps", "taco", "codecontests", "sandboxfusion")
COLUMNS = (*GRADERS, "evalplus")

VERDICTS: list[tuple[str, str, str]] = [
    ("7\n", "7", "PPPPPPPP"),
    ("7", "7\n", "PPPPPPPP"),
    ("7 \n", "7", "FPPPPPPP"),
    ("  7\n", "7", "FPPPPPPP"),
    ("1 2\n", "1  2", "FFPPFPFF"),
    ("1\t2\n", "1 2", "FFPPFPFF"),
    ("1\n2\n", "1 2", "FFFFFPFF"),
    ("7\r\n", "7", "FPPPPPPP"),
    ("1\r\n2\r\n", "1\n2\n", "FPPPPPPF"),
    ("007\n", "7", "FFPPFPPF"),
    ("1.0\n", "1", "FPPPFPPP"),
    ("0.1000000001\n", "0.1", "FPFPFPPP"),
    ("0.10001\n", "0.1", "FFFPFPFF"),
    ("1.0001\n", "1", "FFFPFFFF"),
    ("1e-9\n", "0", "FPFPFPFF"),
    ("10000000000000001\n", "10000000000000000", "FFFPFPPF"),
    ("", "", "PPPPPPPP"),
    ("", "0", "FFFFFFFF"),
    ("\n", "", "PPPPPPPP"),
    ("\n\n\n", "\n", "PPPPPPPF"),
    ("héllo wörld\n", "héllo wörld", "PPPPPPPP"),
    ("Ä\n", "ä", "FFFFFFPF"),
    ("1\n\n2\n", "1\n2", "FPFPPPFF"),
    ("1\n2\n", "1\n\n2", "FPFPPPFF"),
    ("1 2 3\n", "1 2 3\n\n\n", "PPPPPPPF"),
    ("YES\n", "yes", "FFFFFPPF"),
    ("2 1\n", "1 2", "FFFPFFFF"),
    ("2\n1\n", "1\n2", "FFFPPFFF"),
    ("1 1 2\n", "2 1", "FFFPFFFF"),
    ("12\n", "1 2", "FFFFPFFF"),
    ("7", "7.0000001", "FPFPPPPF"),
    ("nan\n", "nan", "PPPPPPPF"),
    ("inf\n", "Infinity", "FPPPFFFF"),
    ("1,5\n", "1.5", "FFFFFFFF"),
    ("a\x0cb\n", "a b", "FFFFFFFF"),
    ("1 2\n3\n", "1\n2 3", "FFFFFPFF"),
    ("a  b\n", "a b", "FFFPFPFF"),
    ("a\tb\n", "a b", "FFFPFPFF"),
    ("1.0 2.0\n", "1 2", "FFPPFPFF"),
    ("1.0\n2.0\n", "1\n2", "FPPPFPPF"),
    ("1.50\n", "1.5", "FPPPFPPP"),
    ("+7\n", "7", "FPPPFPPP"),
    ("-0\n", "0", "FPPPFPPP"),
    ("1.00001\n", "1", "FPFPFFFF"),
    ("1.000009\n", "1", "FPFPFPPF"),
    ("2147483648\n", "2147483648.000001", "FPFPFPPF"),
    ("7\n\n", "7", "PPPPPPPP"),
    ("1\r2\n", "1\n2", "FPFPPPFF"),
    ("0.30000000000000004\n", "0.3", "FPFPFPPP"),
    ("1e5\n", "100000", "FPPPFPPP"),
    ("1_000\n", "1000", "FPPPFFPP"),
    ("nan\n", "NaN", "FFFFFPPF"),
    ("\u0667\n", "7", "FFPPPFPF"),
    ("sNaN\n", "1", "FFFFFFFF"),
    ("0.5\n", ".5", "FPPPFPPP"),
    ("1 2\n", "1 2 3", "FFFFFFFF"),
    ("NO\n", "No", "FFFFFPPF"),
    ("007\n1.5\n", "7\n1.5", "FPPPFPPF"),
    ("10000000000000001\n0.5\n", "10000000000000000\n0.5", "FPFPFPPF"),
    ("0.1004\n", "0.1", "FFFPFFFF"),
    ("0.1006\n", "0.1", "FFFFFFFF"),
    ("0.1004\n", "0.1006", "FFFFFFFF"),
    ("1\n1\n2\n", "1\n2", "FFFPPFFF"),
    ("1\n2\n", "1\n \n2", "FFFFFPFF"),
    ("x 1.0004\n", "1 x", "FFFFFFFF"),
    ("10 \n20\n", "10\n20", "FPPPFPPF"),
    ("1 \n2\n", "1\n2", "FPPPPPPF"),
    ("0.3333333\n", "0.333333333", "------PP"),
    ("YES  \n", "yes", "------PF"),
    ("1e-12\n", "0", "------FF"),
    ("0\n", "1e-12", "------FF"),
    ("inf\n", "inf", "------PP"),
    ("INF\n", "inf", "------PF"),
]


#: EvalPlus's own corpus: (program output, expected output, atol, what EvalPlus said).
EVALPLUS_VERDICTS: list[tuple[str, str, float, str]] = [
    # ints, and ints against floats: == first (1 is 1.0), then the type must match
    ("7\n", "7", 0, "P"),
    ("8\n", "7", 0, "F"),
    ("1.0\n", "1", 0, "P"),
    ("1\n", "1.0", 0, "P"),
    ("1\n", "1.5", 0, "F"),
    ("1.0\n", "1", 1e-06, "P"),
    ("1.0000001\n", "1", 1e-06, "F"),
    # an atol puts every type through allclose, ints too; a huge int in a list is an object
    ("10000001\n", "10000000", 0, "F"),
    ("10000001\n", "10000000", 1e-06, "P"),
    ("1000001\n", "1000000", 1e-06, "F"),
    ("100000000000000000000000000001\n", "100000000000000000000000000000", 0, "F"),
    ("100000000000000000000000000001\n", "100000000000000000000000000000", 1e-06, "P"),
    ("[100000000000000000000000000001]\n", "[100000000000000000000000000000]", 1e-06, "F"),
    # floats: atol 0 becomes 1e-6, rtol 1e-7 relative to the expected value
    ("0.30000000000000004\n", "0.3", 0, "P"),
    ("1.0000001\n", "1.0", 0, "P"),
    ("1.000002\n", "1.0", 0, "F"),
    ("1000000.1\n", "1000000.0", 0, "P"),
    ("1000000.2\n", "1000000.0", 0, "F"),
    ("0\n", "1e-07", 0, "F"),
    ("0.0\n", "1e-07", 0, "P"),
    # a problem's own atol (MBPP+'s 1e-4)
    ("1.00005\n", "1.0", 0.0001, "P"),
    ("1.0002\n", "1.0", 0.0001, "F"),
    ("[1, 3]\n", "[1, 2]", 1.0, "P"),
    # -0.0 is 0.0, and 1e5 the float 100000.0, which == the int
    ("-0.0\n", "0.0", 0, "P"),
    ("1e5\n", "100000", 0, "P"),
    # nan is never close (np.allclose, equal_nan off), not even with an atol; inf only to itself
    ("nan\n", "nan", 0, "F"),
    ("[nan]\n", "[nan]", 0, "F"),
    ("nan\n", "nan", 1.0, "F"),
    ("inf\n", "inf", 0, "P"),
    ("-inf\n", "inf", 0, "F"),
    ("1e309\n", "inf", 0, "P"),
    ("inf\n", "1e308", 0, "F"),
    ("1e308\n", "inf", 0, "F"),
    ("[1.0, inf]\n", "[1.0000001, inf]", 0, "P"),
    # lists of floats; a list that is not all floats, or nested, needs an atol or ==
    ("[1.0, 2.0000001]\n", "[1.0, 2.0]", 0, "P"),
    ("[1.0, 2.0]\n", "[1.0, 2.0000001]", 0, "P"),
    ("[1.0, 2.1]\n", "[1.0, 2.0]", 0, "F"),
    ("[1.0, 2.0]\n", "[1.0, 2.0, 3.0]", 0, "F"),
    ("[1, 2]\n", "[1.0, 2.0]", 0, "P"),
    ("[1, 2]\n", "[1.0, 2.0000001]", 0, "P"),
    ("[1, 2.0000001]\n", "[1, 2.0]", 0, "F"),
    ("[1, 2.0000001]\n", "[1, 2.0]", 1e-06, "P"),
    ("[[1.0, 2.0000001]]\n", "[[1.0, 2.0]]", 0, "F"),
    ("[[1.0, 2.0000001]]\n", "[[1.0, 2.0]]", 1e-06, "P"),
    ("[[1.0]]\n", "[[1.0, 1.0]]", 1e-06, "P"),
    ("[[]]\n", "[[1.0]]", 1e-06, "P"),
    ("[[1.0], [2.0, 3.0]]\n", "[[1.0], [2.0, 3.0000001]]", 1e-06, "F"),
    # ragged lists, strings and None fail allclose; == still takes them
    ("[1.0, 'a']\n", "[1.0, 'b']", 1e-06, "F"),
    ("[1.0000001, None]\n", "[1.0, None]", 1e-06, "F"),
    ("[1.0, None]\n", "[1.0, None]", 0, "P"),
    # tuples and lists: == tells them apart, so does the type check; numpy not, within
    ("(1, 2)\n", "[1, 2]", 0, "F"),
    ("(1.0, 2.0)\n", "[1.0, 2.0]", 0, "F"),
    ("(1.0, 2.0000001)\n", "(1.0, 2.0)", 0, "P"),
    ("[(1.0, 2.0000001)]\n", "[[1.0, 2.0]]", 1e-06, "P"),
    ("[(1, 2)]\n", "[[1, 2]]", 0, "F"),
    # bools are ints to ==; to allclose too, but the type check parts them
    ("True\n", "1", 0, "P"),
    ("1\n", "True", 0, "P"),
    ("0\n", "False", 0, "P"),
    ("True\n", "False", 0, "F"),
    ("True\n", "2", 1e-06, "F"),
    ("[True, False]\n", "[1, 0]", 0, "P"),
    ("true\n", "True", 0, "F"),
    # strings: the value, whichever quotes; a bare word is text, equal only to itself
    ("'abc'\n", "'abc'", 0, "P"),
    ('"abc"\n', "'abc'", 0, "P"),
    ("abc\n", "'abc'", 0, "F"),
    ("abc\n", "abc", 0, "P"),
    ("'abc '\n", "'abc'", 0, "F"),
    ("'a'\n", "'b'", 1e-06, "F"),
    ("b'a'\n", "'a'", 0, "F"),
    # None, empty output, whitespace: around a literal it is nothing, after text one newline
    ("None\n", "None", 0, "P"),
    ("\n", "None", 0, "F"),
    ("None\n", "0", 0, "F"),
    ("", "", 0, "P"),
    ("\n", "", 0, "P"),
    ("", "0", 0, "F"),
    ("[1, 2]\n\n", "[1, 2]", 0, "P"),
    ("[1,2]", "[1, 2]\n", 0, "P"),
    ("  7  \n", "7", 0, "P"),
    ("abc\n\n", "abc", 0, "F"),
    ("abc \n", "abc", 0, "F"),
    # unicode: the characters of the string, \x escapes read, no normalisation
    ("'héllo wörld'\n", "'héllo wörld'", 0, "P"),
    ("héllo wörld\n", "héllo wörld", 0, "P"),
    ("'\\xe9'\n", "'é'", 0, "P"),
    ("'e\u0301'\n", "'\u00e9'", 0, "F"),
    ("\u0667\n", "7", 0, "F"),
    # not literals: compared as text; literals as Python reads them (1_000, 0x10, sets, dicts)
    ("007\n", "7", 0, "F"),
    ("1 2\n", "1 2", 0, "P"),
    ("1\n2\n", "1\n2", 0, "P"),
    ("[1, 2]\n", "[1, 2", 0, "F"),
    ("array([1.])\n", "[1.0]", 0, "F"),
    ("{1: 'a', 2: 'b'}\n", "{2: 'b', 1: 'a'}", 0, "P"),
    ("{1, 2}\n", "{2, 1}", 0, "P"),
    ("{'a': 1.0000001}\n", "{'a': 1.0}", 1e-06, "F"),
    ("1_000\n", "1000", 0, "P"),
    ("0x10\n", "16", 0, "P"),
    ("(1+2j)\n", "(1+2j)", 0, "P"),
    ("(1+2.0000001j)\n", "(1+2j)", 1e-06, "P"),
]


@pytest.mark.parametrize("grader", COLUMNS)
def test_each_graders_rule_gives_its_verdicts(grader: str) -> None:
    column = COLUMNS.index(grader)
    wrong = []
    for got, expected, verdicts in VERDICTS:
        wanted = verdicts[column]
        if wanted == "-":
            continue
        mine = "P" if compare_outputs(got, expected, grader, 0.0) else "F"
        if mine != wanted:
            wrong.append((got, expected, wanted))
    assert not wrong, wrong
    assert sum(v[column] != "-" for _, _, v in VERDICTS) >= 60 or grader == "sandboxfusion"


def test_the_graders_part_on_the_corpus() -> None:
    """No two graders' rules are the same on it: each mode is a rule of its own."""
    columns = {grader: "".join(v[i] for _, _, v in VERDICTS) for i, grader in enumerate(COLUMNS)}
    assert len(set(columns.values())) == len(COLUMNS)
    assert set(COLUMNS) <= set(COMPARISONS)


def test_a_graders_rule_takes_no_tolerance_of_ours() -> None:
    """Their tolerances are their own: ``float_tolerance`` changes no verdict of theirs
    (EvalPlus aside: each of its problems has an atol, which is how a call gives it)."""
    for grader in GRADERS:
        for got, expected, _ in VERDICTS:
            strict = compare_outputs(got, expected, grader, 0.0)
            assert compare_outputs(got, expected, grader, 1e9) == strict, (grader, got, expected)


@pytest.mark.parametrize(("got", "expected", "atol", "wanted"), EVALPLUS_VERDICTS)
def test_evalplus_gives_its_verdicts(got: str, expected: str, atol: float, wanted: str) -> None:
    assert compare_outputs(got, expected, "evalplus", atol) is (wanted == "P")


def test_evalplus_takes_float_tolerance_as_its_atol() -> None:
    """0 is EvalPlus's own default, 1e-6 for floats; an atol is for every type."""
    assert not compare_outputs("1.00001\n", "1.0", "evalplus", 0.0)
    assert compare_outputs("1.00001\n", "1.0", "evalplus", 1e-4)
    assert not compare_outputs("[1, 3]\n", "[1, 2]", "evalplus", 0.0)
    assert compare_outputs("[1, 3]\n", "[1, 2]", "evalplus", 1.0)
    # A code_eval call that gives none gets EvalPlus's 0, not the float rule's 1e-6.
    assert judge_options({"compare": "evalplus"}, 1).tolerance == 0
    assert judge_options({"compare": "float"}, 1).tolerance == DEFAULT_TOLERANCE


def test_evalplus_allclose_is_numpys() -> None:
    """The hand-written ``allclose`` against numpy 2's (a dependency of the engine's, but not
    one the comparison loads), on values that reach it: numbers, nested lists and tuples,
    broadcasting, NaN and infinities, huge ints, and what numpy cannot compute with."""
    np = pytest.importorskip("numpy")
    if int(np.__version__.split(".")[0]) < 2:
        pytest.skip("numpy 1.x decides ragged lists and huge ints otherwise")
    rng = random.Random(0)
    scalars: list[object] = [
        *(0, 1, -1, 10**7, 10**7 + 1, 2**63, -(2**63) - 1, 2**64, 10**400, True, False),
        *(0.0, -0.0, 1.0, 1.0000001, 1.000002, 1e308, math.inf, -math.inf, math.nan),
        *(1 + 2j, None, "a", b"a", (), [], {}),
    ]

    def value(depth: int = 0) -> object:
        if depth < 3 and rng.random() < 0.45:
            first = value(depth + 1)
            items = [near(first) if rng.random() < 0.8 else value(depth + 1) for _ in range(3)]
            return rng.choice((list, tuple))(items[: rng.choice((0, 1, 2, 3))])
        return rng.choice(scalars)

    def near(item: object) -> object:
        if isinstance(item, list | tuple):
            return type(item)(near(part) for part in item)
        if isinstance(item, float) and math.isfinite(item) and rng.random() < 0.6:
            return item + rng.choice((1e-7, -1e-7, 1e-6, 0.5)) * max(1.0, abs(item))
        return item if rng.random() < 0.8 else rng.choice(scalars)

    def numpy_says(got: object, expected: object, atol: float) -> bool:
        try:
            return bool(np.allclose(got, expected, rtol=1e-7, atol=atol))
        except Exception:  # EvalPlus fails a case whose comparison raises
            return False

    wrong = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(20000):
            expected = value()
            got = near(expected) if rng.random() < 0.8 else value()
            atol = rng.choice((1e-6, 1e-4, 1.0))
            if numpy_says(got, expected, atol) != _numpy_allclose(got, expected, 1e-7, atol):
                wrong.append((got, expected, atol))
    assert not wrong, wrong[:10]
