"""``a2e eval``: a whole benchmark graded through the engine, one command.

``datasets`` reads problems and samples and says how each sample is graded (which ``code_eval``
arguments); ``results`` writes each sample's result as it finishes and reads back a partial
file to resume; ``pass_at_k`` is the unbiased estimator; ``progress`` the line on stderr;
``runner`` ties them to an engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

from a2e._lazy import lazy_exports

if TYPE_CHECKING:
    from a2e_engine.engine.evaluation._runner import EvalOptions, EvalPlan, evaluate, prepare

__all__ = ["EvalOptions", "EvalPlan", "evaluate", "prepare"]

__getattr__ = lazy_exports(__name__, dict.fromkeys(__all__, "a2e_engine.engine.evaluation._runner"))
