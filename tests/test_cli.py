"""The ``a2e`` command as a user runs it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

A2E = [sys.executable, "-m", "a2e_engine.engine.cli"]


def a2e(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*A2E, *args, "--prefork", "1"], capture_output=True, text=True, timeout=120
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_call_with_json_and_args() -> None:
    out = json.loads(a2e("call", "python_eval", "--json", '{"code": "print(40 + 2)"}').stdout)
    assert out["success"] and out["data"]["stdout"] == "42\n"
    out = json.loads(a2e("call", "python_eval", "--arg", "code=[1, 2][1]").stdout)
    assert out["data"]["value"] == 2


def test_call_streams_events_then_the_result() -> None:
    proc = a2e("call", "python_eval", "--stream", "--arg", "code=print('a'); print('b')")
    lines = proc.stdout.splitlines()
    assert json.loads(lines[0])["data"]["chunk"] == "a\n"
    assert json.loads(lines[1])["data"]["chunk"] == "b\n"
    assert json.loads("\n".join(lines[2:]))["success"] is True


def test_failures_exit_non_zero_with_the_error() -> None:
    proc = a2e("call", "python_eval", "--arg", "code=1/0", check=False)
    assert proc.returncode == 1
    assert json.loads(proc.stdout)["error"] == "ZeroDivisionError: division by zero"
    proc = a2e("call", "python_eval", "--json", "{not json", check=False)
    assert proc.returncode != 0 and "--json is not valid JSON" in proc.stderr


def test_list_and_read_root() -> None:
    assert "python_eval(code, stdin?)" in a2e("list").stdout
    out = json.loads(
        a2e("call", "read_file", "--arg", "path=/etc/hostname", "--read-root", "/etc").stdout
    )
    assert out["success"] and out["data"]["content"] == open("/etc/hostname").read()


def test_plugin_option_loads_and_reports_bad_specs() -> None:
    out = a2e("list", "--plugin", "tests.hostile_plugin:HostileTools").stdout
    assert "escape_double_fork(marker)" in out
    proc = a2e("list", "--plugin", "no_such_module:X", check=False)
    assert proc.returncode != 0 and "cannot import plugin module" in proc.stderr


def test_the_demo_runs_and_shows_containment() -> None:
    out = a2e("demo").stdout
    assert "[event 0] step 1" in out
    assert "timed out after 2 s" in out
    assert "Operation not permitted" in out
    assert "outside the allowed roots" in out
    assert "Read-only file system: '/etc/a2e-demo'" in out and "gone with the call" in out
    assert "calls/s" in out


def test_doctor_lists_every_layer_and_fails_on_a_missing_required_one() -> None:
    from a2e_engine.sandbox.layers import CATALOG

    out = a2e("doctor").stdout
    for name in CATALOG:
        assert name in out
    report = json.loads(a2e("doctor", "--json").stdout)
    assert report["missing"] == [] and report["layers"]["seccomp"]["active"]
    assert set(report["layers"]) == set(CATALOG)  # each one reported, active or why not
    zygotes = {zygote["name"]: zygote for zygote in report["zygotes"]}  # one per plugin
    assert {"python_eval", "code_eval", "http"} <= set(zygotes)
    python = zygotes["python_eval"]  # doctor starts every one to report what workers inherit
    assert python["plugins"] == ["python_eval"] and python["started"] and python["pid"] > 0
    assert python["rss_kib"] > 0 and python["modules"] > 0 and "a2e_engine" in python["packages"]
    assert python["mapped_kib"] >= python["rss_kib"] and "pydantic" not in python["packages"]
    # Each zygote's own report: its tools' profiles (python_session's interpreter may fork).
    assert python["layers"]["seccomp"]["profiles"] == ["compute", "session"]
    assert len({zygote["pid"] for zygote in zygotes.values()}) == len(zygotes)
    assert "every worker is a fork of its plugin's" in out
    if os.geteuid() == 0:  # the new layer and the whole sandbox's memory bound, said
        assert report["layers"]["scoped_ipc"]["active"] == (
            report["layers"]["landlock"]["abi"] >= 6
        )
        assert report["sandbox_memory_mb"] > 0 and "the whole sandbox: at most" in out
    proc = a2e("doctor", "--no-namespaces", "--require", "pid_namespace", check=False)
    assert proc.returncode == 1
    assert "missing required layers: pid_namespace (disabled by configuration)" in proc.stdout
    assert "why not: disabled by configuration" in proc.stdout


def _one_clear_line(proc: subprocess.CompletedProcess[str], status: int, *words: str) -> None:
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("a2e: "), proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_an_engine_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    missing = a2e("call", "python_eval", "--arg", "code=1", "--no-namespaces", "--require",
                  "pid_namespace", check=False)  # fmt: skip
    _one_clear_line(missing, 1, "did not start", "pid_namespace (disabled by configuration)")
    if os.geteuid() == 0:
        userns = a2e("call", "python_eval", "--arg", "code=1", "--require", "user_namespace",
                     check=False)  # fmt: skip
        _one_clear_line(userns, 1, "user_namespace (running as root: not needed)")
    for audit, why in ((tmp_path / "missing" / "a.jsonl", "No such file"), (tmp_path, "Is a directory")):  # fmt: skip
        proc = a2e("call", "python_eval", "--arg", "code=1", "--audit", str(audit), check=False)
        _one_clear_line(proc, 1, f"cannot open the audit log {audit}", why)
    low = a2e("call", "python_eval", "--arg", "code=1", "--memory-mb", "5", check=False)
    _one_clear_line(low, 2, "limits.memory_mb is 5 MiB", "at least")


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (("--memory-mb", "0"), ("argument --memory-mb", "must be a positive integer, not 0")),
        (("--memory-mb", "-5"), ("argument --memory-mb", "not -5")),
        (("--max-workers", "0"), ("argument --max-workers", "positive integer")),
        (("--prefork", "-1"), ("argument --prefork", "at least 0")),
        (("--max-timeout", "soon"), ("argument --max-timeout", "not a whole number")),
        (("--timeout", "0"), ("argument --timeout", "positive number of seconds")),
    ],
)
def test_a_limit_out_of_range_is_a_usage_error_in_one_line(
    flags: tuple[str, ...], words: tuple[str, ...]
) -> None:
    proc = a2e("call", "python_eval", "--arg", "code=1", *flags, check=False)
    _one_clear_line(proc, 2, *words, "a2e call --help")


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("[engine.limits]\nmemory_mb = 0\n", "engine.limits.memory_mb: must be a positive integer"),
        (
            "[engine.limits]\ntmp_mb = true\n",
            "engine.limits.tmp_mb: input should be a valid integer, got True",
        ),
        ("[engine.retry]\nmax_attempts = 0\n", "engine.retry: RetryPolicy.max_attempts"),
    ],
)
def test_a_limit_out_of_range_in_the_config_file_names_its_key(
    tmp_path: Path, table: str, key: str
) -> None:
    config = tmp_path / "a2e.toml"
    config.write_text(table)
    proc = a2e("call", "python_eval", "--arg", "code=1", "--config", str(config), check=False)
    _one_clear_line(proc, 2, str(config), key)


@pytest.mark.parametrize(
    ("tool", "arguments", "flags", "reason", "words"),
    [
        ("pyton_eval", {"code": "1"}, (), "unknown_tool", "unknown tool 'pyton_eval'"),
        ("python_eval", {"code": 3}, (), "invalid_arguments", "code"),
        ("python_eval", {"code": "import time\ntime.sleep(5)"}, ("--timeout", "1"), "timeout",
         "timed out after 1 s"),
        ("python_eval", {"code": "bytearray(4 * 1024**3)"}, (), "out_of_memory", "MemoryError"),
        ("python_eval", {"code": "1 / 0"}, (), "tool_failed", "ZeroDivisionError"),
        ("run_shell", {"command": "true"}, ("--config", "DENY"), "policy_denied", "run_shell"),
    ],
)  # fmt: skip
def test_a_failed_call_says_why_on_stderr_in_one_line_as_well_as_in_the_json(
    tmp_path: Path,
    tool: str,
    arguments: dict[str, object],
    flags: tuple[str, ...],
    reason: str,
    words: str,
) -> None:
    deny = tmp_path / "deny.toml"
    deny.write_text('[policy]\ndeny = ["run_shell"]\n')
    flags = tuple(str(deny) if flag == "DENY" else flag for flag in flags)
    proc = a2e("call", tool, "--json", json.dumps(arguments), *flags, check=False)
    result = json.loads(proc.stdout)
    assert not result["success"] and result["reason"] == reason, result
    _one_clear_line(proc, 1, f"a2e: {tool}: {reason}: ", words)


def test_a_plugin_that_fails_to_build_is_one_line() -> None:
    proc = a2e("list", "--plugin", "tests.cli_plugins:FailsToBuild", check=False)
    _one_clear_line(
        proc,
        2,
        "plugin tests.cli_plugins:FailsToBuild",
        "RuntimeError: its settings file is missing",
    )


@pytest.mark.parametrize(
    "command",
    [
        "list",
        "doctor --json",
        "call python_eval --stream --arg code='for i in range(3000): print(i)'",
        "call python_eval --arg code='print(\"x\" * 500000)'",
    ],
)
def test_output_closed_early_is_one_line(command: str) -> None:
    """A reader gone before the first line (``true`` reads nothing), as ``| head -1`` is gone
    after it: whatever is written then is refused."""
    shell = f"{' '.join(A2E)} {command} --prefork 1 | true; exit ${{PIPESTATUS[0]}}"
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120)
    _one_clear_line(proc, 141, "the output was closed")


def test_arguments_take_their_type_from_the_schema(tmp_path: Path) -> None:
    as_text = json.loads(a2e("call", "python_eval", "--arg", "code=42").stdout)
    assert as_text["success"] and as_text["data"]["value"] == 42  # "42" ran as code
    wrong = a2e(
        "call", "code_eval", "--arg", "program=x=1", "--arg", "time_limit=soon", check=False
    )
    _one_clear_line(wrong, 2, "time_limit is of type number", "'soon'")
    typed = a2e("call", "code_eval", "--arg", "program=def f(): return 1", "--arg",
                "tests=assert f() == 1", "--arg", "time_limit=2.5")  # fmt: skip
    assert json.loads(typed.stdout)["data"]["verdict"] == "passed"


def test_json_arguments_from_a_file_or_stdin(tmp_path: Path) -> None:
    big = "x = " + repr("y" * 200_000) + "\nlen(x)"
    (tmp_path / "args.json").write_text(json.dumps({"code": big}))
    from_file = json.loads(
        a2e("call", "python_eval", "--json", f"@{tmp_path / 'args.json'}").stdout
    )
    assert from_file["data"]["value"] == 200_000
    from_stdin = subprocess.run(
        [*A2E, "call", "python_eval", "--json", "-", "--prefork", "1"],
        input=json.dumps({"code": "6 * 7"}), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert json.loads(from_stdin.stdout)["data"]["value"] == 42
    missing = a2e("call", "python_eval", "--json", f"@{tmp_path / 'none.json'}", check=False)
    _one_clear_line(missing, 2, "cannot read it: No such file or directory")


def test_timeouts_take_fractions_like_the_protocol() -> None:
    quick = json.loads(a2e("call", "python_eval", "--arg", "code=1", "--timeout", "0.3").stdout)
    assert quick["success"]  # 0.3 s asked, a whole second granted
    slept = a2e("call", "python_eval", "--arg", "code=import time; time.sleep(5)", "--timeout",
                "0.3", check=False)  # fmt: skip
    assert slept.returncode == 1 and "timed out after 1 s" in json.loads(slept.stdout)["error"]
    for bad in ("0", "-2", "soon"):
        assert (
            a2e("call", "python_eval", "--arg", "code=1", "--timeout", bad, check=False).returncode
            == 2
        )


def test_third_party_debug_lines_are_not_shown() -> None:
    for flags in ((), ("-v",)):
        proc = subprocess.run(
            [*A2E, *flags, "list", "--prefork", "1"], capture_output=True, text=True, timeout=120
        )
        assert proc.returncode == 0 and "DEBUG" not in proc.stderr and "bm25s" not in proc.stderr


def test_bench_checks_its_outputs_before_measuring(tmp_path: Path) -> None:
    fake = tmp_path / "site" / "matplotlib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('matplotlib is not installed here')\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    started = time.monotonic()
    chart = subprocess.run(
        [*A2E, "bench", "--quick", "--no-progress", "--chart", str(tmp_path / "c.png")],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert chart.returncode == 2 and "--chart needs matplotlib" in chart.stderr, chart.stderr
    unwritable = subprocess.run(
        [*A2E, "bench", "--quick", "--no-progress", "--json", str(tmp_path / "no" / "r.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert unwritable.returncode == 2 and "--json: cannot write" in unwritable.stderr
    assert time.monotonic() - started < 30  # refused at once, nothing measured


def test_bench_is_a_command_installed_by_the_benchmarks() -> None:
    """``a2e bench`` is found by its entry point, after ``-v`` too; the engine imports none of
    the benchmarks (tests/test_import_graph.py)."""
    listed = subprocess.run([*A2E, "--help"], capture_output=True, text=True, timeout=60)
    assert "bench" in listed.stdout and "a2e bench --help" in listed.stdout, listed.stdout
    for argv in (["bench", "--help"], ["-v", "bench", "--help"]):
        helped = subprocess.run([*A2E, *argv], capture_output=True, text=True, timeout=60)
        assert helped.returncode == 0 and "usage: a2e bench" in helped.stdout, helped.stderr
    # Anything else before it is argparse's: an unknown option is a usage error, in one line.
    wrong = subprocess.run([*A2E, "-x", "bench"], capture_output=True, text=True, timeout=60)
    assert wrong.returncode == 2 and wrong.stderr.count("\n") == 1, wrong.stderr


def _markers(text: str) -> list[str]:
    return re.findall(r"\[\.\.\. \d+ characters of \S+ omitted[^\n]*? \.\.\.\]", text)


def _names_a_path(text: str) -> bool:
    return re.search(r"(?<![\w.])/\w", text) is not None


def test_keep_output_copies_each_cut_stream_out_of_the_session(tmp_path: Path) -> None:
    """The whole of a stream cut to its head and tail is in DIR once a2e call has returned
    (and its session, with the file the engine saved, is gone), byte for byte, and the result
    names the copy: in the marker and in <stream>_path. A second call adds its own files."""
    kept = tmp_path / "kept" / "here"  # made, parents too
    code = "import sys\nprint('é' * 1_200_000)\nsys.stderr.write('e' * 1_500_000 + 'END')"
    out = json.loads(a2e("call", "python_eval", "--arg", f"code={code}", "--keep-output",
                         str(kept)).stdout)  # fmt: skip
    data = out["data"]
    assert out["success"] and data["truncated"] and "stdout_note" not in data
    whole = {"stdout": ("é" * 1_200_000 + "\n").encode(), "stderr": b"e" * 1_500_000 + b"END"}
    for stream, expected in whole.items():
        copy = Path(data[f"{stream}_path"])
        assert copy.parent == kept and copy.name.startswith("python_eval-"), copy
        assert copy.name.endswith(f"-{stream}.txt") and copy.read_bytes() == expected
        (mark,) = _markers(data[stream])
        assert mark.endswith(f"omitted; all of it is in {copy} ...]"), mark
    again = a2e("call", "run_code", "--arg", "language=python", "--arg",
                "code=print('y' * 1_500_000)", "--keep-output", str(kept)).stdout  # fmt: skip
    run = json.loads(again)["data"]["run_result"]  # SandboxFusion's shape: the marker only
    (mark,) = _markers(run["stdout"])
    copy = Path(mark.split("all of it is in ")[1].removesuffix(" ...]"))
    assert copy.parent == kept and copy.read_bytes() == b"y" * 1_500_000 + b"\n"
    assert len(list(kept.iterdir())) == 3  # nothing overwritten


def test_without_keep_output_a_cut_stream_names_no_file_that_is_gone() -> None:
    out = json.loads(a2e("call", "python_eval", "--arg", "code=print('x' * 1_500_000)").stdout)
    data = out["data"]
    assert data["truncated"] and "stdout_path" not in data
    (mark,) = _markers(data["stdout"])
    assert not _names_a_path(mark), mark
    assert "rerun with --keep-output DIR" in mark and "--keep-output DIR" in data["stdout_note"]


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("outside", "not a file of this session's .a2e/output"),  # names /etc/shadow
        ("dotdot", "not a file of this session's .a2e/output"),  # .a2e/output/../../..
        ("symlink", "1-claimed-stdout.txt is a symbolic link"),
        ("symlinked_dir", ".a2e is a symbolic link"),  # .a2e/output/x through a symlink
        ("hardlink", "a link to a file elsewhere"),
        ("fifo", "not a regular file"),
    ],
)
def test_keep_output_copies_only_the_sessions_own_output_files(
    tmp_path: Path, how: str, why: str
) -> None:
    """A tool chooses the path its result names as its saved output: one outside the session,
    or one in its .a2e/output that leads elsewhere. None is copied; a2e call says so in one
    line and exits 1, and the result names no path."""
    secret = tmp_path / "elsewhere" / "output" / "1-claimed-stdout.txt"
    secret.parent.mkdir(parents=True)
    secret.write_text("the secret\n")
    named = "/etc/shadow" if how == "outside" else str(secret)
    kept = tmp_path / "kept"
    proc = a2e("call", "claim_output", "--plugin", "tests.cli_plugins:SpoolClaims",
               "--arg", f"how={how}", "--arg", f"secret={named}", "--keep-output", str(kept),
               check=False)  # fmt: skip
    _one_clear_line(proc, 1, "a2e: claim_output: --keep-output: stdout: ", "not copied", why)
    assert list(kept.iterdir()) == []
    data = json.loads(proc.stdout)["data"]
    assert "stdout_path" not in data and data["stdout_note"].startswith(f"not kept: {why}")
    (mark,) = _markers(data["stdout"])
    assert f"omitted; not kept: {why}" in mark and not _names_a_path(mark), mark


def test_flags_set_the_fields_they_name_over_the_file_and_leave_the_rest(tmp_path: Path) -> None:
    """One declared mapping from flags to fields: a flag given overrides the file's value,
    a part's other fields stay the file's, a flag not given leaves the file's; the HTTP service
    checks the token itself, so its engine asks none in the handshake."""
    from a2e_engine.engine.cli._app import build_parser
    from a2e_engine.engine.cli._engine_options import engine_from_args

    config = tmp_path / "engine.toml"
    config.write_text(
        "[engine]\nprefork = 3\nmax_workers = 9\n"
        "[engine.limits]\nmemory_mb = 512\ncpu_seconds = 7\n"
        "[engine.isolation]\nlandlock = false\n"
    )
    flags = ["--memory-mb", "300", "--no-cgroups", "--busy-workers", "2", "--token", "t0k"]
    args = build_parser().parse_args(["list", "--config", str(config), *flags])
    engine = engine_from_args(args)
    limits, isolation = engine.config.limits, engine.config.isolation
    assert (limits.memory_mb, limits.cpu_seconds) == (300, 7)
    assert (isolation.landlock, isolation.cgroups, isolation.namespaces) == (False, False, True)
    assert (engine.config.prefork, engine.config.max_workers) == (3, 9)
    assert engine.worker_bound.busy == 2 and engine.config.token == "t0k"
    assert engine_from_args(args, handshake_token=False).config.token is None
