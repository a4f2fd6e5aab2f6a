"""A sandbox's own side (``engine.e2b._sandbox_side``), driven by E2B's SDKs unmodified, with
``E2B_SANDBOX_URL`` set to the service: the code interpreter's cells, contexts and languages;
envd's commands (foreground, background, attached to again, killed, timed out) and
filesystem (stat, list, make dir, move, remove, files up and down, large ones in pieces,
signed URLs); each acting on the sandbox's own session, workspace and interpreter."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from e2b import (
    CommandExitException,
    FileNotFoundException,
    SandboxException,
    TimeoutException,
)
from e2b_code_interpreter import Sandbox

from tests.service_process import ServiceProcess
from tests.waiting import wait_for

KEY = "sandbox-side-key-0123456789"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    process = ServiceProcess("--token", KEY, "--max-timeout", "60")
    yield process
    process.stop()


def _opts(service: ServiceProcess) -> dict[str, Any]:
    return {"api_key": KEY, "api_url": service.url, "sandbox_url": service.url}


@pytest.fixture
def sandbox(service: ServiceProcess) -> Iterator[Sandbox]:
    made = Sandbox.create(timeout=120, envs={"GREETING": "hello"}, **_opts(service))
    yield made
    made.kill()


def test_cells_keep_their_state_and_report_as_the_sdk_reads_them(sandbox: Sandbox) -> None:
    first = sandbox.run_code("x = 41\nprint('hi')\nx + 1")
    assert first.text == "42" and first.logs.stdout == ["hi\n"] and first.error is None
    assert first.execution_count == 1
    shown = sandbox.run_code("display('shown'); x")
    assert [r.text for r in shown.results] == ["'shown'", "41"]
    assert [r.is_main_result for r in shown.results] == [False, True]
    failed = sandbox.run_code("import sys; print('oops', file=sys.stderr); 1/0")
    assert failed.error is not None and failed.error.name == "ZeroDivisionError"
    assert "1/0" in failed.error.traceback and failed.logs.stderr == ["oops\n"]
    environment = sandbox.run_code("import os; os.environ['GREETING'], os.environ.get('ONCE')")
    assert environment.text == "('hello', None)"
    once = sandbox.run_code("os.environ.get('ONCE')", envs={"ONCE": "1"})
    assert once.text == "'1'"
    assert sandbox.run_code("os.environ.get('ONCE')").text is None  # for that cell only
    seen: list[str] = []
    sandbox.run_code("print('streamed')", on_stdout=lambda m: seen.append(m.line))
    assert seen == ["streamed\n"]


def test_contexts_are_namespaces_of_their_own(sandbox: Sandbox) -> None:
    sandbox.run_code("kept = 'default'")
    context = sandbox.create_code_context(cwd="/home/user/sub")
    assert context.language == "python" and context.cwd == "/home/user/sub"
    sandbox.files.make_dir("/home/user/sub")
    missing = sandbox.run_code("kept", context=context)
    assert missing.error is not None and missing.error.name == "NameError"
    assert sandbox.run_code("import os; os.getcwd().endswith('/sub')", context=context).text == (
        "True"
    )
    sandbox.run_code("mine = 1", context=context)
    assert sandbox.run_code("mine", context=context).text == "1"
    assert sandbox.run_code("kept").text == "'default'"
    ids = {c.id for c in sandbox.list_code_contexts()}
    assert context.id in ids and "default" in ids
    sandbox.restart_code_context(context)
    assert sandbox.run_code("mine", context=context).error is not None
    sandbox.remove_code_context(context)
    assert context.id not in {c.id for c in sandbox.list_code_contexts()}
    with pytest.raises(SandboxException):
        sandbox.run_code("1", context=context)
    bash = sandbox.run_code("echo $GREETING; pwd", language="bash")
    assert bash.logs.stdout[0].startswith("hello\n")
    with pytest.raises(SandboxException, match="not served"):
        sandbox.run_code("1", language="r")


def test_a_cell_whose_client_goes_is_interrupted_and_the_interpreter_kept(
    sandbox: Sandbox,
) -> None:
    sandbox.run_code("before = 'kept'")
    with pytest.raises(TimeoutException):
        sandbox.run_code("while True: pass", timeout=1)
    started = time.monotonic()
    after = sandbox.run_code("before")
    assert after.text == "'kept'"
    assert time.monotonic() - started < 10  # not queued behind a cell still spinning


def test_commands_run_in_the_sandbox_with_their_output_and_exit(sandbox: Sandbox) -> None:
    done = sandbox.commands.run(
        "echo out; echo err >&2; echo $GREETING $EXTRA", envs={"EXTRA": "x"}
    )
    assert done.exit_code == 0 and done.stdout == "out\nhello x\n" and done.stderr == "err\n"
    lines: list[str] = []
    sandbox.commands.run("for i in 1 2 3; do echo $i; done", on_stdout=lines.append)
    assert "".join(lines) == "1\n2\n3\n"
    with pytest.raises(CommandExitException) as failed:
        sandbox.commands.run("echo partial; exit 3")
    assert failed.value.exit_code == 3 and failed.value.stdout == "partial\n"
    sandbox.files.make_dir("/home/user/work")
    assert sandbox.commands.run("ls", cwd="/home/user/work").stdout == ""
    assert sandbox.commands.run("echo hi > made.txt").exit_code == 0
    assert sandbox.files.read("/home/user/made.txt") == "hi\n"
    # The workspace is /home/user inside too, as E2B's users write it.
    where = sandbox.commands.run("pwd; echo $HOME; cat /home/user/made.txt; cd ~ && pwd")
    assert where.stdout == "/home/user\n/home/user\nhi\n/home/user\n"
    assert sandbox.commands.run("pwd", cwd="/home/user/work").stdout == "/home/user/work\n"
    seen = sandbox.run_code(
        "import os; open('/home/user/made.txt').read(), os.path.expanduser('~')"
    )
    assert seen.text == "('hi\\n', '/home/user')"


def test_background_commands_outlive_their_request(sandbox: Sandbox) -> None:
    handle = sandbox.commands.run("echo started; sleep 60", background=True)
    listed = sandbox.commands.list()
    assert [p.pid for p in listed] == [handle.pid] and listed[0].args[-1].startswith("echo")
    handle.disconnect()
    again = sandbox.commands.connect(handle.pid)
    assert sandbox.commands.kill(handle.pid) is True
    with pytest.raises(CommandExitException):
        again.wait()
    assert wait_for(lambda: sandbox.commands.list() == [], 10)
    assert sandbox.commands.kill(handle.pid) is False
    quick = sandbox.commands.run("echo done", background=True)
    assert quick.wait().stdout == "done\n"


def test_a_command_started_with_stdin_reads_what_is_sent_as_it_runs(sandbox: Sandbox) -> None:
    """SendInput and StreamInput reach the running command's stdin in order, as it reads;
    CloseStdin ends it; a command started without stdin takes none, and reads an empty one."""
    commands = sandbox.commands
    reader = commands.run("read a; echo first $a; cat; echo end", background=True, stdin=True)
    commands.send_stdin(reader.pid, "one\n")
    commands.stream_input(reader.pid, iter(["two\n", b"three\n"]))
    commands.send_stdin(reader.pid, "four\n")
    commands.close_stdin(reader.pid)
    assert reader.wait().stdout == "first one\ntwo\nthree\nfour\nend\n"
    closed = commands.run("sleep 30", background=True)
    with pytest.raises(SandboxException, match="started without stdin"):
        commands.send_stdin(closed.pid, "x")
    commands.kill(closed.pid)
    assert commands.run("cat").stdout == ""  # an empty stdin, not one that waits
    ended = commands.run("cat > got.txt", background=True, stdin=True)
    commands.send_stdin(ended.pid, b"\x00\xffbinary")
    commands.close_stdin(ended.pid)
    ended.wait()
    assert sandbox.files.read("got.txt", format="bytes") == b"\x00\xffbinary"
    with pytest.raises(SandboxException):
        commands.send_stdin(ended.pid, "late")  # it has ended


def test_a_command_past_its_deadline_is_killed(sandbox: Sandbox) -> None:
    with pytest.raises(TimeoutException):
        sandbox.commands.run("sleep 30", timeout=1)
    assert wait_for(lambda: sandbox.commands.list() == [], 10)


def test_files_move_both_ways_and_the_tree_is_e2bs(sandbox: Sandbox) -> None:
    files = sandbox.files
    info = files.write("/home/user/a.txt", "text")
    assert info.path == "/home/user/a.txt" and info.name == "a.txt"
    assert files.read("/home/user/a.txt") == "text" and files.read("a.txt") == "text"
    blob = bytes(range(256)) * (40 * 1024 + 3)  # past two of the pieces a file moves in
    files.write("/home/user/deep/er/blob.bin", blob)
    assert files.read("/home/user/deep/er/blob.bin", format="bytes") == blob
    assert sandbox.run_code("len(open('deep/er/blob.bin', 'rb').read())").text == str(len(blob))
    assert files.exists("/home/user/a.txt") and not files.exists("/home/user/none")
    names = {e.name: e for e in files.list("/home/user")}
    assert names["a.txt"].type.value == "file" and names["deep"].type.value == "dir"
    assert names["a.txt"].size == 4 and names["a.txt"].permissions == "-rw-r--r--"
    deep = {e.path for e in files.list("/home/user/deep", depth=2)}
    assert deep == {"/home/user/deep/er", "/home/user/deep/er/blob.bin"}
    assert files.make_dir("/home/user/d/e") is True and files.make_dir("/home/user/d/e") is False
    moved = files.rename("/home/user/a.txt", "/home/user/d/b.txt")
    assert moved.path == "/home/user/d/b.txt" and not files.exists("/home/user/a.txt")
    files.remove("/home/user/d")
    assert not files.exists("/home/user/d/b.txt")
    with pytest.raises(FileNotFoundException):
        files.read("/home/user/none")
    with pytest.raises(SandboxException):
        files.write("/etc/planted", "x")  # only the workspace is written
    with pytest.raises(SandboxException, match="outside the allowed roots"):
        files.read("/etc/passwd")  # none but the workspace, unless --read-root says so
    written = files.write_files(
        [{"path": "m/1", "data": "1"}, {"path": "/home/user/m/2", "data": b"2"}]
    )
    assert [w.path for w in written] == ["/home/user/m/1", "/home/user/m/2"]


def test_a_watched_directory_reports_what_changed(
    service: ServiceProcess, sandbox: Sandbox
) -> None:
    """The sync SDK's watcher (create, get events, stop) and the async SDK's stream both
    report what was created, written, removed, with its entry when asked."""
    import asyncio

    from e2b_code_interpreter import AsyncSandbox

    files = sandbox.files
    files.write("/home/user/w/old.txt", "old")
    handle = files.watch_dir("/home/user/w", recursive=True, include_entry=True)
    files.write("/home/user/w/new.txt", "new")
    files.write("/home/user/w/old.txt", "changed, longer")
    files.make_dir("/home/user/w/sub")
    files.write("/home/user/w/sub/deep.txt", "deep")
    events = {(e.name, e.type.value) for e in handle.get_new_events()}
    assert events == {
        ("new.txt", "create"),
        ("old.txt", "write"),
        ("sub", "create"),
        ("sub/deep.txt", "create"),
    }, events
    files.remove("/home/user/w/new.txt")
    gone = handle.get_new_events()
    assert [(e.name, e.type.value) for e in gone] == [("new.txt", "remove")]
    assert handle.get_new_events() == []
    handle.stop()
    with pytest.raises(FileNotFoundException):
        files.watch_dir("/home/user/nowhere")

    async def streamed() -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []
        same = await AsyncSandbox.connect(sandbox.sandbox_id, **_opts(service))
        watching = await same.files.watch_dir(
            "/home/user/w", on_event=lambda e: seen.append((e.name, e.type.value))
        )
        await same.files.write("/home/user/w/streamed.txt", "s")
        for _ in range(50):
            if seen:
                break
            await asyncio.sleep(0.1)
        await watching.stop()
        return seen

    assert asyncio.run(streamed()) == [("streamed.txt", "create")]


def test_signed_urls_open_one_file_one_way_until_they_expire(sandbox: Sandbox) -> None:
    sandbox.files.write("/home/user/signed.txt", "signed")
    url = sandbox.download_url("/home/user/signed.txt")
    assert httpx.get(url, timeout=10).text == "signed"
    upload = sandbox.upload_url("/home/user/up.txt")
    sent = httpx.post(upload, files={"file": ("up.txt", b"uploaded")}, timeout=10)
    assert sent.status_code == 200, sent.text
    assert sandbox.files.read("/home/user/up.txt") == "uploaded"
    other = url.replace("signed.txt", "up.txt")  # the signature is of the path
    assert httpx.get(other, timeout=10).status_code == 401
    writing = httpx.post(url, files={"file": ("x", b"x")}, timeout=10)  # a read's, to write
    assert writing.status_code == 401
    expired = sandbox.download_url("/home/user/signed.txt", use_signature_expiration=1)
    time.sleep(2.1)
    assert httpx.get(expired, timeout=10).status_code == 401
    lasting = sandbox.download_url("/home/user/signed.txt", use_signature_expiration=600)
    assert httpx.get(lasting, timeout=10).text == "signed"


def test_a_killed_sandbox_answers_as_gone(service: ServiceProcess) -> None:
    made = Sandbox.create(timeout=60, **_opts(service))
    assert made.is_running()
    made.kill()
    assert made.is_running() is False
    with pytest.raises(SandboxException, match="was not found"):
        made.commands.run("true")
    with pytest.raises(SandboxException):
        made.files.read("/home/user/x")


def test_the_agentic_rl_page_examples_run_as_written(service: ServiceProcess) -> None:
    """docs/agentic-rl.md's examples (a trajectory's sandbox; branching it), with only the
    environment it says to set."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    page = (Path(__file__).parent.parent / "docs" / "agentic-rl.md").read_text()
    examples = re.findall(r"```python\n(.*?)```", page, re.S)
    env = {
        **os.environ,
        "E2B_API_URL": service.url,
        "E2B_SANDBOX_URL": service.url,
        "E2B_API_KEY": KEY,
    }
    printed = ["0\nhi\n\n", "1000000\n"]
    assert len(examples) == len(printed)
    for example, expected in zip(examples, printed, strict=True):
        done = subprocess.run(
            [sys.executable, "-c", example], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout == expected
