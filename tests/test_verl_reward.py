"""The verl drop-in (``a2e.adapters.verl``) gives what verl's own SandboxFusion reward gives.

The oracle is verl's client path, written anew from its code (volcengine/verl b178a3c,
``verl/utils/reward_score/sandbox_fusion``, unchanged from v0.6.0 to 0.10.0.dev) in
``benchmarks._verl_client``: the code cut from the completion, one ``/run_code`` POST per case
with verl's eight fields, each answer mapped as ``_process_single_case`` maps it, and
``continuous=True``'s score. Both run against
one real ``a2e serve --http`` on 127.0.0.1: the oracle through the SandboxFusion API, the
drop-in through one ``code_eval`` per sample. On this machine the same corpus also gave the
same scores and per-case results from verl 0.9.1's own code (installed without its
dependencies) as from the drop-in.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from a2e.adapters import verl
from a2e_engine.benchmarks._verl_client import verl_reward
from a2e_engine.benchmarks.reward_batch import engine_calls
from tests.service_process import ServiceProcess

ADD = json.dumps({"inputs": ["1 2\n", "3 4\n", "10 20\n"], "outputs": ["3\n", "7", "30\n"]})
CALLED = json.dumps(
    {
        "inputs": ["1\n2", "[1, 2]\n3", '"ab"\n2'],
        "outputs": ["3", "[1, 2, 3]", "abab"],
        "fn_name": "f",
    }
)
READ = "a, b = map(int, input().split())\n"

#: (completion, ground truth): right, a trailing space, wrong, an exit 3 in one case, a case
#: past the time limit, a program that does not parse, no fence, other fences, a MemoryError,
#: call-based right, raising, printing a float for an int, and text with \r and newlines.
SAMPLES: list[tuple[str, Any]] = [
    (f"```python\n{READ}print(a + b)\n```", ADD),
    (f"```python\n{READ}print(a + b, end=' \\n')\n```", ADD),
    (f"```python\n{READ}print(a * b)\n```", ADD),
    (f"```python\nimport sys\n{READ}if a == 3: sys.exit(3)\nprint(a + b)\n```", ADD),
    (f"```python\nimport time\n{READ}if a == 10: time.sleep(30)\nprint(a + b)\n```", ADD),
    ("```python\nprint(1 +\n```", ADD),
    ("print(3) without a fence", ADD),
    (f"Here:\n```py\n{READ}print(a + b)\n```\nand ```python3\nx\n```", ADD),
    (f"```\n{READ}print(a + b)\n```", ADD),
    ("```python\nx = [0] * (10**10)\n```", ADD),
    (
        "```python\ndef f(a, b):\n    if isinstance(a, list): return a + [b]\n"
        "    return a * b if isinstance(a, str) else a + b\n```",
        CALLED,
    ),
    ("```python\nclass Solution:\n    def f(self, a, b):\n        raise ValueError\n```", CALLED),
    ("```python\ndef f(a, b): return float(a + b) if isinstance(a, int) else a\n```", CALLED),
    (
        "```python\nprint(input().upper())\n```",
        {"inputs": ["abc", "x\r"], "outputs": ["ABC\n\n", "X\r"]},
    ),
    ("```python\nprint(1)\n```", "not JSON"),
    ("```python\nprint(1)\n```", json.dumps({"inputs": []})),
]


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess("--max-workers", "4")
    yield server
    assert server.stop() == 0


def _verls_reward(
    url: str, completion: str, truth: Any, language: str = "python"
) -> tuple[float, list[Any]]:
    """verl's ``compute_score(..., continuous=True)`` through the server's ``/run_code``."""
    with httpx.Client() as client:
        semaphore = threading.Semaphore(32)
        run_code = f"{url}/run_code"
        return verl_reward(run_code, completion, truth, semaphore, client, language=language)


def test_the_drop_in_gives_verls_scores_and_case_results(service: ServiceProcess) -> None:
    url = service.url
    with ThreadPoolExecutor(6) as pool:  # side by side: a sample past its time limit takes 10 s
        graded = [
            (
                pool.submit(verl.compute_score_with_cases, completion, truth, a2e_url=url),
                pool.submit(_verls_reward, url, completion, truth),
                pool.submit(verl.compute_score, "codecontests", completion, truth, {}, a2e_url=url),
            )
            for completion, truth in SAMPLES
        ]
    for (completion, _), (mine, theirs, plain) in zip(SAMPLES, graded, strict=True):
        (score, results), (wanted_score, wanted) = mine.result(), theirs.result()
        assert score == pytest.approx(wanted_score), (completion, results, wanted)
        assert results == wanted, (completion, results, wanted)  # verl's words for no case run
        assert plain.result() == score


CPP_READ = "#include <bits/stdc++.h>\nint main() { long a, b; std::cin >> a >> b; "
#: C++ samples, graded in the language ``extra_info`` names: right, wrong, an exit 3 in one
#: case, and a compile error (-4 on every case).
CPP_SAMPLES = [
    f"```cpp\n{CPP_READ}std::cout << a + b << std::endl; }}\n```",
    f"```cpp\n{CPP_READ}std::cout << a * b; }}\n```",
    f"```cpp\n{CPP_READ}if (a == 3) return 3; std::cout << a + b; }}\n```",
    f"```cpp\n{CPP_READ}std::cout << a + b }}\n```",
]


def test_a_compiled_language_named_by_extra_info(service: ServiceProcess) -> None:
    """``extra_info["language"]``: the sample graded as verl's ``check_correctness`` grades it
    in that language (a compile error -4 on every case); a language not served, -1 a case."""
    expected = [
        (1.0, [True, True, True]),
        (0.0, [False, False, False]),
        (pytest.approx(2 / 3), [True, -2, True]),
        (0.0, [-4, -4, -4]),
    ]
    for completion, wanted in zip(CPP_SAMPLES, expected, strict=True):
        info = {"language": "cpp"}
        score = verl.compute_score("x", completion, ADD, info, a2e_url=service.url)
        graded = verl.compute_score_with_cases(completion, ADD, a2e_url=service.url, language="cpp")
        assert (score, graded[1]) == wanted, completion
        assert graded == _verls_reward(service.url, completion, ADD, "cpp"), completion
    julia = verl.compute_score_with_cases(
        "```julia\n1\n```", ADD, a2e_url=service.url, language="julia"
    )
    assert julia == (0.0, [-1, -1, -1])


def test_the_score_judges_the_first_ten_cases_only(service: ServiceProcess) -> None:
    """The score is the share of the first ten that passed: ``compute_score`` runs no more
    (the engine's calls say so), ``compute_score_with_cases`` runs and returns them all."""
    many = json.dumps({"inputs": [f"{i} {i}\n" for i in range(14)], "outputs": ["0"] * 14})
    doubled = f"```python\n{READ}print(a - b)\n```"
    before = _engine_calls(service.url)
    assert verl.compute_score("x", doubled, many, None, a2e_url=service.url) == 1.0
    assert _engine_calls(service.url) == before + 10
    score, results = verl.compute_score_with_cases(doubled, many, a2e_url=service.url)
    assert (score, results) == (1.0, [True] * 14)
    assert _engine_calls(service.url) == before + 24


def _engine_calls(url: str) -> int:
    counted = engine_calls(url)
    assert counted is not None
    return counted


def test_what_each_sample_scores(service: ServiceProcess) -> None:
    """The corpus's rewards as verl's code gave them on this corpus: so that an oracle and a
    drop-in that drifted together still fail."""
    with ThreadPoolExecutor(6) as pool:
        scored = [
            pool.submit(verl.compute_score, "x", completion, truth, None, a2e_url=service.url)
            for completion, truth in SAMPLES
        ]
        late = pool.submit(verl.compute_score_with_cases, *SAMPLES[4], a2e_url=service.url)
        scores = [future.result() for future in scored]
    third = pytest.approx(2 / 3)
    # fmt: off
    assert scores == [
        1.0, 0.0, 0.0, third, third, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0
    ]
    # fmt: on
    assert late.result()[1] == [True, True, -3]
    assert verl.compute_score_with_cases(SAMPLES[5][0], ADD, a2e_url=service.url)[1] == [-2] * 3
    memory = verl.compute_score_with_cases(SAMPLES[9][0], ADD, a2e_url=service.url)[1]
    assert memory == [-2] * 3  # MemoryError: a runtime error, as SandboxFusion's python gives it


def test_the_batched_form_and_an_engine_that_cannot_be_reached(service: ServiceProcess) -> None:
    completions = [completion for completion, _ in SAMPLES[:4]]
    truths = [truth for _, truth in SAMPLES[:4]]
    batched = verl.compute_score_batch(
        ["x"] * 4, completions, truths, [None] * 4, a2e_url=service.url, max_concurrent=2
    )
    assert batched == [1.0, 0.0, 0.0, pytest.approx(2 / 3)]
    # Nothing listens there (a port of our own, closed): -1 for each case, no exception.
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}"
    assert verl.compute_score_with_cases(SAMPLES[0][0], ADD, a2e_url=closed) == (0.0, [-1] * 3)
    assert verl.compute_score_with_cases(SAMPLES[0][0], ADD, a2e_url="ftp://x") == (0.0, [-1] * 3)


