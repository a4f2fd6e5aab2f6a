"""The compile cache shared by every session of an engine, and the precompiled ``bits/stdc++.h``
(``tools._compile_cache``, ``engine._compile_store``, docs/grading.md): a hit across sessions,
what a program, the compiler, ``python_eval`` and ``run_shell`` cannot do to it, a compile that
reads nothing a session can change, the header built by the supervisor and really used, and,
without an engine, eviction by size, the offers the supervisor refuses and the entries a lookup
refuses."""

from __future__ import annotations

import base64
import glob
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig, Isolation
from a2e_engine.engine._compile_store import CLAIM_MAX_BYTES, SharedCompileCache
from a2e_engine.sandbox._beneath import LinkRefused
from a2e_engine.sandbox._landlock import abi_version
from a2e_engine.sandbox._sharing import NO_CLAIM
from a2e_engine.tools import _compile_cache as compile_cache
from a2e_engine.tools._compile_cache import CompileCache, read_entry
from a2e_engine.tools._confined import decoded_files
from a2e_engine.tools._languages import LANGUAGES, Language
from a2e_engine.tools._steps import Program, Role
from a2e_engine.tools._submission import Submission

#: A compile that ran to its end and failed.
SOURCE_ERROR = {"status": "Finished", "return_code": 1, "stdout": ""}

#: The shared cache is only where Landlock governs truncation too (the lookups below need none).
needs_landlock = pytest.mark.skipif(abi_version() < 3, reason="the shared cache needs Landlock 3")

HONEST = '#include <stdio.h>\nint main() { puts("honest"); }\n'
A_PLUS_B = (
    "#include <bits/stdc++.h>\nusing namespace std;\n"
    "int main() { long long a, b; cin >> a >> b; cout << a + b << endl; }\n"
)
A_PLUS_B_IOSTREAM = (
    "#include <iostream>\n"
    "int main() { long long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; }\n"
)


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    with Engine(config=EngineConfig(prefork=1, max_workers=4)) as running:
        yield running


def _session(engine: Engine) -> ToolAPI:
    """A session of its own (and, where the engine is root, a uid of its own)."""
    return ToolAPI(engine.connect())


def _run(tools: ToolAPI, **arguments: Any) -> dict[str, Any]:
    result = tools.call(tool_name="run_code", arguments=arguments, timeout=120)
    assert result.success, result.error
    assert isinstance(result.data, dict)
    return result.data


def _entries(engine: Engine) -> str:
    (found,) = glob.glob(os.path.join(engine.state_dir, "compile-cache", "entries-*"))
    return found


def _pch(engine: Engine) -> str:
    return os.path.join(engine.state_dir, "compile-cache", "pch")


@needs_landlock
def test_a_program_compiled_in_one_session_is_a_hit_in_another(engine: Engine) -> None:
    code = HONEST.replace("honest", "shared")
    first = _run(_session(engine), language="c", code=code)
    second = _run(_session(engine), language="c", code=code)
    assert first["compile_result"]["cached"] is False and second["compile_result"]["cached"]
    assert first["run_result"]["stdout"] == second["run_result"]["stdout"] == "shared\n"
    key = CompileCache.key(LANGUAGES["c"], code, {})
    entry = os.path.join(_entries(engine), key)
    assert os.path.isdir(entry) and not os.path.islink(entry)
    # Not in either session's workspace: nothing of it there for another tool to change.
    assert not glob.glob(os.path.join(engine.state_dir, "*", "*", "workspace", ".a2e", "compiled"))


