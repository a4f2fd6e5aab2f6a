"""Checkers (special judges) in ``code_eval``: problems with many right answers judged right for
each and wrong otherwise, by testlib checkers compiled against the engine's header (or the
call's own), in Python too; a checker that fails is a judge error, never a verdict; and a
candidate that goes after the checker or the answers gets nothing. Real toolchains, real
workers, the real header."""

from __future__ import annotations

import base64
import secrets
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine
from a2e_engine.sandbox._landlock import ABI_SCOPED, abi_version

CHECKERS = Path(__file__).parent / "testlib_checkers"
GRAPH = "4 4\n1 2\n2 4\n1 3\n3 4\n"  # two shortest paths from 1 to 4: by 2 and by 3


#: What a hostile program starts with: ``leave_behind(step)`` leaves a grandchild in a session of
#: its own (out of the program's process group, which is killed when it ends) that runs ``step``
#: every 20 ms for 4 s; ``kill_all`` kills every process it can but the program and itself.
LEAVING_BEHIND = textwrap.dedent(
    """
    import os, signal, time
    spared = {os.getpid()}
    def kill_all():
        for pid in os.listdir("/proc"):
            if pid.isdigit() and int(pid) not in spared:
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
    def leave_behind(step):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                spared.add(os.getpid())
                give_up = time.monotonic() + 4
                while time.monotonic() < give_up:
                    step()
                    time.sleep(0.02)
            os._exit(0)
    """
)


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine() as engine:
        yield ToolAPI(engine.connect())


def _checker(name: str, **more: Any) -> dict[str, Any]:
    return {"source": (CHECKERS / f"{name}.cpp").read_text(), **more}


def _judge(tools: ToolAPI, program: str, cases: list[dict[str, str]], checker: Any,
           **arguments: Any) -> dict[str, Any]:  # fmt: skip
    given = {"program": program, "test_cases": cases, "checker": checker, **arguments}
    result = tools.call(tool_name="code_eval", arguments=given, timeout=120)
    assert result.success, result.error
    data: dict[str, Any] = result.data
    return data


def _printing(text: str) -> str:
    return f"print({text!r})\n"


def test_any_shortest_path_is_right_and_nothing_else_is(tools: ToolAPI) -> None:
    cases = [{"input": GRAPH, "output": "2"}]
    checker = _checker("shortest_path")
    for path in ("1 2 4", "1 3 4", "1\n3\n4\n"):
        data = _judge(tools, _printing(path), cases, checker)
        assert data["verdict"] == "AC", (path, data)
        assert data["tests"][0]["checker_message"] == "ok a shortest path of 2 edges"
    for path, said in (
        ("1 2 1 3 4", "not the shortest"),
        ("1 4", "no edge 1-4"),
        ("2 4", "must go from 1 to 4"),
        ("", "must go from 1 to 4"),
    ):
        data = _judge(tools, _printing(path), cases, checker)
        case = data["tests"][0]
        assert (data["verdict"], case["verdict"]) == ("WA", "WA"), (path, data)
        assert said in case["checker_message"] and said in case["reason"], (path, case)


def test_a_presentation_error_is_a_wrong_answer_unless_asked_otherwise(tools: ToolAPI) -> None:
    cases = [{"input": GRAPH, "output": "2"}]
    malformed = _printing("1 two 4")
    assert _judge(tools, malformed, cases, _checker("shortest_path"))["verdict"] == "WA"
    asked = _checker("shortest_path", presentation_error="PE")
    data = _judge(tools, malformed, cases, asked)
    assert data["verdict"] == "PE", data
    assert data["tests"][0]["checker_message"].startswith("wrong output format")


def test_any_derangement_in_cpp_and_the_checker_reads_the_input(tools: ToolAPI) -> None:
    """A C++ candidate, compiled, and a checker that needs the input (n) to judge."""
    cases = [{"input": "3\n", "output": "2 3 1"}, {"input": "4\n", "output": "2 1 4 3"}]
    rotate = "#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);" \
             "for(int i=1;i<=n;i++)printf(\"%d \",i%n+1);}\n"  # fmt: skip
    identity = "#include <cstdio>\nint main(){int n;scanf(\"%d\",&n);" \
               "for(int i=1;i<=n;i++)printf(\"%d \",i);}\n"  # fmt: skip
    right = _judge(tools, rotate, cases, _checker("derangement"), language="cpp")
    assert right["verdict"] == "AC" and right["summary"] == {"AC": 2}, right
    wrong = _judge(tools, identity, cases, _checker("derangement"), language="cpp")
    assert wrong["summary"] == {"WA": 2}, wrong
    assert "stays at its place" in wrong["tests"][0]["checker_message"]


