"""Grading: judging a program by its tests, the one pipeline every front-end's grading goes
through (``code_eval``, ``/submit``'s CommonOJ cases, ``a2e eval``, the verl drop-in).

A request's data takes these shapes, each in one module:

* the problem: its cases (``_judging.JudgeCase``, ``cases_from``), how outputs are compared
  (``_comparisons``) or who judges them (a checker, ``_checker``; an interactor,
  ``_interaction``), and its limits (``_stdio_judge.JudgeOptions``), or Python function tests
  (``_python_grading``, APPS's call-based form in ``_call_based``);
* the program's runs (``tools._submission``: compiled once, each case a fresh process, under
  the engine a fork of the worker's clean template, ``tools._template_cases``; the candidate
  of function tests, ``_candidate`` and ``_candidate_process``, values between them as plain
  data, ``_plain_values``);
* each run's verdict (``_judging``: ``AC``, ``WA``, ``TLE``, ...), and the report of them all
  (``_stdio_judge``, ``_python_grading``), which ``code_eval`` returns (``_code_eval``).

Outside this package only these names are used: the plugin, what the supervisor's compile
store needs to know of a call (``compiled_sources``), and the bounds and rules a front-end
shares with it, and the assets it sends into the sandbox as they are (``assets/``, read by
``asset``: testlib's header, LiveCodeBench's judge).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.tools.grading._assets import asset
    from a2e_engine.tools.grading._code_eval import MAX_TIME_LIMIT_S, CodeEval, compiled_sources
    from a2e_engine.tools.grading._comparisons import COMPARISONS, compare_outputs
    from a2e_engine.tools.grading._judging import MAX_CASES

__all__ = [
    "COMPARISONS",
    "MAX_CASES",
    "MAX_TIME_LIMIT_S",
    "CodeEval",
    "asset",
    "compare_outputs",
    "compiled_sources",
]

__getattr__ = lazy_exports(
    __name__,
    {
        "asset": f"{__name__}._assets",
        "CodeEval": f"{__name__}._code_eval",
        "compiled_sources": f"{__name__}._code_eval",
        "MAX_TIME_LIMIT_S": f"{__name__}._code_eval",
        "COMPARISONS": f"{__name__}._comparisons",
        "compare_outputs": f"{__name__}._comparisons",
        "MAX_CASES": f"{__name__}._judging",
    },
)