@needs_landlock
def test_programs_and_other_tools_cannot_change_the_cache(engine: Engine) -> None:
    victim = _session(engine)
    assert _run(victim, language="c", code=HONEST)["run_result"]["stdout"] == "honest\n"
    entries, pch = _entries(engine), _pch(engine)
    entry = os.path.join(entries, CompileCache.key(LANGUAGES["c"], HONEST, {}))
    fake = os.path.join(entries, "f" * 64)
    attacker = _session(engine)
    attempts = [
        'printf "#!/bin/sh\\necho planted\\n" > "$K/main"',  # replace the binary
        'cp /bin/true "$K/main"',
        'truncate -s 0 "$K/main"',
        'mv "$K" "$E/moved"',
        'rm -rf "$K"',
        'ln -s /bin/true "$E/link"',  # plant a symlink
        'ln "$K/main" hard && echo tampered >> hard',  # a hard link to write through
        'mkdir "$F" && cp /bin/true "$F/main"',  # plant an entry
        'head -c 10000000 /dev/zero > "$E/fill"',  # fill it
        'echo x > "$P/planted"',
        'echo x > "$P/.lock"',
    ]
    if engine.layers.active("identity"):
        attempts += ['chmod 000 "$K"', 'chmod 777 "$K/main"']  # another uid's
    attack = 'E="$1"; K="$2"; F="$3"; P="$4"\n' + "".join(
        f"{line} && echo DONE {n}\n" for n, line in enumerate(attempts)
    )
    attack += "echo attempted\n"
    data = _run(attacker, language="bash", code=attack, args=[entries, entry, fake, pch])
    ran = data["run_result"]
    assert ran["stdout"] == "attempted\n", ran
    assert "Permission denied" in ran["stderr"] or "Operation not permitted" in ran["stderr"]
    # The compiler cannot read an entry either (what it reads is the key's alone).
    include = f'#include "{entry}/main"\nint main() {{ return 0; }}\n'
    leaked = _run(attacker, language="c", code=include)["compile_result"]
    assert leaked["return_code"] != 0 and "Permission denied" in leaked["stderr"], leaked
    # Other tools of the session (python_eval runs untrusted code in its worker) do not even
    # see it: it is hidden from their workers.
    python = (
        "import os\nfor act in (lambda: open(K + '/main', 'wb'), lambda: os.listdir(E),\n"
        "            lambda: open(E + '/planted', 'w'), lambda: os.rename(K, E + '/x'),\n"
        "            lambda: os.symlink('/bin/true', E + '/link')):\n"
        "    try:\n        act()\n        print('DONE')\n"
        "    except OSError as exc:\n        print(type(exc).__name__)\n"
    )
    evaluated = attacker.call(
        tool_name="python_eval", arguments={"code": f"E = {entries!r}\nK = {entry!r}\n{python}"}
    )
    assert evaluated.success, evaluated.error
    printed = str(evaluated.data)
    assert "DONE" not in printed and printed.count("Error") == 5, printed
    shell = attacker.call(
        tool_name="run_shell",
        arguments={
            "command": f"echo x > {entry}/main; ls {entries}; ln -s /bin/true {entries}/l;"
            f" mkdir {fake}; echo exit=$?"
        },
    )
    assert shell.success, shell.error
    assert "exit=1" in str(shell.data), shell.data
    assert not os.path.exists(fake) and not os.path.lexists(os.path.join(entries, "link"))
    hidden = {
        tuple(z["plugins"]): z["layers"]["readonly_filesystem"].get("hidden")
        for z in engine.zygotes
        if z["started"]
    }
    if engine.layers["readonly_filesystem"]["active"]:
        parent = os.path.dirname(entries)
        assert hidden[("python_eval",)] == hidden[("shell",)] == [parent], hidden
        assert hidden[("run_code",)] == []
    # The same source in a third session runs the genuine binary.
    again = _run(_session(engine), language="c", code=HONEST)
    assert again["compile_result"]["cached"] and again["run_result"]["stdout"] == "honest\n"


def _judge(tools: ToolAPI, **arguments: Any) -> dict[str, Any]:
    result = tools.call(tool_name="code_eval", arguments=arguments, timeout=120)
    assert result.success, result.error
    assert isinstance(result.data, dict)
    return result.data


@needs_landlock
def test_code_eval_shares_the_engines_cache_and_cannot_change_it(engine: Engine) -> None:
    """``code_eval`` compiles through the same cache as ``run_code``, under the key of what it
    compiles: the program judged by its cases, or the program with its test program after
    it. Its candidates, in another session, can change nothing there."""
    code = HONEST.replace("honest", "judged")
    cases = [{"input": "", "output": "judged\n"}]
    judged = _judge(_session(engine), language="c", program=code, test_cases=cases)
    assert judged["verdict"] == "AC" and judged["compile"]["cached"] is False, judged
    assert _run(_session(engine), language="c", code=code)["compile_result"]["cached"]
    tested = HONEST.replace("honest", "tested")
    with_tests = _judge(_session(engine), language="c", program=tested, tests="/* tests */")
    assert with_tests["verdict"] == "AC" and with_tests["compile"]["cached"] is False
    alone = _run(_session(engine), language="c", code=tested)
    assert alone["compile_result"]["cached"] is False  # not the key of the program alone
    whole = _run(_session(engine), language="c", code=tested + "\n/* tests */\n")
    assert whole["compile_result"]["cached"]
    entry = os.path.join(_entries(engine), CompileCache.key(LANGUAGES["c"], code, {}))
    attack = "".join(
        f"{line} 2>/dev/null && exit 3\n"
        for line in (
            f'printf "#!/bin/sh\\necho planted\\n" > "{entry}/main"',
            f'truncate -s 0 "{entry}/main"',
            f'rm -rf "{entry}"',
            f'mkdir "{_entries(engine)}/{"f" * 64}"',
        )
    )
    refused = _judge(_session(engine), language="bash", program=attack, tests="exit 0")
    assert refused["verdict"] == "AC", refused  # each attempt failed
    again = _judge(_session(engine), language="c", program=code, test_cases=cases)
    assert again["verdict"] == "AC" and again["compile"]["cached"], again