def test_a_float_answer_within_its_tolerance(tools: ToolAPI) -> None:
    cases = [{"input": "2\n", "output": "1.41421356237"}]
    for printed, verdict in (("1.4142136", "AC"), ("1.414213562373095", "AC"), ("1.41421", "WA")):
        data = _judge(tools, _printing(printed), cases, _checker("rcmp6"))
        assert data["verdict"] == verdict, (printed, data)


def test_a_checker_that_fails_is_a_judge_error_never_a_verdict(tools: ToolAPI) -> None:
    failing = '#include "testlib.h"\nint main(int c, char* v[]) {\n' \
              '    registerTestlibCmd(c, v);\n    quitf(_fail, "the jury is wrong");\n}\n'  # fmt: skip
    crashing = '#include "testlib.h"\n#include <cstdlib>\n' \
               "int main(int c, char* v[]) { registerTestlibCmd(c, v); abort(); }\n"  # fmt: skip
    cases = [{"input": "1", "output": "1"}, {"input": "2", "output": "2"}]
    for source, said in ((failing, "FAIL the jury is wrong"), (crashing, "SIGABRT")):
        data = _judge(tools, "print(input())\n", cases, {"source": source})
        assert (data["verdict"], data["passed"]) == ("JE", False), data
        assert data["summary"] == {"JE": 2}, data
        assert said in data["tests"][0]["reason"], data
    broken = _judge(tools, "print(1)\n", cases, {"source": "int main( {"})
    assert (broken["verdict"], broken["tests"]) == ("JE", []), broken
    assert broken["reason"].startswith("the checker does not compile")
    assert broken["checker_compile"]["return_code"] != 0


def test_a_wrong_program_is_wrong_whatever_its_checker(tools: ToolAPI) -> None:
    """A run that fails is judged by how it ended; its checker never runs."""
    cases = [{"input": GRAPH, "output": "2"}]
    for program, verdict in (("raise SystemExit(3)", "RE"), ("while True: pass", "TLE")):
        data = _judge(tools, program, cases, _checker("shortest_path"), time_limit=1)
        assert data["verdict"] == verdict, data
        assert "checker_message" not in data["tests"][0]


def test_partial_points(tools: ToolAPI) -> None:
    cases = [{"input": "", "output": "7"}, {"input": "", "output": "8"}]
    data = _judge(tools, "print(7)\n", cases, _checker("points"))
    assert [(c["verdict"], c["points"]) for c in data["tests"]] == [("PC", 1.0), ("PC", 0.5)]
    assert data["tests"][1]["checker_message"] == "points 0.5 got 7"


def test_a_checker_in_python(tools: ToolAPI) -> None:
    checker = textwrap.dedent(
        """
        import sys
        given, output, answer = (open(path).read().split() for path in sys.argv[1:4])
        if sorted(output) != sorted(answer):
            print("not the same numbers", file=sys.stderr)
            sys.exit(1)
        print("ok, in any order", file=sys.stderr)
        """
    )
    cases = [{"input": "", "output": "1 2 3"}]
    spec = {"source": checker, "language": "python"}
    assert _judge(tools, _printing("3 1 2"), cases, spec)["verdict"] == "AC"
    wrong = _judge(tools, _printing("3 1 1"), cases, spec)
    assert wrong["verdict"] == "WA" and wrong["tests"][0]["checker_message"] == (
        "not the same numbers"
    )


def test_the_calls_own_testlib_h_is_used_instead_of_the_engines(tools: ToolAPI) -> None:
    header = textwrap.dedent(
        """
        #include <cstdio>
        #include <cstdlib>
        #define THEIR_TESTLIB 1
        inline void registerTestlibCmd(int, char**) {}
        inline void accept() { std::fprintf(stderr, "theirs"); std::exit(0); }
        """
    )
    source = '#include "testlib.h"\n#ifndef THEIR_TESTLIB\n#error ours\n#endif\n' \
             "int main(int c, char** v) { registerTestlibCmd(c, v); accept(); }\n"  # fmt: skip
    files = {"testlib.h": base64.b64encode(header.encode()).decode()}
    data = _judge(tools, "print(1)\n", [{"input": "", "output": "1"}],
                  {"source": source, "files": files})  # fmt: skip
    assert data["verdict"] == "AC" and data["tests"][0]["checker_message"] == "theirs", data


@pytest.mark.parametrize(
    ("checker", "said"),
    [
        ("int main(){}", "'checker' must be of type object"),
        ({"language": "cpp"}, "checker.source"),
        ({"source": "x", "language": "cobol"}, "checker.language"),
        ({"source": "x", "files": {"../x.h": ""}}, "beneath the checker's"),
        ({"source": "x", "files": {"answer.txt": ""}}, "the case's files take"),
        ({"source": "x", "presentation_error": "RE"}, "WA or PE"),
        ({"source": "x", "limits": 1}, "unknown fields"),
    ],
)
def test_a_bad_checker_is_refused_in_one_line(tools: ToolAPI, checker: Any, said: str) -> None:
    arguments = {"program": "print(1)", "test_cases": [{"input": "", "output": "1"}]}
    result = tools.call(tool_name="code_eval", arguments={**arguments, "checker": checker})
    assert not result.success and said in (result.error or ""), result.error
    assert "\n" not in (result.error or "")


