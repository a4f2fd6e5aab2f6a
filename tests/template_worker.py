"""A stand-in worker for ``tests/test_template_cases.py``, run as ``python -m
tests.template_worker SCENARIO`` in an interpreter of its own, as a worker is: its clean
template forks cases with ``clone(CLONE_PARENT)``, which skips the at-fork handlers that a
library loaded by the test process (gRPC, by the Ray tests) needs in its children. It prints
one JSON object: what the scenario saw."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from a2e_engine.sandbox._forking import fork_as_sibling, prepare_sibling_forks
from a2e_engine.sandbox._frames import read_frame, write_frame
from a2e_engine.sandbox._template import Template, fork_serving
from a2e_engine.tools._python_main import (
    FreshInterpreter,
    MainProgram,
    remember_fresh_interpreter,
)
from a2e_engine.tools._python_main import fresh_interpreter as fresh_interpreter_of
from a2e_engine.tools._template_cases import ROLE, TemplateCases, serve_cases


def _serve(channel: int) -> None:
    if read_frame(channel) == ROLE:
        serve_cases(channel)


def _lie(channel: int) -> None:
    """Answers every case with a pid that is not the worker's child: the worker's parent."""
    read_frame(channel)
    while True:
        try:
            read_frame(channel)
        except EOFError:
            return
        write_frame(channel, {"pid": os.getppid()})


def _run(
    cases: TemplateCases, fresh: FreshInterpreter, source: str, stdin: bytes
) -> dict[str, Any]:
    """One case: its pid, its exit status, its stdout and its stderr; or the error that kept it
    from starting."""
    where = tempfile.mkdtemp()
    with open(os.path.join(where, "main.py"), "w") as fh:
        fh.write(source)
    stdin_r, stdin_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    os.write(stdin_w, stdin)
    os.close(stdin_w)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    try:
        child = cases.start(
            fresh, MainProgram("main.py", ["one"], where, env), (stdin_r, out_w, err_w), (), None
        )
    except OSError as exc:
        return {"error": str(exc)}
    finally:
        for fd in (stdin_r, out_w, err_w):
            os.close(fd)
    _, status = os.waitpid(child.pid, 0)  # ours to reap: the case is this process's child
    outputs = []
    for fd in (out_r, err_r):
        with os.fdopen(fd, "rb") as stream:
            outputs.append(stream.read().decode())
    code = os.waitstatus_to_exitcode(status)
    return {"pid": child.pid, "status": code, "stdout": outputs[0], "stderr": outputs[1]}


def main(scenario: str) -> dict[str, Any]:
    assert remember_fresh_interpreter() is None
    assert prepare_sibling_forks()
    fresh = fresh_interpreter_of()
    assert fresh is not None
    if scenario == "sibling":
        read_end, write_end = os.pipe()
        middle = os.fork()
        if middle == 0:
            if fork_as_sibling() == 0:
                os.write(write_end, str(os.getppid()).encode())
            os._exit(7)
        os.close(write_end)
        os.waitpid(middle, 0)
        with os.fdopen(read_end, "rb") as said:
            parent = int(said.read())
        pid, status = os.waitpid(-1, 0)
        return {
            "me": os.getpid(),
            "parent": parent,
            "middle": middle,
            "reaped": pid,
            "status": os.waitstatus_to_exitcode(status),
        }
    template = Template(*fork_serving(_lie if scenario == "lie" else _serve))
    try:
        cases = TemplateCases(template)
        seen: dict[str, Any] = {"me": os.getpid(), "template": template.pid, "runs": []}
        for source, stdin in SCENARIOS[scenario](template.pid):
            seen["runs"].append(_run(cases, fresh, source, stdin))
        return seen
    finally:
        template.close()


#: What a new interpreter's main thread is, seen from the program: signalled from another thread,
#: its CPU clock read, its id the process's.
THREADS = """
import os, signal, threading, time
got = []
signal.signal(signal.SIGUSR1, lambda *a: got.append("usr1"))
main = threading.main_thread()
other = threading.Thread(target=lambda: signal.pthread_kill(main.ident, signal.SIGUSR1))
other.start()
other.join()
time.sleep(0.05)
clock = time.clock_gettime(time.pthread_getcpuclockid(threading.get_ident()))
print(got, main.native_id == threading.get_native_id() == os.getpid(), clock >= 0)
"""

SCENARIOS = {
    "cases": lambda _: [
        (
            "import os, sys\nprint(input().upper(), sys.argv, __name__, os.getppid())\nsys.exit(3)\n",
            f"{word}\n".encode(),
        )
        for word in ("first", "second")
    ],
    "kill": lambda template: [
        (f"import os, signal\nos.kill({template}, signal.SIGKILL)\n", b""),
        ("print('ran')\n", b""),
    ],
    "lie": lambda _: [("print(1)\n", b"")],
    "threads": lambda _: [(THREADS, b"")],
}

if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