@needs_landlock
def test_a_compile_reads_nothing_a_session_can_change(engine: Engine) -> None:
    """A cached binary stands for its key alone: a compile that could read the session's
    workspace would make one that depends on more."""
    tools = _session(engine)
    written = tools.call(
        tool_name="write_file", arguments={"path": "evil.h", "content": "#define X 1\n"}
    )
    assert written.success, written.error
    home = _run(tools, language="bash", code='echo -n "$HOME"')["run_result"]["stdout"]
    code = f'#include "{home}/evil.h"\nint main() {{ return X; }}\n'
    compiled = _run(tools, language="c", code=code)["compile_result"]
    assert compiled["return_code"] != 0 and "Permission denied" in compiled["stderr"], compiled


@needs_landlock
def test_two_sessions_compiling_the_same_source_at_once_share_one_entry(engine: Engine) -> None:
    code = HONEST.replace("honest", "racing")
    results: list[dict[str, Any]] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(_run(_session(engine), language="c", code=code))
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r["run_result"]["stdout"] for r in results] == ["racing\n", "racing\n"]
    entries = _entries(engine)
    assert os.path.isdir(os.path.join(entries, CompileCache.key(LANGUAGES["c"], code, {})))
    assert not [n for n in os.listdir(entries) if n.startswith((".staging-", ".evicted-"))]


def _slow(variant: int) -> str:
    """A C++ program whose compile takes a second or two (its constant is worked out by the
    compiler), each ``variant`` a program of its own."""
    return (
        "#include <cstdio>\n"
        "constexpr long slow() { long s = 0; for (long i = 0; i < 1500; i++)\n"
        f"  for (long j = 0; j < 1000; j++) s += (i ^ j) % {variant + 7}; return s; }}\n"
        "constexpr long value = slow();\n"
        'int main() { long a; if (scanf("%ld", &a) != 1) a = 0; printf("%ld\\n", a + value); }\n'
    )


