"""The engine's ``testlib.h`` (``tools/grading/testlib``), with checkers written the way testlib's classic
ones are (token, float, yes/no; one that accepts any valid answer by reading the input; a scored
one; one that never gives a verdict) and an interactor, compiled with g++ and run on files as
judges run them: ``checker <input> <output> <answer>``. Each case's exit code and stderr line are
testlib's for the same files (its documented verdicts and messages)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import a2e_engine.tools.grading as grading_package
from tests.guessing_game import BINARY_SEARCH

HEADER_DIR = Path(grading_package.__file__).parent / "assets"
CHECKERS = Path(__file__).parent / "testlib_checkers"

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every checker compiled against the engine's header, warnings as errors."""
    where = tmp_path_factory.mktemp("checkers")

    def compile_one(source: Path) -> subprocess.CompletedProcess[str]:
        command = ["g++", "-std=c++17", "-O0", "-Wall", "-Wextra", "-Werror"]
        command += ["-I", str(HEADER_DIR), "-o", str(where / source.stem), str(source)]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    with ThreadPoolExecutor(2) as pool:
        for done in pool.map(compile_one, sorted(CHECKERS.glob("*.cpp"))):
            assert done.returncode == 0, done.stderr[-3000:]
    yield where


def _check(
    built: Path, checker: str, given: str, output: str | None, answer: str
) -> tuple[int, str]:
    (built / "input.txt").write_text(given)
    (built / "answer.txt").write_text(answer)
    out = built / "output.txt"
    out.unlink(missing_ok=True)
    if output is not None:
        out.write_bytes(output.encode())
    done = subprocess.run(
        [str(built / checker), "input.txt", "output.txt", "answer.txt"],
        cwd=built,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout == ""  # a checker says everything on stderr
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    ("checker", "given", "output", "answer", "code", "said"),
    [
        ("wcmp", "", "1 2 3\n", "1 2 3", 0, "ok 3 tokens\n"),
        ("wcmp", "", "1 2 3\r\n\r\n", "1 2 3", 0, "ok 3 tokens\n"),
        ("wcmp", "", "hello", "hello", 0, 'ok "hello"\n'),
        ("wcmp", "", "", "", 0, "ok 0 tokens\n"),
        ("wcmp", "", "1 2", "1 2 3", 1, "wrong answer Unexpected EOF in the participants output\n"),
        ("wcmp", "", "1 2 3 4", "1 2 3", 1, "wrong answer Participant output contains extra tokens\n"),
        ("wcmp", "", "1 5 3", "1 2 3", 1, "wrong answer 2nd words differ - expected: '2', found: '5'\n"),
        ("wcmp", "", "\ufeffhello", "hello", 0, 'ok "hello"\n'),  # a BOM is not output
        ("rcmp6", "", "0.3333334", "0.333333333", 0, "ok found '0.3333334', expected '0.3333333', error '0.0000001'\n"),
        ("rcmp6", "", "0.334", "0.333333333", 1, "wrong answer 1st numbers differ - expected: '0.3333333', found: '0.3340000', error = '0.0006667'\n"),
        ("rcmp6", "", "1e9\n", "1000000000.5", 0, "ok found '1000000000.0000000', expected '1000000000.5000000', error '0.0000000'\n"),
        ("rcmp6", "", "+2 .5", "2 0.5", 0, "ok 2 numbers\n"),
        ("rcmp6", "", "nan", "1", 2, 'wrong output format Expected double, but "nan" found\n'),
        ("rcmp6", "", "inf", "1", 2, 'wrong output format Expected double, but "inf" found\n'),
        ("rcmp6", "", "1 2", "1", 2, "wrong output format Extra information in the output file\n"),
        ("rcmp6", "", "", "1", 2, "wrong output format Unexpected end of file - double expected\n"),
        ("yesno", "", "yes", "YES", 0, "ok answer is YES\n"),
        ("yesno", "", "No", "YES", 1, "wrong answer expected YES, found NO\n"),
        ("yesno", "", "maybe", "YES", 2, "wrong output format YES or NO expected, but MAYBE found\n"),
        ("yesno", "", "YES", "perhaps", 3, "FAIL YES or NO expected in answer, but PERHAPS found\n"),
        ("derangement", "3", "2 3 1", "", 0, "ok a derangement of 3\n"),
        ("derangement", "3", "3 1 2\n", "", 0, "ok a derangement of 3\n"),
        ("derangement", "3", "1 3 2", "", 1, "wrong answer p[1] = 1 stays at its place\n"),
        ("derangement", "3", "2 2 1", "", 1, "wrong answer 2 appears twice\n"),
        ("derangement", "3", "2 3", "", 2, "wrong output format Unexpected end of file - int32 expected\n"),
        ("derangement", "3", "2 3 4", "", 1, "wrong answer Integer element p[3] equals to 4, violates the range [1, 3]\n"),
        ("derangement", "3", "2 3 01", "", 2, 'wrong output format Expected integer, but "01" found\n'),
        ("derangement", "3", "2 3 +1", "", 2, 'wrong output format Expected integer, but "+1" found\n'),
        ("derangement", "3", "2 3 -0", "", 2, 'wrong output format Expected integer, but "-0" found\n'),
        ("derangement", "3", "2 3 99999999999", "", 2, 'wrong output format Expected int32, but "99999999999" found\n'),
        ("derangement", "1", "1", "", 3, "FAIL Integer parameter [name=n] equals to 1, violates the range [2, 100000] (input.txt)\n"),
        ("derangement", "7000000000", "1", "", 3, 'FAIL Expected int32, but "7000000000" found (input.txt)\n'),
        ("no_verdict", "", "5", "5", 3, "FAIL Checker must end with quit or quitf call.\n"),
        ("points", "", "5", "5", 7, "points 1.0 got 5\n"),
        ("points", "", "4", "5", 7, "points 0.5 got 4\n"),
        ("wcmp", "", None, "1", 2, 'wrong output format Output file not found: "output.txt"\n'),
        # A line as testlib reads it: a CR before LF ends it, another CR is dropped and the
        # character after it kept, EOF included (so "3\r" at the end is no "3").
        ("lines", "", "3\r\n", "3", 0, "ok 1 lines\n"),
        ("lines", "", "a\rb\n", "ab", 0, "ok 1 lines\n"),
        ("lines", "", "3\r", "3", 1, "wrong answer line 1 differs: 2 characters, the last 255\n"),
        ("lines", "", "3\r\r\n", "3", 1, "wrong answer line 1 differs: 2 characters, the last 13\n"),
        ("lines", "", "3\r\n4\r\n", "3\n4\n", 0, "ok 2 lines\n"),
        # testlib's absolute value: an error of 0 between two -0 is shown "-0.0000000".
        ("rcmp6", "", "-0", "-0", 0, "ok found '-0.0000000', expected '-0.0000000', error '-0.0000000'\n"),
        ("rcmp6", "", "3\0", "3", 2, 'wrong output format Expected double, but "3~" found (it contains \\0)\n'),
        ("derangement", "3", "2 3 1\0", "", 2, 'wrong output format Expected integer, but "1~" found (it contains \\0)\n'),
        ("token_numbers", "", "-12", "long", 0, "ok -12\n"),
        ("token_numbers", "", "012", "long", 2, 'wrong output format Expected integer, but "012" found\n'),
        ("token_numbers", "", "1\x002", "long", 2, 'wrong output format Expected integer, but "1~2" found (it contains \\0)\n'),
        ("token_numbers", "", "18446744073709551615", "unsigned", 0, "ok 18446744073709551615\n"),
        ("token_numbers", "", "-1", "unsigned", 2, 'wrong output format Expected unsigned integer, but "-1" found\n'),
        ("token_numbers", "", "2.5e1", "double", 0, "ok 25.000\n"),
        ("token_numbers", "", "2.50", "strict", 0, "ok 2.500\n"),
        # testlib's patterns: reads that must match one, worded as testlib words a mismatch,
        # and its greedy matching ("[0-9]?1" does not match "1"; a group takes no count).
        ("patterns", "", "abc", "token", 0, "ok read\n"),
        ("patterns", "", "abcd", "token", 1, 'wrong answer Token "abcd" doesn\'t correspond to pattern "[a-z]{1,3}"\n'),
        ("patterns", "", "ABC", "named", 1, 'wrong answer Token parameter [name=s] equals to "ABC", doesn\'t correspond to pattern "[a-z]{1,3}"\n'),
        ("patterns", "", "1 x 3", "tokens", 1, 'wrong answer Token element a[2] equals to "x", doesn\'t correspond to pattern "[0-9]+"\n'),
        ("patterns", "", "NO SOLUTION", "line", 0, "ok read\n"),
        ("patterns", "", "12  34", "line", 1, 'wrong answer Line "12  34" doesn\'t correspond to pattern "NO\\ SOLUTION|[0-9]+\\ [0-9]+"\n'),
        ("patterns", "", "xx\nx y\n", "lines", 1, 'wrong answer Line element row[1] equals to "x y", doesn\'t correspond to pattern "x+"\n'),
        ("patterns", "", "", "group", 3, 'FAIL pattern: Illegal pattern (or part) "[0-9]+)?"\n'),
        ("patterns", "", "1", "greedy", 0, "ok 010\n"),
        ("patterns", "", "11", "greedy", 0, "ok 110\n"),
        ("patterns", "", "-0", "greedy", 0, "ok 000\n"),
        ("patterns", "", "id-bb", "greedy", 0, "ok 001\n"),
        ("token_numbers", "", "2.500", "strict", 2, 'wrong output format Expected strict double with number of digits after point in range [1,2], but "2.500" found\n'),
    ],
)  # fmt: skip
def test_checkers_judge_as_testlib_judges(
    built: Path, checker: str, given: str, output: str | None, answer: str, code: int, said: str
) -> None:
    assert _check(built, checker, given, output, answer) == (code, said)


