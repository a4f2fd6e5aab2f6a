"""Interactive problems in ``code_eval``: the program and a testlib interactor talking over
pipes, each sandboxed apart. A guessing game (binary search in at most 20 questions) played by
a right program, a wrong one, one that asks too much, one that never answers, one that floods,
one that waits on the interactor, one that crashes and one that tries to read the hidden
number; an interactor that fails; an interactor with a checker after it. Nothing hangs."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine
from tests.guessing_game import BINARY_SEARCH

CHECKERS = Path(__file__).parent / "testlib_checkers"
GAME = {"source": (CHECKERS / "guess_interactor.cpp").read_text()}
HIDDEN = [{"input": "777777", "output": ""}, {"input": "1", "output": ""}]


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine() as engine:
        yield ToolAPI(engine.connect())


def _play(tools: ToolAPI, program: str, **arguments: Any) -> dict[str, Any]:
    given = {"program": program, "test_cases": HIDDEN, "interactor": GAME, "time_limit": 2}
    result = tools.call(tool_name="code_eval", arguments={**given, **arguments}, timeout=120)
    assert result.success, result.error
    data: dict[str, Any] = result.data
    return data


def test_a_binary_search_wins_in_python_and_in_cpp(tools: ToolAPI) -> None:
    data = _play(tools, BINARY_SEARCH)
    assert data["verdict"] == "AC", data
    assert [c["interactor_message"] for c in data["tests"]] == [
        "ok found in 17 questions",
        "ok found in 19 questions",
    ]
    cpp = textwrap.dedent(
        """
        #include <cstdio>
        int main() {
            int lo = 1, hi = 1000000;
            for (char said[4];;) {
                int mid = (lo + hi) / 2;
                std::printf("? %d\\n", mid);
                std::fflush(stdout);
                std::scanf("%3s", said);
                if (said[0] == '=') { std::printf("! %d\\n", mid); return 0; }
                if (said[0] == '>') lo = mid + 1; else hi = mid - 1;
            }
        }
        """
    )
    assert _play(tools, cpp, language="cpp")["verdict"] == "AC"


@pytest.mark.parametrize(
    ("program", "verdict", "said"),
    [
        ('print("! 5", flush=True)', "WA", "guessed 5, the number was 777777"),
        (
            "x = 1\nwhile True:\n    print('?', x, flush=True)\n"
            "    if input() == '=':\n        print('!', x, flush=True)\n    x += 1\n",
            "WA",
            "more than 20 questions",
        ),
        ('print("what? 5", flush=True)', "WA", "expected ? or !, found what?"),
    ],
)
def test_wrong_answers_are_the_interactors_to_give(
    tools: ToolAPI, program: str, verdict: str, said: str
) -> None:
    data = _play(tools, program)
    case = data["tests"][0]
    assert (data["verdict"], case["verdict"]) == (verdict, verdict), data
    assert said in case["interactor_message"] and said in case["reason"], case


def test_a_presentation_error_is_pe_when_asked(tools: ToolAPI) -> None:
    data = _play(
        tools, 'print("what? 5", flush=True)', interactor={**GAME, "presentation_error": "PE"}
    )
    assert data["verdict"] == "PE", data


@pytest.mark.parametrize(
    ("name", "program"),
    [
        ("never answers", "import time\ntime.sleep(60)\n"),
        ("waits on the interactor", "import time\nprint('? 1', flush=True)\ntime.sleep(60)\n"),
        ("reads and never writes", "import sys\nsys.stdin.read()\n"),
    ],
)
def test_a_program_that_waits_is_idle_not_hung(tools: ToolAPI, name: str, program: str) -> None:
    data = _play(tools, program, test_cases=HIDDEN[:1], time_limit=1)
    case = data["tests"][0]
    assert case["verdict"] == "IL", (name, data)
    assert "idleness" in case["reason"] and 1 <= case["time"] < 5, case


def test_a_program_that_computes_instead_of_answering_is_tle(tools: ToolAPI) -> None:
    data = _play(tools, "while True:\n    pass\n", test_cases=HIDDEN[:1], cpu_time_limit=0.5)
    case = data["tests"][0]
    assert (case["verdict"], case["exceeded"]) == ("TLE", "cpu_time"), data


def test_a_flood_gets_its_verdict_and_nothing_hangs(tools: ToolAPI) -> None:
    """A program that writes without end and never reads: the interactor judges the first
    words; once it has quit, the program's writes fail and it ends. One endless word is a
    presentation error past the header's longest token (not an interactor grown to its memory
    limit: a judge error, no verdict)."""
    questions = "import sys\nwhile True:\n    sys.stdout.write('? 1\\n' * 1000)\n"
    garbage = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    for program, said in (
        (questions, "more than 20 questions"),
        (garbage, "Length of token exceeds"),
    ):
        data = _play(tools, program, test_cases=HIDDEN[:1])
        case = data["tests"][0]
        assert case["verdict"] == "WA", data
        assert said in case["interactor_message"] and case["time"] < 5, case


def test_a_program_that_crashes_mid_game(tools: ToolAPI) -> None:
    """The interactor meets the end of its input first: its word (an early end of input, a
    presentation error, WA unless asked) is the verdict."""
    data = _play(tools, 'print("? 1", flush=True)\ninput()\nraise SystemExit(3)\n')
    case = data["tests"][0]
    assert case["verdict"] == "WA" and case["return_code"] == 3, data
    assert "Unexpected end of file" in case["interactor_message"]


def test_an_interactor_that_fails_is_a_judge_error(tools: ToolAPI) -> None:
    failing = '#include "testlib.h"\nint main(int c, char* v[]) {\n' \
              '    registerInteraction(c, v);\n    quitf(_fail, "bad test");\n}\n'  # fmt: skip
    data = _play(tools, BINARY_SEARCH, interactor={"source": failing})
    assert (data["verdict"], data["summary"]) == ("JE", {"JE": 2}), data
    assert "FAIL bad test" in data["tests"][0]["reason"]
    broken = _play(tools, BINARY_SEARCH, interactor={"source": "int main( {"})
    assert (broken["verdict"], broken["tests"]) == ("JE", []), broken
    assert broken["reason"].startswith("the interactor does not compile")


def test_a_checker_judges_what_the_interactor_wrote(tools: ToolAPI) -> None:
    """The interactor writes the guess to its output file (testlib's ``tout``); the checker
    then compares it with the case's answer."""
    checker = '#include "testlib.h"\nint main(int c, char* v[]) {\n' \
              "    registerTestlibCmd(c, v);\n    int j = ans.readInt(), p = ouf.readInt();\n" \
              '    if (j != p) quitf(_wa, "wrote %d, expected %d", p, j);\n' \
              '    quitf(_ok, "wrote %d", p);\n}\n'  # fmt: skip
    cases = [{"input": "777777", "output": "777777"}, {"input": "5", "output": "6"}]
    data = _play(tools, BINARY_SEARCH, test_cases=cases, checker={"source": checker})
    assert [c["verdict"] for c in data["tests"]] == ["AC", "WA"], data
    assert data["tests"][1]["checker_message"] == "wrong answer wrote 5, expected 6"
    assert data["tests"][1]["interactor_message"] == "ok found in 19 questions"


def test_the_program_cannot_read_the_hidden_number(tools: ToolAPI) -> None:
    """It looks for the interactor's input in every directory and descriptor it can reach,
    and guesses what it finds."""
    cheat = textwrap.dedent(
        """
        import os, stat
        found = "1"
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) == os.getpid():
                continue
            for where in ("cwd/input.txt", "root/input.txt", *(f"fd/{n}" for n in range(8))):
                try:  # regular files only: not blocking on a pipe
                    fd = os.open(f"/proc/{pid}/{where}", os.O_RDONLY | os.O_NONBLOCK)
                except OSError:
                    continue
                try:
                    if stat.S_ISREG(os.fstat(fd).st_mode):
                        text = os.read(fd, 64).decode(errors="replace").strip()
                        found = text if text.isdigit() else found
                except OSError:
                    pass
                finally:
                    os.close(fd)
        for where, _, names in os.walk(".."):
            if "input.txt" in names:
                try:
                    found = open(os.path.join(where, "input.txt")).read().strip() or found
                except OSError:
                    pass
        print("!", found, flush=True)
        """
    )
    data = _play(tools, cheat, test_cases=HIDDEN[:1])
    assert data["verdict"] == "WA", data
    assert "guessed 1, the number was 777777" in data["tests"][0]["interactor_message"]


def test_an_interactor_with_what_it_cannot_judge_is_refused(tools: ToolAPI) -> None:
    result = tools.call(
        tool_name="code_eval",
        arguments={"program": "print(1)", "test_cases": HIDDEN, "interactor": GAME,
                   "compare": "exact"},
    )  # fmt: skip
    assert not result.success and "interactor" in (result.error or ""), result.error
    result = tools.call(
        tool_name="code_eval",
        arguments={"program": "print(1)", "test_cases": HIDDEN, "interactor": {"src": "x"}},
    )
    assert not result.success and "interactor has unknown fields" in (result.error or "")


def test_which_of_the_two_could_not_start_decides_the_verdict(tmp_path: Path) -> None:
    """A program that could not be started is RE; an interactor that could not be, a judge
    error: never the other way round."""
    from a2e_engine.tools._steps import not_started
    from a2e_engine.tools.grading._checker import checker_of
    from a2e_engine.tools.grading._interaction import Interaction, Interactor

    spec = checker_of(GAME, "interactor")
    assert spec is not None
    interactor = Interactor(spec, str(tmp_path), (), 256)
    try:
        failed, idle = not_started("could not start: ENOEXEC"), not_started("did not start")
        program, _ = interactor.verdict(Interaction(failed, idle, "", "program"), False)
        jury, _ = interactor.verdict(Interaction(idle, failed, "", "interactor"), False)
    finally:
        interactor.close()
    assert (program.verdict, jury.verdict) == ("RE", "JE"), (program, jury)


def test_no_sweep_of_a_case_takes_what_lives_beside_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What lives beside the program's runs for all of them (its clean template, under the
    engine) is spared by every sweep of an interactive case, as between two plain cases: a
    sweep that took it would kill it where the worker has no case group, and where it has one
    wait out the sweep's bound for it to end, on every case."""
    import subprocess
    import sys

    from a2e_engine.tools._languages import LANGUAGES
    from a2e_engine.tools._steps import Program, Role, RunLimits
    from a2e_engine.tools._submission import Submission
    from a2e_engine.tools.grading import _interaction
    from a2e_engine.tools.grading._checker import checker_of
    from a2e_engine.tools.grading._interaction import Interactor

    beside = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    swept: list[tuple[int, ...]] = []
    monkeypatch.setattr(_interaction, "sweep", lambda spared=(): swept.append(tuple(spared)))
    spec = checker_of(GAME, "interactor")
    assert spec is not None
    interactor = Interactor(spec, str(tmp_path), (), 256)
    program = Program(LANGUAGES["python"], BINARY_SEARCH, {}, Role.SEALED_CASE)
    submission = Submission(program, str(tmp_path))
    monkeypatch.setattr(submission.steps, "spared", lambda: (beside.pid,))
    try:
        assert interactor.compile(60) is None
        talk = interactor.talk(submission, "777777", RunLimits(10, 256))
    finally:
        submission.close()
        interactor.close()
        beside.kill()
        beside.wait()
    assert talk.interactor["return_code"] == 0, talk
    assert swept and all(beside.pid in spared for spared in swept), swept
