"""The ``a2e`` command as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert "Read-only file system: '/etc/a2e-demo'" in out
    assert "calls/s" in out


def test_doctor_lists_every_layer_and_fails_on_a_missing_required_one() -> None:
    from a2e_engine.sandbox.layers import LAYERS

    out = a2e("doctor").stdout
    for name in LAYERS:
        assert name in out
    report = json.loads(a2e("doctor", "--json").stdout)
    assert report["missing"] == [] and report["layers"]["seccomp"]["active"]
    assert set(report["layers"]) == set(LAYERS)  # each one reported, active or why not
    proc = a2e("doctor", "--no-namespaces", "--require", "pid_namespace", check=False)
    assert proc.returncode == 1
    assert "missing required layers: pid_namespace (disabled by configuration)" in proc.stdout
    assert "why not: disabled by configuration" in proc.stdout