def _at_once(engine: Engine, calls: list[tuple[float, dict[str, Any]]]) -> list[Any]:
    """Each call in a session of its own, started after its delay in seconds: its result, and
    when it ended."""
    ended: list[Any] = [None] * len(calls)

    def one(index: int, delay: float, arguments: dict[str, Any]) -> None:
        time.sleep(delay)
        timeout = arguments.pop("timeout", 120)
        result = _session(engine).call(tool_name="run_code", arguments=arguments, timeout=timeout)
        ended[index] = (result, time.monotonic())

    threads = [
        threading.Thread(target=one, args=(index, delay, arguments))
        for index, (delay, arguments) in enumerate(calls)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return ended


@needs_landlock
def test_calls_of_one_program_at_once_compile_it_once(engine: Engine) -> None:
    """verl sends a program's test cases as as many requests at once: one compiles, the others
    wait for its entry and run from it, each with its own input."""
    code = _slow(1)
    calls = [(0.0, {"language": "cpp", "code": code, "stdin": str(n)}) for n in range(4)]
    results = _at_once(engine, calls)
    data = [result.data for result, _ in results]
    assert all(result.success for result, _ in results), [r.error for r, _ in results]
    compiled = [d["compile_result"]["cached"] for d in data]
    assert sorted(compiled) == [False, True, True, True], compiled
    value = int(data[0]["run_result"]["stdout"]) - int(calls[0][1]["stdin"])
    assert [int(d["run_result"]["stdout"]) for d in data] == [value + n for n in range(4)]


@needs_landlock
def test_a_call_that_fails_its_compile_hands_its_failure_to_nobody(engine: Engine) -> None:
    """A tenant who compiles another's program first, under a compile time it cannot meet,
    fails alone: the call that waited for it compiles for itself and passes."""
    code = _slow(2)
    (attacker, _), (victim, _) = _at_once(
        engine,
        [
            (0.0, {"language": "cpp", "code": code, "compile_timeout": 0.3}),
            (0.1, {"language": "cpp", "code": code, "stdin": "1"}),
        ],
    )
    assert attacker.data["compile_result"]["status"] == "TimeLimitExceeded", attacker.data
    assert victim.success and victim.data["status"] == "Success", victim.data
    assert victim.data["compile_result"]["cached"] is False  # its own compile


@needs_landlock
def test_a_compile_error_of_the_source_is_compiled_once(engine: Engine) -> None:
    """A compile that failed on its source fails the same way every time: the calls that
    waited for it, and those after, are that compile error, compiled by nobody again."""
    broken = _slow(3).replace("int main()", "int main() { nope; }\nint other()")
    results = _at_once(engine, [(0.0, {"language": "cpp", "code": broken})] * 3)
    later = _run(_session(engine), language="cpp", code=broken)
    compiles = [result.data["compile_result"] for result, _ in results] + [later["compile_result"]]
    assert sorted(c["cached"] for c in compiles) == [False, True, True, True], compiles
    for compiled in compiles:
        assert compiled["return_code"] == 1 and "nope" in compiled["stderr"], compiled
    assert later["status"] == "Failed" and later["run_result"] is None, later


@needs_landlock
def test_a_call_waiting_for_another_compile_keeps_its_own_deadline(engine: Engine) -> None:
    code = _slow(4)
    (first, first_ended), (waiting, waiting_ended) = _at_once(
        engine,
        [
            (0.0, {"language": "cpp", "code": code}),
            (0.2, {"language": "cpp", "code": code, "timeout": 1}),
        ],
    )
    assert first.success and first.data["compile_result"]["cached"] is False
    assert not waiting.success and waiting.reason == "timeout", waiting
    assert waiting_ended < first_ended  # it did not wait for the compile past its own end


@needs_landlock
def test_a_compile_with_nothing_to_share_lets_the_waiting_calls_go_at_once(engine: Engine) -> None:
    """A program too large to offer (its outputs past a frame) is compiled by each call; those
    that waited for the first go as soon as its compile ends, not when its long run does."""
    code = (
        "#include <cstdio>\n#include <unistd.h>\nchar big[9 << 20] = {1};\n"
        "int main() { char w[8] = {0}; if (scanf(\"%7s\", w) == 1 && w[0] == 's') sleep(6);\n"
        '  printf("%d\\n", big[w[7] & 1]); }\n'
    )
    (first, first_ended), (waiting, waiting_ended) = _at_once(
        engine,
        [
            (0.0, {"language": "cpp", "code": code, "stdin": "sleep", "run_timeout": 30}),
            (0.3, {"language": "cpp", "code": code, "stdin": "go"}),
        ],
    )
    assert first.success and first.data["run_result"]["stdout"] == "1\n", first.data
    assert waiting.success and waiting.data["run_result"]["stdout"] == "1\n", waiting.data
    assert waiting.data["compile_result"]["cached"] is False  # nothing was kept to share
    assert waiting_ended < first_ended - 2  # it did not wait out the first call's run


@needs_landlock
def test_bits_stdcpp_is_precompiled_once_and_used(engine: Engine) -> None:
    """Three programs that include it, sent at once before it is built: it is built once,
    they wait for it and compile with it, in a fraction of the CPU of a program that reads it
    itself (one whose first include is another header)."""
    assert not _pch_files(engine, "bits/stdc++.h.gch"), "built before this test"
    first = _at_once(
        engine,
        [
            (0.0, {"language": "cpp", "code": f"{A_PLUS_B}// {n}\n", "stdin": "1 2\n"})
            for n in range(3)
        ],
    )
    (gch,) = _pch_files(engine, "bits/stdc++.h.gch")  # built by the time they compiled
    assert os.stat(gch).st_mode & 0o777 == 0o444 and os.stat(gch).st_uid == os.geteuid()
    compiled = [result.data["compile_result"] for result, _ in first]
    assert [result.data["run_result"]["stdout"] for result, _ in first] == ["3\n"] * 3
    tools = _session(engine)
    itself = _run(tools, language="cpp", code="#include <cstdio>\n" + A_PLUS_B, stdin="2 3\n")
    assert itself["run_result"]["stdout"] == "5\n" and not itself["compile_result"]["cached"]
    slowest = max(step["cpu_time"] for step in compiled)
    assert slowest < itself["compile_result"]["cpu_time"] / 2, (compiled, itself)
    # A program that learns where it is (the compiler is told) cannot change it.
    size = os.stat(gch).st_size
    attack = f'truncate -s 0 "{gch}"; echo $?; echo x >> "{gch}"; echo $?; rm -f "{gch}"; echo $?'
    ran = _run(tools, language="bash", code=attack)["run_result"]
    assert ran["stdout"] == "1\n1\n1\n" and os.stat(gch).st_size == size, ran
    _assert_gpp_uses(engine, gch, os.path.dirname(os.path.dirname(gch)), A_PLUS_B)


@needs_landlock
def test_a_program_whose_first_include_is_iostream_gets_it_precompiled(engine: Engine) -> None:
    tools = _session(engine)
    later = _run(tools, language="cpp", code="#include <cstdio>\n" + A_PLUS_B_IOSTREAM, stdin="4 5")
    time.sleep(0.5)  # what it would have asked for would be under way by now
    assert later["run_result"]["stdout"] == "9\n" and not _pch_files(engine, "iostream.gch")
    first = _run(tools, language="cpp", code=A_PLUS_B_IOSTREAM, stdin="1 2\n", compile_timeout=60)
    assert first["run_result"]["stdout"] == "3\n"
    (gch,) = _pch_files(engine, "iostream.gch")  # it waited for the build
    # About 0.18 s of CPU rather than 0.33 s: the rest is the compile itself.
    assert first["compile_result"]["cpu_time"] < later["compile_result"]["cpu_time"] * 0.75
    _assert_gpp_uses(engine, gch, os.path.dirname(gch), A_PLUS_B_IOSTREAM)


def _pch_files(engine: Engine, name: str) -> list[str]:
    return glob.glob(os.path.join(_pch(engine), "*", name))


def _assert_gpp_uses(engine: Engine, gch: str, include: str, code: str) -> None:
    """The compile's own flags, read from the language, are the header's: g++ says it used it."""
    source = Path(engine.state_dir, "check.cpp")
    source.write_text(code)
    argv = LANGUAGES["cpp"].compile_argv(code, "", include)
    argv = [part.replace("main.cpp", str(source)) for part in argv]
    argv[argv.index("main")] = os.path.join(engine.state_dir, "check")
    done = subprocess.run([*argv, "-H", "-Winvalid-pch"], capture_output=True, text=True)
    assert done.returncode == 0 and f"! {gch}" in done.stderr.splitlines()[0], done.stderr[:500]


# -- the cache itself, without an engine --


def test_only_the_first_include_can_be_precompiled() -> None:
    cpp = LANGUAGES["cpp"]
    assert cpp.precompiled_header("#include <iostream>\n#include <bits/stdc++.h>\n") == "iostream"
    assert cpp.precompiled_header('// a+b\n  #  include "bits/stdc++.h"\n') == "bits/stdc++.h"
    assert cpp.precompiled_header("#include <cstdio>\n#include <iostream>\n") == ""
    assert cpp.precompiled_header("int main() { return 0; }\n") == ""
    assert LANGUAGES["c"].precompiled_header("#include <iostream>\n") == ""


def _shared(tmp_path: Path, max_bytes: int) -> SharedCompileCache:
    cache = SharedCompileCache.create(str(tmp_path), 1)
    cache.max_bytes = max_bytes
    return cache


def _keep(cache: SharedCompileCache, key: str, size: int) -> None:
    cache.keep(
        key, {"main": (os.urandom(size), 0o755)}, {"return_code": 0, "stderr": "\0dir\0/x.c"}
    )


def test_the_least_recently_used_entries_go_past_the_bound(tmp_path: Path) -> None:
    cache = _shared(tmp_path, max_bytes=100_000)
    keys = [c * 64 for c in "abcde"]
    for key in keys[:3]:
        _keep(cache, key, 24_000)
    hit = CompileCache(cache.entries, shared=True).lookup(keys[0])
    assert hit is not None and hit.result["stderr"] == "\0dir\0/x.c"
    assert hit.place(os.open(tmp_path, os.O_RDONLY), str(tmp_path))["stderr"] == f"{tmp_path}/x.c"
    cache.used(keys[0])  # what the worker's lookup offered: now the most recent
    _keep(cache, keys[3], 24_000)
    assert all(os.path.isdir(os.path.join(cache.entries, k)) for k in keys[:4])  # 96 KB
    _keep(cache, keys[4], 24_000)  # 120 KB: down to 90 KB, b and c first
    kept = [os.path.isdir(os.path.join(cache.entries, k)) for k in keys]
    assert kept == [True, False, False, True, True]
    measured = sum(compile_cache.size_of(os.path.join(cache.entries, k)) for k in keys)
    assert 72_000 < cache.total == measured < 73_000
    _keep(cache, "9" * 64, 30_000)  # larger than a quarter of the bound: not kept
    assert read_entry(cache.entries, "9" * 64) is None
    cache.close()


def test_a_flood_of_programs_sent_once_does_not_push_out_those_reused(tmp_path: Path) -> None:
    """One tenant sends many programs once each (large, cheap to compile); the entry other
    calls hit stays: only entries never hit are evicted while there are any."""
    cache = _shared(tmp_path, max_bytes=100_000)
    reused = "a" * 64
    _keep(cache, reused, 20_000)
    cache.used(reused)
    for number in range(20):
        _keep(cache, f"{number:064x}", 20_000)
    assert read_entry(cache.entries, reused) is not None
    assert cache.total <= 100_000
    cache.close()


def test_the_supervisor_keeps_only_what_the_call_itself_compiled(tmp_path: Path) -> None:
    """What a worker offers is checked against the call that offered it: the key the
    supervisor works out from the call's own arguments, names the compile step makes, a
    successful result. A worker cannot put a binary under another program's key."""
    cache = _shared(tmp_path, max_bytes=1 << 20)
    arguments = {"language": "c", "code": HONEST}
    key = CompileCache.key(LANGUAGES["c"], HONEST, {})
    binary = base64.b64encode(b"\x7fELF planted").decode()
    good = {
        "key": key,
        "result": {"return_code": 0},
        "outputs": {"main": {"mode": 493, "data": binary}},
    }
    assert isinstance(cache.check_entry(arguments, good), tuple)
    other = {**arguments, "code": HONEST.replace("honest", "victim")}
    refused = {
        "a key that is not the call's": (other, good),
        "not a call of a compiled language": ({"language": "python", "code": "1"}, good),
        "a failed compile that may not be the source's own failure": (
            arguments,
            {**good, "result": {"status": "Finished", "return_code": 1, "stderr": "no"}},
        ),
        "outputs of a failed compile": (
            arguments,
            {**good, "result": {**SOURCE_ERROR, "stderr": "main.c:2:1: error: nope"}},
        ),
        "an output the compile step does not make": (
            arguments,
            {**good, "outputs": {"../main": {"mode": 493, "data": binary}}},
        ),
        "an output that is not base64": (
            arguments,
            {**good, "outputs": {"main": {"mode": 493, "data": "!!"}}},
        ),
    }
    for why, (args, data) in refused.items():
        said = cache.check_entry(args, data)
        assert isinstance(said, str) and said.startswith(why), (why, said)
    failed = {"key": key, "result": {**SOURCE_ERROR, "stderr": "main.c:2:14: error: nope\n"}}
    assert cache.check_entry(arguments, failed) == (key, {}, failed["result"])
    cache.offer("run_code", other, "entry", good)  # queued, checked, dropped
    cache.offer("run_code", arguments, "header", {"language": "c", "header": "../../etc/passwd"})
    cache.close()
    assert read_entry(cache.entries, key) is None
    assert sorted(os.listdir(cache.headers.root)) == []


@pytest.mark.parametrize(
    ("language", "code", "said", "kept"),
    [
        (
            "cpp",
            "",
            "main.cpp: In function 'int main()':\nmain.cpp:1:20: error: 'x' undeclared",
            True,
        ),
        ("cpp", "", "main.cpp:1:10: fatal error: nonexist.h: No such file or directory", True),
        ("c", "", "main.c:3:1: error: expected ';'", True),
        ("java", "public class Solution {}", "Solution.java:1: error: cannot find symbol", True),
        ("java", "public class Solution {}", "Main.java:1: error: cannot find symbol", False),
        ("go", "", "# command-line-arguments\n./main.go:2:14: undefined: x", True),
        ("rust", "", "error[E0425]: cannot find value `b`\n --> main.rs:1:20\n  |", True),
        # The machine's failures, or a tenant's doing: never kept.
        ("cpp", "", "g++: fatal error: Killed signal terminated program cc1plus", False),
        (
            "cpp",
            "",
            "main.cpp:1:1: error: x\ng++: internal compiler error: Segmentation fault",
            False,
        ),
        (
            "cpp",
            "",
            "main.cpp:9:1: fatal error: error writing to -: No space left on device",
            False,
        ),
        ("cpp", "", "cc1plus: out of memory allocating 65536 bytes", False),
        (
            "cpp",
            "",
            "g++: fatal error: cannot execute 'cc1plus': Resource temporarily unavailable",
            False,
        ),
        ("cpp", "", "/usr/bin/ld: cannot open output file main: Permission denied", False),
        ("cpp", "", "collect2: error: ld returned 1 exit status", False),
        ("python", "", "main.py:1:1: error: x", False),
    ],
)
def test_only_a_failure_of_the_source_itself_is_taken_as_its_own(
    language: str, code: str, said: str, kept: bool
) -> None:
    result = {**SOURCE_ERROR, "stderr": said}
    assert LANGUAGES[language].failed_on_its_source(code, result) is kept


def test_a_compile_stopped_by_a_limit_or_a_signal_is_never_the_sources() -> None:
    said = {"stderr": "main.cpp:1:20: error: 'x' was not declared in this scope"}
    cpp = LANGUAGES["cpp"]
    assert cpp.failed_on_its_source("", {**SOURCE_ERROR, **said})
    for stopped in (
        {"status": "TimeLimitExceeded", "return_code": None},
        {"status": "MemoryLimitExceeded", "return_code": None},
        {"return_code": -9},
        {"return_code": 137},
        {"return_code": 0},
        {"exceeded": "wall_time"},
    ):
        assert not cpp.failed_on_its_source("", {**SOURCE_ERROR, **said, **stopped}), stopped


@needs_landlock
def test_a_call_right_after_a_compile_waits_for_its_entry_to_be_written(engine: Engine) -> None:
    """The call that compiled ends as soon as its program has run, while its entry (here
    megabytes) is still being written: a call of the same program then waits for the entry
    rather than compiling it again."""
    code = (
        "#include <cstdio>\nchar big[5 << 20] = {1};\n"
        'int main() { long n; if (scanf("%ld", &n) == 1) printf("%d\\n", big[n & 1] + 1); }\n'
    )
    tools = _session(engine)
    for attempt in range(3):
        variant = f"{code}// {attempt}\n"
        first = _run(tools, language="cpp", code=variant, stdin="0")
        second = _run(_session(engine), language="cpp", code=variant, stdin="1")
        assert first["compile_result"]["cached"] is False, first
        assert second["compile_result"]["cached"] is True, second
        assert second["run_result"]["stdout"] == "1\n", second


def test_a_program_too_large_to_hash_on_the_loop_is_not_claimed(tmp_path: Path) -> None:
    """Its key is worked out from its whole source: past ``CLAIM_MAX_BYTES`` the engine's loop
    does not hash it (it is kept, from the writer's thread, all the same)."""
    cache = _shared(tmp_path, max_bytes=1 << 20)
    large = {"language": "c", "code": HONEST + "//" + "x" * CLAIM_MAX_BYTES}
    assert cache.claim("run_code", large) is NO_CLAIM  # no loop needed: nothing was made
    cache.offer("run_code", large, "compiled", {})  # nobody waits: nothing to release
    assert cache.claim("python_eval", {"language": "c", "code": HONEST}) is NO_CLAIM
    cache.close()


def test_keys_differ_wherever_what_is_compiled_does(tmp_path: Path) -> None:
    """A file given as null is not written, and "None" is base64 of three bytes: their keys
    differ. Two names of one file would leave the one written to the order: refused, by the
    key and by the run alike."""
    c = LANGUAGES["c"]
    assert CompileCache.key(c, HONEST, {"flag.h": None}) == CompileCache.key(c, HONEST, {})
    assert CompileCache.key(c, HONEST, {"flag.h": "None"}) != CompileCache.key(c, HONEST, {})
    assert CompileCache.key(c, HONEST, {"./m.h": "eA=="}) == CompileCache.key(
        c, HONEST, {"m.h": "eA=="}
    )
    twice = {"./msg.h": "eA==", "msg.h": "eQ=="}
    with pytest.raises(ValueError, match="twice"):
        CompileCache.key(c, HONEST, twice)
    with pytest.raises(ValueError, match="names one file twice"):
        decoded_files(str(tmp_path), twice)


def test_a_java_programs_key_is_worked_out_in_one_pass() -> None:
    """Its file is named by its public class, found on the engine's loop when it claims the
    compile: 400,000 blank lines before it took minutes to read when blank space before the
    class could span lines (quadratic in them); a child with 60 s to do it stands for that."""
    code = (
        "from a2e_engine.tools._compile_cache import CompileCache\n"
        "from a2e_engine.tools._languages import LANGUAGES\n"
        "java = LANGUAGES['java']\n"
        "code = '\\n' * 400_000 + '  public final class Found {}'\n"
        "assert java.main_name(code) == 'Found', java.main_name(code)\n"
        "CompileCache.key(java, code, {})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]


def test_only_a_calls_own_hits_and_headers_count(tmp_path: Path) -> None:
    """A worker reports a hit of its own call's key only, and asks for the header its own
    program includes: another key's "hit" would keep entries of its choice from eviction; a
    call that compiles nothing (its program runs in the worker) offers nothing at all."""
    cache = _shared(tmp_path, max_bytes=1 << 20)
    mine, theirs = "a" * 64, "b" * 64
    _keep(cache, mine, 1000)
    _keep(cache, theirs, 1000)
    call = {"language": "c", "code": HONEST}
    cache.offer("run_code", call, "used", {"key": theirs})  # not the call's key
    cache.offer("python_eval", call, "used", {"key": theirs})  # compiles nothing
    cache.offer("code_eval", {"language": "python", "program": "1"}, "used", {"key": theirs})
    cache.offer("run_code", call, "header", {"language": "cpp", "header": "iostream"})
    cache.close()
    assert theirs not in cache._hit and theirs in cache._new
    assert sorted(os.listdir(cache.headers.root)) == []


def test_a_lookup_refuses_what_the_tool_did_not_write(tmp_path: Path) -> None:
    cache = _shared(tmp_path, max_bytes=1 << 20)
    key = "a" * 64
    _keep(cache, key, 1000)
    main = Path(cache.entries, key, "main")
    genuine = main.read_bytes()
    main.chmod(0o644)
    main.write_bytes(genuine[:-1] + bytes([genuine[-1] ^ 1]))  # changed: its hash fails
    assert read_entry(cache.entries, key) is None
    main.write_bytes(genuine)
    assert read_entry(cache.entries, key) is not None
    main.unlink()
    main.symlink_to("/bin/true")  # an output that is a link out
    assert read_entry(cache.entries, key) is None
    elsewhere = tmp_path / "elsewhere"
    Path(cache.entries, key).rename(elsewhere)
    Path(cache.entries, key).symlink_to(elsewhere)  # an entry that is a link out
    assert read_entry(cache.entries, key) is None
    # An output the compile left as a link or a FIFO is never kept in a session's cache.
    built = tmp_path / "odd"
    built.mkdir()
    (built / "main").symlink_to("/bin/true")
    assert compile_cache.read_outputs(str(built), ("main",)) is None
    (built / "main").unlink()
    os.mkfifo(built / "main")
    assert compile_cache.read_outputs(str(built), ("main",)) is None
    assert not [n for n in os.listdir(cache.entries) if n.startswith(".staging-")]
    cache.close()


def test_a_full_disk_stores_nothing_and_an_evicted_entry_is_read_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = _shared(tmp_path, max_bytes=1 << 20)

    def full(path: str, content: bytes, mode: int) -> None:
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(compile_cache, "write_new", full)
        with pytest.raises(OSError):
            _keep(cache, "a" * 64, 1000)
    assert read_entry(cache.entries, "a" * 64) is None
    assert os.listdir(cache.entries) == []
    # Evicted while a lookup reads it: what it opened is read whole, and checked.
    _keep(cache, "b" * 64, 50_000)
    genuine = Path(cache.entries, "b" * 64, "main").read_bytes()
    read_checked = compile_cache._read_checked

    def evicting(fd: int, expected: Any) -> bytes | None:
        assert compile_cache.evict(cache.entries, "b" * 64)
        return read_checked(fd, expected)

    monkeypatch.setattr(compile_cache, "_read_checked", evicting)
    hit = read_entry(cache.entries, "b" * 64)
    assert hit is not None and hit.outputs["main"][0] == genuine
    assert not os.path.exists(os.path.join(cache.entries, "b" * 64))
    cache.close()


@needs_landlock
def test_each_session_keeps_its_own_cache_without_the_engines() -> None:
    with Engine(config=EngineConfig(prefork=1, compile_cache_mb=0)) as engine:
        tools = _session(engine)
        first = _run(tools, language="c", code=HONEST)
        again = _run(tools, language="c", code=HONEST)
        other = _run(_session(engine), language="c", code=HONEST)
        assert not os.path.exists(os.path.join(engine.state_dir, "compile-cache"))
    assert not first["compile_result"]["cached"] and again["compile_result"]["cached"]
    assert not other["compile_result"]["cached"]


def test_the_cache_size_is_a_checked_setting() -> None:
    with pytest.raises(ValueError, match="compile_cache_mb"):
        EngineConfig(compile_cache_mb=-1)


def test_shared_cache_directories(tmp_path: Path) -> None:
    cache = SharedCompileCache.create(str(tmp_path), 512)
    entries, pch = cache.dirs
    assert os.path.basename(entries).startswith("entries-") and len(os.path.basename(entries)) > 20
    for where in (tmp_path / "compile-cache", entries, pch):
        info = os.stat(where)
        assert info.st_mode & 0o7777 == 0o711 and info.st_uid == os.geteuid()  # nobody lists
    assert cache.max_bytes == 512 << 20
    cache.close()


@needs_landlock
def test_without_mount_namespaces_landlock_alone_keeps_other_tools_out() -> None:
    """Where workers get no mount namespace, and so no private /tmp, nothing hides the cache
    from them: Landlock, whose rules name it for run_code's jobs only, keeps them out."""
    with Engine(config=EngineConfig(prefork=1, isolation=Isolation(namespaces=False))) as engine:
        assert not engine.layers["readonly_filesystem"]["active"]
        tools = _session(engine)
        assert _run(tools, language="c", code=HONEST)["compile_result"]["cached"] is False
        assert _run(_session(engine), language="c", code=HONEST)["compile_result"]["cached"]
        entries = _entries(engine)
        code = (
            "import os\nfor act in (lambda: os.listdir(E), lambda: open(E + '/planted', 'w')):\n"
            "    try:\n        act()\n        print('DONE')\n"
            "    except OSError as exc:\n        print(type(exc).__name__)\n"
        )
        done = tools.call(tool_name="python_eval", arguments={"code": f"E = {entries!r}\n{code}"})
    assert done.success and str(done.data).count("PermissionError") == 2, done.data


def test_run_code_writes_its_files_beneath_its_directory_never_through_a_link(
    tmp_path: Path,
) -> None:
    """The session's other calls can change the workspace while run_code writes there: here
    a directory of the run's files is a link out when the files go in. Nothing is written
    through it."""
    target = tmp_path / "elsewhere"
    target.mkdir()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    files = {"sub/input.txt": base64.b64encode(b"data").decode()}
    submission = Submission(Program(LANGUAGES["c"], HONEST, files, Role.ONCE), str(workspace))
    try:
        os.symlink(target, os.path.join(submission.home, "sub"))
        with pytest.raises(LinkRefused):
            submission.fresh_directory()
    finally:
        submission.close()
    assert os.listdir(target) == []


def test_the_key_follows_each_file_the_compile_step_names(tmp_path: Path) -> None:
    """Kotlin's compiler is a jar run on ``java`` and its launcher a source of the engine's: a
    new one of either is a new toolchain, though ``java`` stayed the same."""
    launcher, jar = tmp_path / "Launch.kt", tmp_path / "compiler.jar"
    launcher.write_text("fun main() {}\n")
    jar.write_bytes(b"1")
    compile_step = ("/bin/true", "-cp", str(jar), "{source}", str(launcher))
    language = Language("k", "main.kts", ("java", "Main"), compile=compile_step)
    keys = {CompileCache.key(language, "1", {})}
    launcher.write_text("fun main() { println() }\n")
    keys.add(CompileCache.key(language, "1", {}))
    jar.write_bytes(b"22")
    keys.add(CompileCache.key(language, "1", {}))
    assert len(keys) == 3
    assert {path for path, _, _ in LANGUAGES["kotlin_script"].toolchain()} >= {
        os.path.realpath("/usr/share/kotlin/kotlinc/lib/kotlin-compiler.jar"),
        os.path.realpath(LANGUAGES["kotlin_script"].compile[-1]),  # type: ignore[index]
    }