@pytest.mark.parametrize(
    ("operation", "output", "code", "said"),
    [
        ("lines", "a b\r\n\nc", 0, "ok 3 lines: a b||c\n"),
        ("eoln", "5 \n", 0, "ok 5 0 1\n"),
        ("eoln", "5\r\n", 0, "ok 5 1 1\n"),
        ("eof", "x", 0, "ok at the end\n"),
        ("eof", "x\n", 2, "wrong output format Expected EOF\n"),
        ("space", "7 x\n", 0, "ok 7 then a space, x and a line end\n"),
        ("space", "7  x\n", 2, "wrong output format Unexpected character ' ', but 'x' expected\n"),
        ("space", "7\nx\n", 2, "wrong output format Unexpected character #10, but ' ' expected\n"),
        ("strict", "1.25", 0, "ok 1.25\n"),
        ("strict", "1.255", 2, 'wrong output format Expected strict double with number of digits after point in range [1,2], but "1.255" found\n'),
        ("strict", "01.5", 2, 'wrong output format Expected strict double, but "01.5" found\n'),
        ("strict", "-0.00", 2, 'wrong output format Redundant minus in "-0.00" found\n'),
        ("strict", "11.0", 1, "wrong answer Strict double parameter [name=d] equals to 11, violates the range [0, 10]\n"),
        # testlib's order: the digits after the point before a leading zero or a bare sign.
        ("strict", "00.555", 2, 'wrong output format Expected strict double with number of digits after point in range [1,2], but "00.555" found\n'),
        ("strict", "-.555", 2, 'wrong output format Expected strict double with number of digits after point in range [1,2], but "-.555" found\n'),
        ("strict", "-.55", 2, 'wrong output format Expected strict double, but "-.55" found\n'),
        ("strict", "1" + "0" * 301 + ".5", 2, 'wrong output format Expected double, but "100000000000000000000000000000...00000000000000000000000000000.5" found\n'),
        ("long", "-1000000000000000000 18446744073709551615", 0, "ok -1000000000000000000 18446744073709551615\n"),
        ("long", "9223372036854775808 1", 2, 'wrong output format Expected integer, but "9223372036854775808" found\n'),
        ("long", "1 -1", 2, 'wrong output format Expected unsigned integer, but "-1" found\n'),
        ("range", "0", 1, "wrong answer Integer parameter [name=k] equals to 0, violates the range [1, 10^9]\n"),
        ("stream-ensuref", "", 1, "wrong answer bad 7\n"),
        ("ensuref", "", 3, "FAIL jury's fault 7\n"),
        ("ensure", "", 3, 'FAIL Condition failed: "1 + 1 == 3"\n'),
        ("quitif", "", 1, "wrong answer this one\n"),
        ("expected", "", 1, "wrong answer case 2: expected '5', but found '6'\n"),
        ("pc", "", 3, "partially correct (3) partly\n"),
        ("nan-points", "", 3, "FAIL Parameter 'points' can't be nan\n"),
        ("ans-wa", "", 3, "FAIL the jury's answer is wrong (answer.txt)\n"),
        ("helpers", "", 0, "ok 00042 1e-07 3 ABCdef [x y] a//b a/b stndrdthnd 2*10^9 "
         + "z" * 30 + "..." + "z" * 31 + "\n"),
        ("doubles", "", 0, "ok TFTFTTT 0.010\n"),
        ("rnd", "", 0, "ok 1 2 3 4 5 1 1\n"),
        ("based", "2 40\n", 0, "ok 42\n"),
        ("aliases", "1 2 30 40 0.5 0.25 0.75 0.5 7 x y z\n  rest of a line\nnext\nskipped\nlast\n",
         0, "ok 12 3040 0.5 0.2 0.8 0.5 7 xyz [rest of a line] [next] [last]\n"),
        ("aliases", "1 2 300", 1, "wrong answer Integer element b[1] equals to 300, violates the range [0, 99]\n"),
        ("quitpi", "3/4", 7, "points points_info=3/4 as given\n"),
        ("quitpi", "", 2, "wrong output format Unexpected end of file - token expected\n"),
    ],
)  # fmt: skip
def test_every_part_a_checker_calls(
    built: Path, operation: str, output: str, code: int, said: str
) -> None:
    assert _check(built, "probe", operation, output, "") == (code, said)


