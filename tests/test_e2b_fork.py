"""Forking sandboxes (``Sandbox.fork``, ``engine._session_forks``), driven by E2B's SDK as tree
search drives it: a sandbox branched at turn 3 into 8 children that each run 3 more cells,
diverging without touching the parent or each other; copies of copies; a child that outlives
its parent; a sandbox with no interpreter yet; and what the control plane refuses."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from e2b import SandboxException
from e2b_code_interpreter import Sandbox

from tests.e2b_helpers import running_as, sdk_opts
from tests.service_process import ServiceProcess
from tests.waiting import wait_for

KEY = "fork-key-0123456789abcdef"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    process = ServiceProcess("--token", KEY, "--max-timeout", "300")
    yield process
    process.stop()


def _opts(service: ServiceProcess) -> dict[str, Any]:
    return sdk_opts(service, KEY)


def _forked(parent: Sandbox, count: int) -> list[Sandbox]:
    children = parent.fork(count=count)
    assert all(isinstance(child, Sandbox) for child in children), children
    return [child for child in children if isinstance(child, Sandbox)]


def _value(sandbox: Sandbox, code: str) -> str | None:
    execution = sandbox.run_code(code)
    assert execution.error is None, execution.error
    return execution.text


def test_a_branch_into_eight_children_diverges_without_touching_parent_or_sibling(
    service: ServiceProcess,
) -> None:
    parent = Sandbox.create(timeout=120, **_opts(service))
    try:
        parent.run_code("import json, math\nhistory = ['turn 1']")
        parent.run_code("history.append('turn 2')\nheap = list(range(200_000))")
        parent.files.write("/home/user/notes.txt", "turn 3\n")
        parent.run_code("history.append('turn 3')")
        children = _forked(parent, 8)
        assert len({child.sandbox_id for child in children} | {parent.sandbox_id}) == 9
        for index, child in enumerate(children):
            assert _value(child, "len(history), len(heap)") == "(3, 200000)"
            child.run_code(f"history.append('child {index}')\nmine = {index}")
            child.run_code(f"open('/home/user/notes.txt', 'a').write('child {index}\\n')")
            child.commands.run(f"echo {index} > /home/user/own.txt")
        for index, child in enumerate(children):
            assert _value(child, "history[-1], mine") == f"('child {index}', {index})"
            assert child.files.read("/home/user/notes.txt") == f"turn 3\nchild {index}\n"
            assert _value(child, "open('/home/user/own.txt').read()") == repr(f"{index}\n")
        assert _value(parent, "history") == "['turn 1', 'turn 2', 'turn 3']"
        assert _value(parent, "'mine' in globals()") == "False"
        assert parent.files.read("/home/user/notes.txt") == "turn 3\n"
        assert not parent.files.exists("/home/user/own.txt")
        uids = {child.commands.run("id -u").stdout for child in children}
        uids.add(parent.commands.run("id -u").stdout)
        assert len(uids) == 9  # each its own, its interpreter's files shown as its own
        assert _value(children[0], "import os; str(os.getuid())") == repr(
            children[0].commands.run("id -u").stdout.strip()
        )
        for child in children:
            child.kill()
        assert _value(parent, "history.append('turn 4'); len(history)") == "4"
    finally:
        parent.kill()


def test_copies_of_copies_and_a_child_that_outlives_its_parent(service: ServiceProcess) -> None:
    parent = Sandbox.create(timeout=120, **_opts(service))
    parent.run_code("depth = 0")
    family = int(parent.commands.run("id -u").stdout)  # every copied interpreter runs as it
    (child,) = _forked(parent, 1)
    child.run_code("depth = 1")
    grandchildren = _forked(child, 2)
    for index, grandchild in enumerate(grandchildren):
        assert _value(grandchild, f"depth += 1; depth + {index}") == str(2 + index)
    parent.kill()
    child.kill()
    assert _value(grandchildren[0], "depth") == "2"  # its ancestors are gone; it is not
    assert _value(grandchildren[1], "depth") == "2"
    for grandchild in grandchildren:
        grandchild.kill()
    # The family's first worker waited for its last copy; now nothing of it is left.
    assert wait_for(lambda: not running_as(family), 20)


def test_a_sandbox_with_no_interpreter_yet_forks_its_files(service: ServiceProcess) -> None:
    parent = Sandbox.create(timeout=120, **_opts(service))
    try:
        parent.files.write("/home/user/data.csv", "a,b\n1,2\n")
        (child,) = _forked(parent, 1)
        assert child.files.read("/home/user/data.csv") == "a,b\n1,2\n"
        assert _value(child, "open('/home/user/data.csv').read()") == repr("a,b\n1,2\n")
        child.kill()
    finally:
        parent.kill()


@pytest.mark.parametrize(
    ("body", "status"),
    [({"count": 0}, 400), ({"count": 101}, 400), ({"count": "2"}, 400), ({"timeout": -1}, 400)],
)
def test_a_fork_asked_for_wrongly_is_refused_in_e2b_shape(
    service: ServiceProcess, body: dict[str, Any], status: int
) -> None:
    parent = Sandbox.create(timeout=60, **_opts(service))
    try:
        response = httpx.post(
            f"{service.url}/sandboxes/{parent.sandbox_id}/fork",
            json=body,
            headers={"X-API-Key": KEY},
            timeout=30,
        )
        assert response.status_code == status
        assert set(response.json()) == {"code", "message"}
        missing = httpx.post(
            f"{service.url}/sandboxes/nope/fork", json={}, headers={"X-API-Key": KEY}, timeout=30
        )
        assert missing.status_code == 404
    finally:
        parent.kill()


def test_a_snapshot_starts_sandboxes_as_it_was_until_it_is_deleted(
    service: ServiceProcess,
) -> None:
    parent = Sandbox.create(timeout=120, **_opts(service))
    try:
        parent.run_code("state = 'at the snapshot'")
        parent.files.write("/home/user/f.txt", "at the snapshot")
        snapshot = parent.create_snapshot(name="turn-3")
        assert snapshot.names == ["turn-3"]
        # Taken right after, while the first one's copy may still be being placed.
        again = parent.create_snapshot()
        parent.run_code("state = 'later'")
        parent.files.write("/home/user/f.txt", "later")
        by_id = Sandbox.create(template=snapshot.snapshot_id, **_opts(service))
        by_name = Sandbox.create(template="turn-3", **_opts(service))
        for made in (by_id, by_name):
            assert _value(made, "state") == "'at the snapshot'"
            assert made.files.read("/home/user/f.txt") == "at the snapshot"
        by_id.run_code("state = 'by id'")
        assert _value(by_name, "state") == "'at the snapshot'"
        assert _value(parent, "state") == "'later'"
        listed = Sandbox.list_snapshots(sandbox_id=parent.sandbox_id, **_opts(service))
        ids = [snapshot.snapshot_id, again.snapshot_id]
        assert [s.snapshot_id for s in listed.next_items()] == ids
        from_again = Sandbox.create(template=again.snapshot_id, **_opts(service))
        assert _value(from_again, "state") == "'at the snapshot'"
        from_again.kill()
        assert Sandbox.delete_snapshot(again.snapshot_id, **_opts(service)) is True
        assert Sandbox.delete_snapshot(snapshot.snapshot_id, **_opts(service)) is True
        assert Sandbox.delete_snapshot(snapshot.snapshot_id, **_opts(service)) is False
        with pytest.raises(SandboxException, match="not served"):
            Sandbox.create(template=snapshot.snapshot_id, **_opts(service))
        assert _value(by_id, "state") == "'by id'"  # sandboxes made from it go on
        by_id.kill()
        by_name.kill()
    finally:
        parent.kill()


def test_a_line_of_copies_ends_with_a_clear_refusal_and_goes_on(service: ServiceProcess) -> None:
    """A sandbox that runs a cell after each fork enters one more Landlock domain each time:
    past the last the kernel allows, a fork is refused in one line, and the sandbox runs on.
    Forks with no cell between them, and sandboxes started from a snapshot, take none."""
    parent = Sandbox.create(timeout=120, **_opts(service))
    try:
        parent.run_code("turns = 0")
        for _ in range(15):
            (child,) = _forked(parent, 1)
            assert _value(child, "turns += 1; turns") == "1"
            child.kill()
            assert _value(parent, "turns") == "0"
        with pytest.raises(SandboxException, match="kept apart 16 times over"):
            parent.fork(count=1)
        assert _value(parent, "turns") == "0"
    finally:
        parent.kill()
    fresh = Sandbox.create(timeout=120, **_opts(service))
    try:
        fresh.run_code("turns = 0")
        snapshot = fresh.create_snapshot()
        for _ in range(20):
            (child,) = _forked(fresh, 1)
            child.kill()
            Sandbox.create(template=snapshot.snapshot_id, **_opts(service)).kill()
        assert _value(fresh, "turns") == "0"
        Sandbox.delete_snapshot(snapshot.snapshot_id, **_opts(service))
    finally:
        fresh.kill()


def test_a_sandbox_running_threads_forks_and_goes_on_without_them(
    service: ServiceProcess,
) -> None:
    """``fork`` copies only the thread that calls it: a sandbox with threads of its own goes on
    in a copy of its own as its children do, its threads stopped at the branch point."""
    parent = Sandbox.create(timeout=120, **_opts(service))
    try:
        parent.run_code(
            "import threading, time\nkept = 'before'\n"
            "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()"
        )
        assert _value(parent, "threading.active_count()") == "2"
        (child,) = _forked(parent, 1)
        for sandbox in (parent, child):
            assert _value(sandbox, "kept, threading.active_count()") == "('before', 1)"
        child.run_code("kept = 'child'")
        assert _value(parent, "kept") == "'before'"
        child.kill()
    finally:
        parent.kill()