def test_asserts_outputs_to_ignore_and_cases_that_do_not_pair_up(service: ServiceProcess) -> None:
    """verl's other forms: ``assert_case`` (KodCode's: the code with each case's asserts after
    it, passing when it runs), an expected output of None (any output passes), and inputs and
    outputs that do not pair up (-1 each, untried)."""
    code = "```python\ndef f(x):\n    return x * 2\n```"
    asserted = {"assert_case": ["assert f(2) == 4", "assert f(2) == 5", "f(None + 1)"]}
    assert verl.compute_score_with_cases(code, asserted, a2e_url=service.url) == (
        pytest.approx(1 / 3),
        [True, -2, -2],
    )
    anything = json.dumps({"inputs": ["", "", ""], "outputs": [None, "2", None]})
    printing = "```python\nprint(2)\n```"
    assert verl.compute_score_with_cases(printing, anything, a2e_url=service.url) == (
        1.0,
        [True, True, True],
    )
    unpaired = {"inputs": ["1", "2", "3"], "outputs": ["1"]}
    assert verl.compute_score_with_cases(printing, unpaired, a2e_url=service.url) == (0.0, [-1] * 3)
    assert verl.compute_score_with_cases(None, ADD, a2e_url=service.url)[0] == 0.0  # type: ignore[arg-type]


def test_connections_the_server_closed_while_idle_are_not_reused(service: ServiceProcess) -> None:
    """An RL step's rewards come minutes apart, and the server closes a connection idle for
    5 s: the next step's samples must still be graded, on new connections."""
    batch = [SAMPLES[0][0]] * 4
    truths = [ADD] * 4
    kwargs = {"a2e_url": service.url, "max_concurrent": 4}
    assert verl.compute_score_batch(["x"] * 4, batch, truths, None, **kwargs) == [1.0] * 4
    time.sleep(6)
    assert verl.compute_score_batch(["x"] * 4, batch, truths, None, **kwargs) == [1.0] * 4


def test_the_trainer_process_loads_nothing_of_the_engine() -> None:
    """verl imports the drop-in in its trainer's processes: it must not bring the engine (its
    service, its sandbox layers) with it, only the standard library and the client side."""
    probe = (
        "import sys\n"
        "import a2e.adapters.verl\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('a2e_engine', 'pydantic', "
        "'starlette', 'psutil')))\n"
    )
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]", ran.stdout
