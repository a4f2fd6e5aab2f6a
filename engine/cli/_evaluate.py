"""``a2e eval``: a benchmark's samples graded through the engine (``engine.evaluation``), pass@k
printed as JSON."""

from __future__ import annotations

import argparse
import json
import os

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine.cli._arguments import Subcommands, positive_seconds
from a2e_engine.engine.cli._engine_options import add_engine_options, engine_from_args, started
from a2e_engine.engine.cli._errors import UsageError

__all__ = ["EVAL_MAX_TIMEOUT_S", "register"]

#: ``a2e eval``'s cap on one call: judging a program on many test cases takes long.
EVAL_MAX_TIMEOUT_S = 3600


def register(sub: Subcommands) -> None:
    """Add ``a2e eval``."""
    grader = sub.add_parser(
        "eval",
        help="grade a benchmark's samples and print pass@k (HumanEval, MBPP, APPS, MultiPL-E)",
        description="Grade every sample through the engine, writing each result to --out as "
        "it finishes (a run that stopped resumes from that file), then print pass@k as JSON.",
    )
    grader.add_argument("--problems", required=True, metavar="FILE", help="problems, .jsonl[.gz]")
    grader.add_argument("--samples", required=True, metavar="FILE", help="samples, .jsonl[.gz]")
    grader.add_argument("--out", required=True, metavar="FILE", help="results, .jsonl")
    grader.add_argument(
        "-k", type=ks, default=(1, 10, 100), metavar="K,K...", help="pass@k for these k"
    )
    grader.add_argument(
        "--workers", type=int, default=os.cpu_count() or 2, help="samples graded at once"
    )
    grader.add_argument(
        "--timeout",
        type=positive_seconds,
        default=3.0,
        metavar="S",
        help="seconds per sample, or per test case when judged by output (default 3)",
    )
    grader.add_argument(
        "--language", default="python", help="for samples and problems that do not say"
    )
    add_engine_options(grader)
    grader.set_defaults(func=run_eval)


def run_eval(args: argparse.Namespace) -> int:
    """A whole benchmark's samples graded through the engine (``engine.evaluation``)."""
    from a2e_engine.engine.evaluation import EvalOptions, evaluate, prepare

    options = EvalOptions(
        problems=args.problems,
        samples=args.samples,
        out=args.out,
        ks=args.k,
        workers=args.workers,
        seconds=args.timeout,
        language=args.language,
    )
    try:
        plan = prepare(options)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    # The engine runs as many calls at once as there are workers, unless told otherwise.
    for flag in ("max_workers", "prefork"):
        if getattr(args, flag) is None:
            setattr(args, flag, args.workers)
    if args.max_timeout is None:
        args.max_timeout = EVAL_MAX_TIMEOUT_S
    try:
        with started(engine_from_args(args)) as engine:
            summary = evaluate(plan, lambda: ToolAPI(engine.connect(client_name="a2e-eval")))
    finally:
        plan.close()
    print(json.dumps(summary))
    return 0


def ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of numbers: {text!r}") from None
    if not ks or min(ks) < 1:
        raise argparse.ArgumentTypeError(f"each k must be at least 1: {text!r}")
    return ks
