"""A Python program run as a fork of the worker's warm interpreter (``tools._python_main``) looks,
to itself and to whoever judges it, as under ``python main.py`` in a fresh interpreter: one
corpus of programs runs both ways through ``run_code`` in real sandboxed workers, and each gives
the same stdout, stderr (its run directory's name aside), exit status and verdict."""

from __future__ import annotations

import base64
import io
import re
from pathlib import Path
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.tools import _python_main as python_main
from a2e_engine.tools._languages import LANGUAGES
from a2e_engine.tools._steps import Program, Role, RunLimits
from a2e_engine.tools._submission import Submission

#: Each program: (name, code, extra run_code arguments).
CORPUS: list[tuple[str, str, dict[str, Any]]] = [
    (
        "main module",
        "import os, sys\n"
        "print(__name__, sys.argv, __file__ == os.path.abspath('main.py'))\n"
        "print(sys.path[0] == os.getcwd() == os.path.dirname(__file__))\n"
        "print(__spec__, type(__loader__).__name__, __package__, __cached__)\n"
        "import __main__; print(__main__.__file__ == __file__, __main__.__dict__ is globals())\n"
        "print(sorted(globals()))\n",
        {"args": ["a", "b c"]},
    ),
    ("docstring", '"""The doc."""\nprint(__doc__)\n', {}),
    ("stdin", "a, b = map(int, input().split())\nprint(a + b)\n", {"stdin": "3 4\n"}),
    (
        "stdin read",
        "import sys\ndata = sys.stdin.read()\nprint(len(data), data.count('\\n'))\n",
        {"stdin": "x\n" * 50_000},
    ),
    ("no stdin", "print(input())\n", {}),
    (
        "carriage returns stay in the lines read",
        "import sys\nprint(repr(input()), repr(sys.stdin.read()))\n",
        {"stdin": "x\r\ny\rz\r"},
    ),
    ("exit status", "import sys\nprint('out')\nsys.exit(3)\n", {}),
    ("exit message", "import sys\nsys.exit('bye')\n", {}),
    ("exit builtin", "exit(4)\n", {}),
    ("exit none", "raise SystemExit\n", {}),
    ("exception", "def f(x):\n    return 1 / x\nprint('before')\nf(0)\n", {}),
    ("chained", "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('v') from e\n", {}),
    ("syntax error", "print('a'\n", {}),
    ("keyboard interrupt", "raise KeyboardInterrupt\n", {}),
    ("os._exit drops what is buffered", "import os\nprint('lost')\nos._exit(5)\n", {}),
    ("no newline", "import sys\nsys.stdout.write('no newline')\n", {}),
    (
        "interleaved streams",
        "import sys\nfor i in range(3):\n    print(i)\n    print(-i, file=sys.stderr)\n",
        {},
    ),
    ("atexit", "import atexit\natexit.register(print, 'at exit')\nprint('main')\n", {}),
    ("atexit error", "import atexit\natexit.register(lambda: 1 / 0)\n", {}),
    (
        "signal",
        "import os, signal\nprint('x', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)\n",
        {},
    ),
    (
        "signal handler",
        "import os, signal\nsignal.signal(signal.SIGUSR1, lambda *a: print('got'))\n"
        "os.kill(os.getpid(), signal.SIGUSR1)\n",
        {},
    ),
    (
        "thread outlives main",
        "import threading, time\n"
        "threading.Thread(target=lambda: (time.sleep(0.2), print('thread'))).start()\nprint('main')\n",
        {},
    ),
    (
        "fresh process",
        "import os, signal, sys, threading\n"
        "print(sorted(os.listdir('/proc/self/fd')))\n"
        "print(threading.active_count(), threading.current_thread() is threading.main_thread())\n"
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,\n"
        "      signal.getsignal(signal.SIGPIPE), signal.getsignal(signal.SIGTERM))\n"
        "print(os.getpgid(0) == os.getsid(0) == os.getpid())\n"
        "print(sorted(m for m in sys.modules if m.partition('.')[0] in ('a2e', 'a2e_engine')))\n",
        {},
    ),
    (
        "environment",
        "import os, tempfile\nprint(sorted(os.environ))\n"
        "print(tempfile.gettempdir() == os.environ['TMPDIR'])\n",
        {},
    ),
    (
        "streams",
        "import sys\nfor s in (sys.stdin, sys.stdout, sys.stderr):\n"
        "    print(s.name, s.mode, s.encoding, s.errors, s.line_buffering, s.write_through,\n"
        "          s is getattr(sys, '__' + s.name.strip('<>') + '__'))\n",
        {},
    ),
    ("unicode", "print('héllo ✓ \\udcff')\n", {}),
    (
        "interpreter",
        "import sys\nprint(sys.flags, sys.orig_argv[1:], sys.getrecursionlimit())\n",
        {},
    ),
    (
        "warnings",
        "import warnings\nwarnings.warn('careful')\n"
        "warnings.warn('old', DeprecationWarning)\nimport warnings as w; print(len(w.filters))\n",
        {},
    ),
    ("deep recursion", "def f(n):\n    return n if n == 0 else f(n - 1)\nprint(f(985))\n", {}),
    ("too deep", "def f(n):\n    return f(n + 1)\nf(0)\n", {}),
    (
        "recursion limit",
        "import sys\nsys.setrecursionlimit(10**5)\n"
        "def f(n):\n    return n if n == 0 else f(n - 1)\nprint(f(50_000), sys.getrecursionlimit())\n",
        {},
    ),
    (
        "a module of its own",
        "import helper\nprint(helper.value, helper.__file__.endswith('helper.py'))\n",
        {"files": {"helper.py": base64.b64encode(b"value = 42\n").decode()}},
    ),
    (
        "children",
        "import subprocess, sys\n"
        "print(subprocess.run([sys.executable, '-c', 'print(6*7)'], capture_output=True).stdout)\n",
        {},
    ),
    ("writes a file", "open('out.txt', 'w').write('kept')\n", {"fetch_files": ["out.txt"]}),
    (
        "custom excepthook",
        "import sys\nsys.excepthook = lambda t, v, tb: print('hooked', t.__name__)\n"
        "raise RuntimeError\n",
        {},
    ),
    ("time limit", "while True:\n    pass\n", {"run_timeout": 1}),
    ("memory limit", "x = bytearray(200 * 1024 * 1024)\nprint(len(x))\n", {"memory_mb": 100}),
]