def test_a_checker_with_what_it_cannot_judge_is_refused(tools: ToolAPI) -> None:
    checker = {"source": "int main(){}"}
    for arguments in (
        {"program": "def f(): return 1", "tests": "assert f() == 1"},
        {"program": "int main(){}", "language": "cpp", "tests": "/* none */"},
        {"program": "print(1)", "test_cases": [{"input": "", "output": "1"}], "compare": "exact"},
    ):
        result = tools.call(tool_name="code_eval", arguments={**arguments, "checker": checker})
        assert not result.success, arguments
        assert "checker" in (result.error or ""), result.error


def test_the_candidate_never_sees_the_checker_nor_the_answers(tools: ToolAPI) -> None:
    """The candidate searches everything it can read for the checker's source and the jury's
    answer (the workspace, /tmp, other processes' directories and descriptors); a grandchild it
    leaves behind keeps looking while the checker runs, and kills what it can. The checker,
    which waits a little before it judges, must still judge: the program prints what it found,
    and is right only if that is nothing."""
    marker, answer = "checker-" + secrets.token_hex(8), "answer-" + secrets.token_hex(8)
    checker = textwrap.dedent(
        f"""
        # {marker}
        import sys, time
        time.sleep(1)  # the grandchild's chance
        output = open(sys.argv[2]).read().split()
        print(" ".join(output) or "found nothing", file=sys.stderr)
        sys.exit(0 if output == ["nothing"] else 1)
        """
    )
    search = LEAVING_BEHIND + textwrap.dedent(
        """
        import stat
        wanted = tuple(word.encode() + b"-" for word in ("checker", "answer"))
        def found_in(path):
            try:  # not blocking on a pipe: regular files only
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                return False
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return False
                data = os.read(fd, 1 << 20)
            except OSError:
                return False
            finally:
                os.close(fd)
            return any(word in data for word in wanted)
        def search():
            hits = []
            for root in ("..", "../..", "/tmp", "/var/tmp", os.environ.get("TMPDIR", "/tmp")):
                for where, _, names in os.walk(root):
                    hits += [os.path.join(where, n) for n in names
                             if found_in(os.path.join(where, n))]
            for pid in os.listdir("/proc"):
                if pid.isdigit() and int(pid) != os.getpid():
                    for kind in ("cwd", "fd", "root/tmp"):
                        try:
                            entries = os.listdir(f"/proc/{pid}/{kind}")
                        except OSError:
                            continue
                        hits += [f"/proc/{pid}/{kind}/{e}" for e in entries
                                 if found_in(f"/proc/{pid}/{kind}/{e}")]
            return hits
        leave_behind(lambda: search() and kill_all())
        hits = search()
        print(" ".join(hits) if hits else "nothing")
        """
    )
    cases = [{"input": "", "output": answer}] * 2
    data = _judge(tools, search, cases, {"source": checker, "language": "python"})
    assert data["verdict"] == "AC", data  # nothing found, the checker never killed
    assert [c["checker_message"] for c in data["tests"]] == ["nothing"] * 2, data


@pytest.mark.skipif(abi_version() < ABI_SCOPED, reason="Landlock scopes signals from ABI 6")
def test_a_candidates_grandchild_cannot_kill_the_checker(tools: ToolAPI) -> None:
    """Without scoped signals a grandchild left behind could kill the checker, turning its
    wrong answer into a judge error (no verdict at all)."""
    checker = "import sys, time\ntime.sleep(1)\nsys.exit(1)\n"  # every answer is wrong
    killer = LEAVING_BEHIND + "leave_behind(kill_all)\nprint(1)\n"
    data = _judge(tools, killer, [{"input": "", "output": "1"}], {"source": checker,
                  "language": "python"})  # fmt: skip
    assert data["verdict"] == "WA", data


def test_without_landlock_a_checker_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where the kernel has no Landlock the candidate's runs cannot be sealed: judging with a
    checker would let it read the checker and the answers, so it is refused, saying why."""
    from a2e_engine.tools._languages import LANGUAGES
    from a2e_engine.tools.grading import _stdio_judge
    from a2e_engine.tools.grading._judging import JudgeCase

    monkeypatch.setattr(_stdio_judge, "abi_version", lambda: 0)
    options = _stdio_judge.judge_options({"checker": {"source": "int main(){}"}}, 1.0)
    with pytest.raises(ValueError, match="a checker or an interactor needs Landlock"):
        _stdio_judge.judge_cases(
            LANGUAGES["python"], "print(1)", [JudgeCase("", "1")], options, str(tmp_path)
        )
