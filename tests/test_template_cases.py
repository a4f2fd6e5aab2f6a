"""Cases forked from a clean template (``tools._template_cases``), with a stand-in worker
(``tests/template_worker.py``, an interpreter of its own): the case is the worker's own child,
runs as ``python main.py``, gets its descriptors through the template, and a template's
answer that is not one of the worker's children is refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="clone(CLONE_PARENT) is Linux's")

ROOT = Path(__file__).resolve().parents[1]


def _worker(scenario: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "tests.template_worker", scenario],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


def test_a_case_is_the_workers_child_and_runs_as_main() -> None:
    seen = _worker("cases")
    for run, word in zip(seen["runs"], ("first", "second"), strict=True):  # one template
        assert run["status"] == 3, run
        assert run["stdout"] == f"{word.upper()} ['main.py', 'one'] __main__ {seen['me']}\n"
        assert run["pid"] != seen["template"]


def test_a_cases_main_thread_is_its_own() -> None:
    """The clone leaves glibc's record of the thread holding the case's own id (and Python's):
    another thread signals the main one, its CPU clock reads, its id is the process's."""
    (run,) = _worker("threads")["runs"]
    assert (run["status"], run["stdout"]) == (0, "['usr1'] True True\n"), run


def test_a_case_that_kills_the_template_ends_the_cases_with_an_error() -> None:
    """Unscoped (here) a case could kill the template: the next case then fails to start,
    with an error, not a hang and not a run."""
    first, second = _worker("kill")["runs"]
    assert first["status"] == 0, first
    assert "error" in second, second


def test_a_pid_that_is_not_the_workers_child_is_refused() -> None:
    (run,) = _worker("lie")["runs"]
    assert "could not start the program" in run.get("error", ""), run


def test_a_sibling_fork_is_its_parents_parents_child() -> None:
    seen = _worker("sibling")
    assert seen["parent"] == seen["me"], seen
    assert seen["reaped"] != seen["middle"] and seen["status"] == 7, seen