#: What differs between any two runs: the run's own directory, named at random, and where
#: objects lie in memory.
RANDOM = (re.compile(r"run-[a-z0-9_]{8}"), re.compile(r"0x[0-9a-f]{6,}"))


def _same_for_every_run(text: str) -> str:
    for pattern in RANDOM:
        text = pattern.sub("X", text)
    return text


def _seen(result: dict[str, Any]) -> dict[str, Any]:
    """What a judge reads of a run: the verdict, and the run's exit status and output."""
    assert result["status"] in ("Success", "Failed"), result
    run = result["run_result"]
    return {
        "status": result["status"],
        "run_status": run["status"],
        "return_code": run["return_code"],
        "stdout": _same_for_every_run(run["stdout"]),
        "stderr": _same_for_every_run(run["stderr"]),
        "files": result["files"],
    }


@pytest.mark.parametrize(("name", "code", "extra"), CORPUS, ids=[name for name, _, _ in CORPUS])
def test_a_warm_run_is_what_a_fresh_interpreter_gives(
    tools: ToolAPI, name: str, code: str, extra: dict[str, Any]
) -> None:
    ran = {}
    for fresh in (True, False):
        arguments = {"language": "python", "code": code, "fresh_interpreter": fresh, **extra}
        result = tools.call(tool_name="run_code", arguments=arguments, timeout=30)
        assert result.success, result.error
        ran[fresh] = _seen(result.data)
    assert ran[False] == ran[True]


def test_a_warm_run_is_a_fork_of_the_worker(tools: ToolAPI) -> None:
    """What tells the two apart from the inside: the standard library modules the worker had
    imported (``selectors``, which runs the program's pipes) are already in ``sys.modules``."""
    code = "import sys\nprint('selectors' in sys.modules)"
    imported = {}
    for fresh in (True, False):
        arguments = {"language": "python", "code": code, "fresh_interpreter": fresh}
        result = tools.call(tool_name="run_code", arguments=arguments)
        assert result.success and result.data["status"] == "Success", result
        imported[fresh] = result.data["run_result"]["stdout"]
    assert imported == {True: "False\n", False: "True\n"}


def test_without_a_reading_of_a_fresh_interpreter_programs_run_in_one(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Where a fresh interpreter cannot be read (the probe fails), warm runs are off, said in
    the log, and a program runs in an interpreter of its own, as before."""
    monkeypatch.setattr(python_main, "_fresh", None)
    monkeypatch.setattr(python_main, "_PROBE", "raise SystemExit(3)")
    why = python_main.remember_fresh_interpreter()
    assert why is not None and "could not be read" in why
    assert "run in a new interpreter each" in caplog.text
    program = Program(LANGUAGES["python"], "import sys\nprint(sys.orig_argv)", {}, Role.ONCE)
    submission = Submission(program, str(tmp_path))
    try:
        assert submission.steps.warm is None
        out, err = io.StringIO(), io.StringIO()
        ran = submission.run(submission.home, None, [], RunLimits(10, 256), out, err)
    finally:
        submission.close()
    assert ran["return_code"] == 0 and ran["stdout"].endswith("'main.py']\n"), ran


#: The corpus's programs that a stdin/stdout case can run: no files, limits or arguments.
AS_CASES = [(name, code, extra) for name, code, extra in CORPUS if set(extra) <= {"stdin"}]


@pytest.mark.parametrize(("name", "code", "extra"), AS_CASES, ids=[n for n, _, _ in AS_CASES])
def test_a_case_forked_from_the_template_is_what_a_fresh_interpreter_gives(
    tools: ToolAPI, name: str, code: str, extra: dict[str, Any]
) -> None:
    """``code_eval`` forks a Python program's cases from its worker's clean template
    (``tools._template_cases``): each is judged on what a fresh interpreter prints, exactly,
    and ends as it ends there."""
    fresh = tools.call(
        tool_name="run_code",
        arguments={"language": "python", "code": code, "fresh_interpreter": True, **extra},
        timeout=30,
    )
    assert fresh.success, fresh.error
    run = fresh.data["run_result"]
    case = {"input": extra.get("stdin", ""), "output": run["stdout"]}
    judged = tools.call(
        tool_name="code_eval",
        arguments={"language": "python", "program": code, "compare": "exact", "test_cases": [case]},
        timeout=30,
    )
    assert judged.success, judged.error
    if "SyntaxError" in run["stderr"]:
        assert judged.data["verdict"] == "CE", judged.data
        return
    (seen,) = judged.data["tests"]
    if run["return_code"] == 0:
        assert seen["verdict"] == "AC", seen
        return
    assert (seen["verdict"], seen["return_code"]) == ("RE", run["return_code"]), seen
    assert _same_for_every_run(seen["stdout"]) == _same_for_every_run(run["stdout"]), seen
