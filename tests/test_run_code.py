"""``run_code``: a program with stdin and files, judged the way SandboxFusion reports it."""

from __future__ import annotations

import base64
import hashlib
import os
import socket
from collections.abc import Iterator

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.tools._languages import LANGUAGES


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine(config=EngineConfig(prefork=1)) as engine:
        yield ToolAPI(engine.connect())


def _run(tools: ToolAPI, **arguments: object) -> dict:
    result = tools.call(tool_name="run_code", arguments=arguments)
    assert result.success, result.error
    assert isinstance(result.data, dict)
    return result.data


def test_stdin_files_and_fetched_files(tools: ToolAPI) -> None:
    code = (
        "import sys\nname = sys.stdin.read().strip()\nprint('hello', name)\n"
        "open('out/result.txt', 'w').write(open('data/in.txt').read() * 2)"
    )
    data = _run(
        tools,
        language="python",
        code=code,
        stdin="world\n",
        files={"data/in.txt": base64.b64encode(b"ab").decode(), "out/.keep": ""},
        fetch_files=["out/result.txt", "missing.txt", "../../../../etc/hostname"],
    )
    assert data["status"] == "Success" and data["compile_result"] is None
    run = data["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == 0
    assert run["stdout"] == "hello world\n" and run["stderr"] == ""
    assert run["execution_time"] > 0
    # What does not exist, or lies outside the run's directory, is left out.
    assert data["files"] == {"out/result.txt": base64.b64encode(b"abab").decode()}


def test_stdin_larger_than_a_pipe_holds_reaches_the_program_whole_or_not_at_all(
    tools: ToolAPI,
) -> None:
    stdin = "".join(f"{n}\n" for n in range(300_000))  # 2 MB: the pipe takes 64 KiB at a time
    digest = "import hashlib, sys\nprint(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())"
    expected = hashlib.sha256(stdin.encode()).hexdigest() + "\n"
    for language, code in (("python", digest), ("bash", "sha256sum | cut -d' ' -f1")):
        data = _run(tools, language=language, code=code, stdin=stdin)
        assert data["run_result"]["stdout"] == expected, (language, data["run_result"])
    # Read in part, or not at all, or kept open by a child that never reads: the run ends
    # when the program does, as it would without any stdin.
    for code in (
        "import sys\nprint(sys.stdin.readline().strip())",
        "print('ignored')",
        "import subprocess\nsubprocess.Popen(['sleep', '30'])\nprint('left')",
    ):
        data = _run(tools, language="python", code=code, stdin=stdin, run_timeout=20)
        run = data["run_result"]
        assert data["status"] == "Success" and run["execution_time"] < 5, run
        assert run["stdout"] in ("0\n", "ignored\n", "left\n"), run


def test_a_failing_program_is_failed_with_its_exit_code_and_stderr(tools: ToolAPI) -> None:
    data = _run(tools, language="python", code="print('partial')\nraise SystemExit(3)")
    assert data["status"] == "Failed" and data["run_result"]["return_code"] == 3
    assert data["run_result"]["stdout"] == "partial\n"
    data = _run(tools, language="python", code="def broken(:\n")
    assert data["status"] == "Failed" and "SyntaxError" in data["run_result"]["stderr"]
    data = _run(tools, language="bash", code="echo $((6 * 7)); echo oops >&2; exit 1")
    assert data["run_result"]["stdout"] == "42\n" and data["run_result"]["stderr"] == "oops\n"
    assert data["status"] == "Failed"


def test_past_its_time_limit_the_program_and_its_children_are_killed(tools: ToolAPI) -> None:
    code = "sleep 30 &\necho started\nsleep 30"
    data = _run(tools, language="bash", code=code, run_timeout=0.5)
    run = data["run_result"]
    assert data["status"] == "Failed" and run["status"] == "TimeLimitExceeded"
    assert run["return_code"] is None and run["stdout"] == "started\n"
    assert 0.5 <= run["execution_time"] < 5


def test_a_program_that_closes_its_output_is_still_held_to_its_time_limit(
    tools: ToolAPI,
) -> None:
    """Its pipes closed, nothing is left to read: it must still be watched to its limit, not
    waited for (which held the worker until the call's own deadline)."""
    code = "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n"
    result = tools.call(
        tool_name="run_code",
        arguments={"language": "python", "code": code, "run_timeout": 0.5},
        timeout=30,
    )
    assert result.success, result.error
    run = result.data["run_result"]
    assert (run["status"], run["exceeded"]) == ("TimeLimitExceeded", "wall_time")
    assert run["execution_time"] < 5


def test_files_cannot_be_written_outside_the_run(tools: ToolAPI) -> None:
    content = base64.b64encode(b"x").decode()
    result = tools.call(
        tool_name="run_code",
        arguments={"language": "python", "code": "1", "files": {"../../escape.txt": content}},
    )
    assert not result.success and "outside the allowed roots" in (result.error or "")
    result = tools.call(
        tool_name="run_code",
        arguments={"language": "python", "code": "1", "files": {"a.txt": "not base64!"}},
    )
    assert not result.success and "not base64" in (result.error or "")


def test_an_unknown_language_is_refused_naming_the_known_ones(tools: ToolAPI) -> None:
    result = tools.call(tool_name="run_code", arguments={"language": "cobol", "code": ""})
    assert result.error_code == "tool_error" and "not 'cobol'" in (result.error or "")
    assert all(f"'{name}'" in (result.error or "") for name in LANGUAGES)


def test_the_program_cannot_reach_a_server_on_the_host(tools: ToolAPI) -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        code = (
            f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n"
            "    print('connected')\nexcept OSError as exc:\n    print('refused', exc.errno)"
        )
        data = _run(tools, language="python", code=code)
    assert data["run_result"]["stdout"].startswith("refused"), data


def test_one_submission_is_compiled_once(tools: ToolAPI) -> None:
    code = '#include "greeting.h"\n#include <stdio.h>\nint main() { puts(GREETING); }'
    header = {"greeting.h": base64.b64encode(b'#define GREETING "first"\n').decode()}
    first = _run(tools, language="c", code=code, files=header)
    again = _run(tools, language="c", code=code, files=header)
    assert first["compile_result"]["cached"] is False and again["compile_result"]["cached"]
    assert again["compile_result"]["execution_time"] == first["compile_result"]["execution_time"]
    assert first["run_result"]["stdout"] == again["run_result"]["stdout"] == "first\n"
    # What the compiler reads beside the source is part of what is cached.
    header = {"greeting.h": base64.b64encode(b'#define GREETING "second"\n').decode()}
    changed = _run(tools, language="c", code=code, files=header)
    assert changed["compile_result"]["cached"] is False
    assert changed["run_result"]["stdout"] == "second\n"
    # Another engine has a cache of its own.
    with Engine(config=EngineConfig(prefork=1)) as other_engine:
        other = _run(ToolAPI(other_engine.connect()), language="c", code=code, files=header)
    assert other["compile_result"]["cached"] is False


def test_a_program_cannot_plant_a_binary_in_the_sessions_compile_cache() -> None:
    """Without the engine's shared cache (tests/test_compile_cache.py attacks that one), each
    session keeps its own in its workspace."""
    with Engine(config=EngineConfig(prefork=1, compile_cache_mb=0)) as engine:
        _attack_the_sessions_cache(ToolAPI(engine.connect()))


def _attack_the_sessions_cache(tools: ToolAPI) -> None:
    victim = '#include <stdio.h>\nint main() { puts("honest"); }'
    assert _run(tools, language="c", code=victim)["run_result"]["stdout"] == "honest\n"
    attack = (
        "for entry in ../.a2e/compiled/*/; do\n"
        "  printf '#!/bin/sh\\necho planted\\n' > \"$entry/main\" && echo wrote\n"
        '  rm -rf "$entry" && echo removed\n'
        "done\n"
        "mkdir ../.a2e/compiled/fake && echo made\n"
        'echo mine > own.txt && echo x > "$TMPDIR/scratch" && echo own-files-ok\n'
        # Its run layer's /tmp (sandbox._run_root): the state directory is not beneath it.
        "echo x > /tmp/outside-its-run && echo layer-ok"
    )
    attempt = _run(tools, language="bash", code=attack)["run_result"]
    assert "wrote" not in attempt["stdout"] and "removed" not in attempt["stdout"]
    assert "made" not in attempt["stdout"] and "own-files-ok" in attempt["stdout"]
    assert "layer-ok" in attempt["stdout"] and not os.path.exists("/tmp/outside-its-run")
    assert "Permission denied" in attempt["stderr"]
    again = _run(tools, language="c", code=victim)
    assert again["compile_result"]["cached"] and again["run_result"]["stdout"] == "honest\n"


def test_a_program_writes_only_its_own_run_directory(tools: ToolAPI) -> None:
    written = tools.call(
        tool_name="write_file", arguments={"path": "shared.txt", "content": "earlier\n"}
    )
    assert written.success, written.error
    code = (
        "echo overwritten > ../shared.txt || echo refused-shared\n"
        "echo new > ../top-level.txt || echo refused-workspace\n"
        "cat ../shared.txt; ls .. | grep -c '^run-'"
    )
    run = _run(tools, language="bash", code=code)["run_result"]
    assert "refused-shared" in run["stdout"] and "refused-workspace" in run["stdout"]
    # Reading is left as it was; and earlier runs' directories went with their calls.
    assert run["stdout"].endswith("earlier\n1\n")


@pytest.mark.parametrize("fresh", [False, True], ids=["warm", "fresh interpreter"])
def test_output_before_a_hang_reaches_the_caller_when_the_call_times_out(
    tools: ToolAPI, fresh: bool
) -> None:
    """The run's output goes out as events while it runs (every 0.1 s when the call does not
    stream): a program that the call's own deadline kills still leaves what it printed."""
    code = "import time\nprint('started', flush=True)\ntime.sleep(60)\n"
    arguments = {"language": "python", "code": code, "run_timeout": 60, "fresh_interpreter": fresh}
    result = tools.call(tool_name="run_code", arguments=arguments, timeout=2)
    assert not result.success and result.reason == "timeout", result
    assert result.data == {"stdout": "started\n"}, result.data
