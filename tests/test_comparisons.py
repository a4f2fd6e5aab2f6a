"""Each grader's comparison rule gives that grader's verdicts (``tools._comparisons``).

``VERDICTS`` is what each grader's own code said of each (program output, expected output)
pair, run unchanged at the commit named in ``tools/_comparisons.py``: verl's SandboxFusion
reward (``_process_single_case``), verl's PRIME reward and APPS (``run_test``, on Python 3.10
as they need), TACO (``run_test``), LiveCodeBench (``grade_stdio``), CodeContests
(``OutputsMatch``, compiled against abseil) and SandboxFusion's CommonOJ judge
(``check_stdio_test_case``'s comparison). ``P``: passed, ``F``: failed (LiveCodeBench's error on
a signalling NaN is a failure here), ``-``: not run. The pairs are the ones where graders part:
trailing spaces, missing and extra newlines, ``\\r\\n``, leading zeros, floats near and far,
empty output, case, unicode, order.
"""

from __future__ import annotations

import pytest

from a2e_engine.tools._comparisons import COMPARISONS, compare_outputs

GRADERS = ("verl", "prime", "livecodebench", "apps", "taco", "codecontests", "sandboxfusion")

VERDICTS: list[tuple[str, str, str]] = [
    ("7\n", "7", "PPPPPPP"),
    ("7", "7\n", "PPPPPPP"),
    ("7 \n", "7", "FPPPPPP"),
    ("  7\n", "7", "FPPPPPP"),
    ("1 2\n", "1  2", "FFPPFPF"),
    ("1\t2\n", "1 2", "FFPPFPF"),
    ("1\n2\n", "1 2", "FFFFFPF"),
    ("7\r\n", "7", "FPPPPPP"),
    ("1\r\n2\r\n", "1\n2\n", "FPPPPPP"),
    ("007\n", "7", "FFPPFPP"),
    ("1.0\n", "1", "FPPPFPP"),
    ("0.1000000001\n", "0.1", "FPFPFPP"),
    ("0.10001\n", "0.1", "FFFPFPF"),
    ("1.0001\n", "1", "FFFPFFF"),
    ("1e-9\n", "0", "FPFPFPF"),
    ("10000000000000001\n", "10000000000000000", "FFFPFPP"),
    ("", "", "PPPPPPP"),
    ("", "0", "FFFFFFF"),
    ("\n", "", "PPPPPPP"),
    ("\n\n\n", "\n", "PPPPPPP"),
    ("héllo wörld\n", "héllo wörld", "PPPPPPP"),
    ("Ä\n", "ä", "FFFFFFP"),
    ("1\n\n2\n", "1\n2", "FPFPPPF"),
    ("1\n2\n", "1\n\n2", "FPFPPPF"),
    ("1 2 3\n", "1 2 3\n\n\n", "PPPPPPP"),
    ("YES\n", "yes", "FFFFFPP"),
    ("2 1\n", "1 2", "FFFPFFF"),
    ("2\n1\n", "1\n2", "FFFPPFF"),
    ("1 1 2\n", "2 1", "FFFPFFF"),
    ("12\n", "1 2", "FFFFPFF"),
    ("7", "7.0000001", "FPFPPPP"),
    ("nan\n", "nan", "PPPPPPP"),
    ("inf\n", "Infinity", "FPPPFFF"),
    ("1,5\n", "1.5", "FFFFFFF"),
    ("a\x0cb\n", "a b", "FFFFFFF"),
    ("1 2\n3\n", "1\n2 3", "FFFFFPF"),
    ("a  b\n", "a b", "FFFPFPF"),
    ("a\tb\n", "a b", "FFFPFPF"),
    ("1.0 2.0\n", "1 2", "FFPPFPF"),
    ("1.0\n2.0\n", "1\n2", "FPPPFPP"),
    ("1.50\n", "1.5", "FPPPFPP"),
    ("+7\n", "7", "FPPPFPP"),
    ("-0\n", "0", "FPPPFPP"),
    ("1.00001\n", "1", "FPFPFFF"),
    ("1.000009\n", "1", "FPFPFPP"),
    ("2147483648\n", "2147483648.000001", "FPFPFPP"),
    ("7\n\n", "7", "PPPPPPP"),
    ("1\r2\n", "1\n2", "FPFPPPF"),
    ("0.30000000000000004\n", "0.3", "FPFPFPP"),
    ("1e5\n", "100000", "FPPPFPP"),
    ("1_000\n", "1000", "FPPPFFP"),
    ("nan\n", "NaN", "FFFFFPP"),
    ("\u0667\n", "7", "FFPPPFP"),
    ("sNaN\n", "1", "FFFFFFF"),
    ("0.5\n", ".5", "FPPPFPP"),
    ("1 2\n", "1 2 3", "FFFFFFF"),
    ("NO\n", "No", "FFFFFPP"),
    ("007\n1.5\n", "7\n1.5", "FPPPFPP"),
    ("10000000000000001\n0.5\n", "10000000000000000\n0.5", "FPFPFPP"),
    ("0.1004\n", "0.1", "FFFPFFF"),
    ("0.1006\n", "0.1", "FFFFFFF"),
    ("0.1004\n", "0.1006", "FFFFFFF"),
    ("1\n1\n2\n", "1\n2", "FFFPPFF"),
    ("1\n2\n", "1\n \n2", "FFFFFPF"),
    ("x 1.0004\n", "1 x", "FFFFFFF"),
    ("10 \n20\n", "10\n20", "FPPPFPP"),
    ("1 \n2\n", "1\n2", "FPPPPPP"),
    ("0.3333333\n", "0.333333333", "------P"),
    ("YES  \n", "yes", "------P"),
    ("1e-12\n", "0", "------F"),
    ("0\n", "1e-12", "------F"),
    ("inf\n", "inf", "------P"),
    ("INF\n", "inf", "------P"),
]


@pytest.mark.parametrize("grader", GRADERS)
def test_each_graders_rule_gives_its_verdicts(grader: str) -> None:
    column = GRADERS.index(grader)
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
    columns = {grader: "".join(v[i] for _, _, v in VERDICTS) for i, grader in enumerate(GRADERS)}
    assert len(set(columns.values())) == len(GRADERS)
    assert set(GRADERS) <= set(COMPARISONS)


def test_a_graders_rule_takes_no_tolerance_of_ours() -> None:
    """Their tolerances are their own: ``float_tolerance`` changes no verdict of theirs."""
    for grader in GRADERS:
        for got, expected, _ in VERDICTS:
            strict = compare_outputs(got, expected, grader, 0.0)
            assert compare_outputs(got, expected, grader, 1e9) == strict, (grader, got, expected)