@pytest.mark.parametrize(
    ("test", "code", "said"),
    [
        ("1 2\n", 0, ""),
        ("1  2\n", 3, "FAIL Unexpected white-space - token expected (stdin, line 1)\n"),
        ("1 2", 3, "FAIL Expected EOLN (stdin, line 1)\n"),
        ("1 2\r\n", 3, "FAIL Expected EOLN (stdin, line 1)\n"),
        ("1 101\n", 3, "FAIL Integer parameter [name=b] equals to 101, violates the range [1, 100] (stdin, line 1)\n"),
        ("1\n2\n", 3, "FAIL Unexpected character #10, but ' ' expected (stdin, line 1)\n"),
        ("1", 3, "FAIL Unexpected character '\xff', but ' ' expected (stdin, line 1)\n"),
    ],
)  # fmt: skip
def test_a_validator_reads_its_test_strictly(built: Path, test: str, code: int, said: str) -> None:
    """testlib's words, the line of the input the failing read began on included."""
    done = subprocess.run(
        [str(built / "validator")], input=test, capture_output=True, text=True, timeout=30,
        encoding="latin-1",
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (code, said)
    unfinished = subprocess.run(
        [str(built / "validator_no_eof")], input=test, capture_output=True, text=True, timeout=30
    )
    assert (unfinished.returncode, unfinished.stderr) == (
        3,
        "FAIL Validator must end with readEof call.\n",
    )


@pytest.mark.parametrize(
    ("arguments", "test", "code", "said"),
    [
        ((), "2\n2\n1 2\n3\n5 4 300\n", 0, ""),
        ((), "2\n2\n1 2\n3\n5 4\n", 3, "FAIL Unexpected character #10, but ' ' expected (test case 2, stdin, line 5)\n"),
        ((), "1\n1\n7\n\n", 3, "FAIL Expected EOF (stdin, line 4)\n"),
        (("--testset", "pretests"), "2\n2\n1 2\n3\n5 4 300\n", 3, "FAIL Integer element a[3] equals to 300, violates the range [-10, 10] (test case 2, stdin, line 5)\n"),
        (("--group", "sorted"), "2\n2\n1 2\n3\n5 4 3\n", 3, "FAIL a is not sorted (test case 2)\n"),
        (("--group", "sorted"), "1\n3\n1 2 3\n", 0, ""),
        (("--testset",), "1\n1\n7\n", 3, "FAIL Expected non-empty testset after --testset command line parameter\n"),
    ],
)  # fmt: skip
def test_a_multi_test_validator_names_its_test_case_testset_and_group(
    built: Path, arguments: tuple[str, ...], test: str, code: int, said: str
) -> None:
    """``setTestCase`` names the case in every message from then on, and ``validator.testset()``
    and ``group()`` are what ``registerValidation(argc, argv)`` was given: testlib's words for
    each (``tests/testlib_checkers/cases_validator.cpp``)."""
    done = subprocess.run(
        [str(built / "cases_validator"), *arguments], input=test, capture_output=True,
        text=True, timeout=30,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (code, said)


def test_a_checker_run_wrong_fails_the_judge_not_the_participant(built: Path) -> None:
    done = subprocess.run([str(built / "wcmp"), "input.txt"], capture_output=True, text=True)
    assert done.returncode == 3 and done.stderr.startswith("FAIL Program must be run with")
    (built / "output.txt").write_text("1")
    done = subprocess.run(
        [str(built / "wcmp"), "input.txt", "output.txt", "missing.txt"],
        cwd=built,
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stderr) == (3, 'FAIL Answer file not found: "missing.txt"\n')


ASKS_TOO_MUCH = "for m in range(1, 30):\n    print('?', m, flush=True)\n    input()\n"
GUESSES_WRONG = "print('! 5', flush=True)\n"


@pytest.mark.parametrize(
    ("solution", "code", "said", "written"),
    [
        (BINARY_SEARCH, 0, "ok found in 16 questions\n", "777\n"),
        (ASKS_TOO_MUCH, 1, "wrong answer more than 20 questions\n", ""),
        (GUESSES_WRONG, 1, "wrong answer guessed 5, the number was 777\n", "5\n"),
    ],
)
def test_an_interactor_talks_to_the_solution_and_writes_its_output(
    built: Path, solution: str, code: int, said: str, written: str
) -> None:
    """``registerInteraction``: the solution's output is the interactor's stdin, read as it
    comes; the interactor's stdout is the solution's input; what it writes for a checker goes
    to its output file."""
    (built / "hidden.txt").write_text("777\n")
    answers_read, answers_written = os.pipe()
    solver = subprocess.Popen(
        [sys.executable, "-c", solution], stdin=subprocess.PIPE, stdout=answers_written
    )
    os.close(answers_written)
    assert solver.stdin is not None
    interactor = subprocess.run(
        [str(built / "guess_interactor"), "hidden.txt", "tout.txt"],
        cwd=built,
        stdin=answers_read,
        stdout=solver.stdin,
        capture_output=False,
        stderr=subprocess.PIPE,
        text=True,
        timeout=30,
    )
    os.close(answers_read)
    solver.stdin.close()
    solver.kill()
    solver.wait()
    assert (interactor.returncode, interactor.stderr) == (code, said)
    assert (built / "tout.txt").read_text() == written


#: Every draw of ``rnd`` a generator, checker or interactor makes (testlib's ``random_t``).
DRAWS = r"""#include "testlib.h"
#include <cstdio>
#include <string>
#include <vector>

template <typename T>
static void put(const std::vector<T>& items) {
    for (size_t i = 0; i < items.size(); i++) std::printf("%s%lld", i ? "," : "", (long long)items[i]);
    std::printf(" ");
}

int main(int argc, char* argv[]) {
    registerGen(argc, argv, std::string(argv[1]) == "v0" ? 0 : 1);
    std::printf("%d %d %d ", rnd.next(8), rnd.next(1000), rnd.next(1, 6));
    std::printf("%lld %lld ", rnd.next(1000000000000LL), rnd.next(-5LL, 5LL));
    std::printf("%u %.17g %.17g %.17g ", rnd.next(10u), rnd.next(), rnd.next(2.5), rnd.next(-1.0, 1.0));
    std::printf("%d %d %d %d ", rnd.wnext(100, 3), rnd.wnext(100, -2), rnd.wnext(100, 30), rnd.wnext(100, -30));
    std::printf("%lld %.17g %.17g ", rnd.wnext(1000000000000LL, 2), rnd.wnext(1.0, 40), rnd.wnext(5));
    std::printf("%d ", rnd.wnext(10, 20, 1));
    put(rnd.perm(7));
    put(rnd.perm(5, 10));
    put(rnd.distinct(4, 1000));
    put(rnd.distinct(9, 1, 10));
    put(rnd.partition(5, 20));
    put(rnd.partition(4, 30, 3));
    std::vector<int> items = {1, 2, 3, 4, 5, 6, 7, 8};
    shuffle(items.begin(), items.end());
    put(items);
    std::printf("%d %d ", rnd.any(items), rnd.wany(items, 2));
    std::printf("%s %s\n", rnd.next("[a-z]{3,8}").c_str(), rnd.next("[a-c]{2,4}|x(y|z)").c_str());
    return 0;
}
"""
#: What testlib's own header (MikeMirzayanov/testlib 1e4e8a2) prints for DRAWS run with each
#: command line: the first argument is ``registerGen``'s version; the last line's argument is
#: UTF-8, whose bytes are negative chars, as the seed reads them.
TESTLIBS_DRAWS = {
    ("v1",): "1 117 3 566759478060 2 0 0.10701716570438202 0.74397202131633167 -0.50095313735576785 75 14 96 3 824640808323 0.97253451050823991 0.98164289792709858 17 5,6,2,4,0,1,3 12,13,10,14,11 281,47,628,33 3,7,8,6,10,2,4,1,5 6,3,4,4,3 3,5,8,14 5,1,8,2,7,4,3,6 7 2 sngmm bcaa\n",
    ("v1", "alpha", "7"): "0 462 2 624434971085 -2 0 0.19591504030813778 1.8532048476698679 -0.540261627470211 82 1 96 11 791361081536 0.9860715830101654 0.77618506941373444 19 3,4,0,2,1,6,5 13,14,11,10,12 962,996,76,620 2,5,1,7,9,3,6,10,8 3,10,1,2,4 6,5,6,13 5,3,2,6,4,1,7,8 7 4 ooirrpie xy\n",
    ("v0", "alpha", "7"): "0 74 2 459787479551 2 3 0.19174799482083182 2.0232358471466521 -0.63021393030600947 94 48 93 1 583779144621 0.99521413377381873 0.59500083160622652 20 6,3,1,4,5,0,2 11,12,13,14,10 391,262,503,357 4,7,9,6,2,5,1,10,3 5,6,2,5,2 10,10,7,3 4,5,6,7,8,3,2,1 7 2 urpksgsz xz\n",
    ("v1", "\u00e9-\u00fc"): "0 81 6 983919570249 5 8 0.44035050599519154 0.15549504494195343 0.66271572986450056 83 10 95 1 882262539263 0.99688804635618666 0.64041477701743754 19 2,1,5,3,6,4,0 14,13,12,10,11 598,516,443,253 4,1,7,10,8,3,5,9,2 4,7,3,5,1 6,4,12,8 1,8,6,4,3,5,7,2 5 7 hmnmwwu xy\n",
}  # fmt: skip


def test_rnd_draws_what_testlibs_draws(tmp_path: Path) -> None:
    """``rnd`` is testlib's generator to the bit: the same seed from the same command line
    (``registerGen``, both versions), the same numbers from every kind of draw (bounded,
    weighted, doubles, permutations, distinct values, partitions, shuffles, patterns), so that
    a checker or an interactor that draws at random behaves here as under testlib."""
    source = tmp_path / "draws.cpp"
    source.write_text(DRAWS)
    command = ["g++", "-std=c++17", "-Wall", "-Werror", "-O2", "-I", str(HEADER_DIR)]
    done = subprocess.run([*command, "-o", str(tmp_path / "draws"), str(source)],
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for args, expected in TESTLIBS_DRAWS.items():
        run = subprocess.run([str(tmp_path / "draws"), *args], capture_output=True, text=True,
                             timeout=30, check=True)  # fmt: skip
        assert run.stdout == expected, args
    drawn = subprocess.run([str(tmp_path / "draws"), "v1", "x"], capture_output=True, text=True,
                           timeout=30, check=True).stdout.split()  # fmt: skip
    assert re.fullmatch("[a-c]{2,4}|x(y|z)", drawn[-1]) and re.fullmatch("[a-z]{3,8}", drawn[-2])


def test_an_endless_token_or_line_is_a_presentation_error(tmp_path: Path) -> None:
    """Past the longest token a stream reads (testlib's ``maxTokenLength``, 32 MiB, here made
    8 with ``A2E_TESTLIB_MAX_TOKEN``) the participant's output is PE with testlib's message, the
    jury's files FAIL. Lines have a bound too (``A2E_TESTLIB_MAX_LINE``, 64 MiB), where testlib
    has none: an endless line would otherwise grow the checker to its memory limit, a judge
    error where the answer is wrong."""
    command = ["g++", "-std=c++17", "-DA2E_TESTLIB_MAX_TOKEN=8", "-DA2E_TESTLIB_MAX_LINE=8"]
    for checker in ("wcmp", "lines"):
        done = subprocess.run(
            [*command, "-I", str(HEADER_DIR), "-o", str(tmp_path / checker),
             str(CHECKERS / f"{checker}.cpp")],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
    assert _check(tmp_path, "wcmp", "", "abcdefghij", "abc") == (
        2,
        "wrong output format Length of token exceeds 8, token is 'abcdefghi...'\n",
    )
    assert _check(tmp_path, "wcmp", "", "abc", "abcdefghij")[0] == 3
    assert _check(tmp_path, "lines", "", "abcdefghij\n", "abc\n") == (
        2,
        "wrong output format Line is too long\n",
    )
    assert _check(tmp_path, "lines", "", "abc\n", "abcdefghij\n")[0] == 3
