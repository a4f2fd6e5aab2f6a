"""The run layer attacked (``sandbox._run_root``): a call writes anywhere its uid may, and none of
it reaches the host, not through a file the host lets anyone write, a symbolic link,
``/proc/self/root``, ``/proc/1/root`` or a hard link; filling the layer ends in ``ENOSPC`` at
its cap; the next call finds none of it; switched off, writes outside are refused again."""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig, Isolation
from a2e_engine.sandbox._limits import Limits

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the run layer needs root here")

CAP_MB = 16


@pytest.fixture(scope="module")
def host_dir() -> Iterator[str]:
    """A host directory calls may read, and a file in it that anyone may write: only the
    sandbox stands between a call and them."""
    directory = tempfile.mkdtemp(prefix="a2e-layer-", dir="/tmp")
    os.chmod(directory, 0o777)
    shared = os.path.join(directory, "shared.txt")
    with open(shared, "w") as fh:
        fh.write("host\n")
    os.chmod(shared, 0o666)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def api(host_dir: str) -> Iterator[ToolAPI]:
    # The state directory where it goes by default (engine.state_dir), out of /tmp: the
    # programs run_code runs may write all of their /tmp.
    state = tempfile.mkdtemp(prefix="a2e-layer-state-", dir="/var/tmp")
    config = EngineConfig(
        prefork=1,
        max_workers=2,
        read_roots=(host_dir,),
        limits=Limits(tmp_mb=CAP_MB),
        state_dir=state,
    )
    try:
        with Engine(config=config) as engine:
            layer = engine.layers["writable_root"]
            assert layer["active"] and "/tmp" in layer["program_writable"], layer
            with engine.connect() as client:
                yield ToolAPI(client)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def _run(api: ToolAPI, code: str, **more: Any) -> dict[str, Any]:
    result = api.call(
        tool_name="run_code", arguments={"language": "python", "code": code, **more}, timeout=60
    )
    assert result.success, result.error
    return result.data  # type: ignore[no-any-return]


def _printed(data: dict[str, Any]) -> str:
    run = data["run_result"]
    assert data["status"] == "Success", run["stderr"]
    return str(run["stdout"])


def _host_file(host_dir: str) -> str:
    with open(os.path.join(host_dir, "shared.txt")) as fh:
        return fh.read()


def test_a_program_writes_anywhere_and_fetches_it_back(api: ToolAPI) -> None:
    name = f"a2e-layer-{uuid.uuid4().hex}"
    written = [f"/mnt/{name}/out.txt", f"/home/{name}/notes.txt", f"/tmp/{name}.txt"]
    code = (
        "import os\n"
        f"for path in {written!r}:\n"
        "    os.makedirs(os.path.dirname(path), exist_ok=True)\n"
        "    open(path, 'w').write('42 ' + path)\n"
        "open('beside.txt', 'w').write('here')\n"
        f"print(open({written[0]!r}).read())\n"
    )
    data = _run(api, code, fetch_files=[written[0], "beside.txt", "/mnt/none.txt"])
    assert _printed(data) == f"42 {written[0]}\n"
    assert {k: base64.b64decode(v).decode() for k, v in data["files"].items()} == {
        written[0]: f"42 {written[0]}",
        "beside.txt": "here",
    }
    for path in (*written, f"/mnt/{name}", f"/home/{name}"):
        assert not os.path.exists(path), path
    # The next call starts from the host's files again.
    again = _run(api, f"import os\nprint([os.path.exists(p) for p in {written!r}])")
    assert _printed(again) == "[False, False, False]\n"


def test_files_given_by_absolute_path_land_in_the_layer(api: ToolAPI) -> None:
    """As SandboxFusion writes them into its overlay; never where the engine keeps its state."""
    name = f"/mnt/a2e-layer-{uuid.uuid4().hex}/in.txt"
    given = {name: base64.b64encode(b"given").decode(), "rel.txt": "cmVs"}
    code = f"print(open({name!r}).read(), open('rel.txt').read())"
    assert _printed(_run(api, code, files=given)) == "given rel\n"
    assert not os.path.exists(name)
    for path in ("/var/tmp/a2e-attack", "../a2e-attack"):
        refused = api.call(
            tool_name="run_code",
            arguments={"language": "python", "code": "1", "files": {path: "eA=="}},
        )
        assert not refused.success and "outside the allowed roots" in str(refused.error)


def test_a_file_the_host_lets_anyone_write_stays_as_it_was(api: ToolAPI, host_dir: str) -> None:
    shared = os.path.join(host_dir, "shared.txt")
    code = (
        "import os\n"
        f"open({shared!r}, 'a').write('pwned\\n')\n"
        f"open({host_dir!r} + '/a2e-attack', 'w').write('new')\n"
        f"os.rename({host_dir!r} + '/a2e-attack', {host_dir!r} + '/a2e-attack.moved')\n"
        f"print(open({shared!r}).read(), sorted(os.listdir({host_dir!r})))\n"
    )
    # The call sees its own changes ...
    assert _printed(_run(api, code)) == "host\npwned\n ['a2e-attack.moved', 'shared.txt']\n"
    # ... and the host none of them.
    assert _host_file(host_dir) == "host\n"
    assert sorted(os.listdir(host_dir)) == ["shared.txt"]


def test_links_and_proc_roots_lead_into_the_layer_only(api: ToolAPI, host_dir: str) -> None:
    shared = os.path.join(host_dir, "shared.txt")
    hard = os.path.join(host_dir, "a2e-attack-hard")
    code = (
        "import os\n"
        f"os.symlink({shared!r}, 'link')\n"
        "open('link', 'a').write('symlink\\n')\n"
        f"os.link({shared!r}, {hard!r})\n"
        f"open({hard!r}, 'a').write('hard link\\n')\n"
        f"open('/proc/self/root' + {shared!r}, 'a').write('self root\\n')\n"
        "try:\n"  # the worker, pid 1, is not dumpable: its root is not the call's to follow
        f"    open('/proc/1/root' + {shared!r}, 'a').write('pid 1 root\\n')\n"
        "except PermissionError:\n"
        "    pass\n"
        f"print(open({shared!r}).read(), end='')\n"
    )
    assert _printed(_run(api, code)) == "host\nsymlink\nhard link\nself root\n"
    assert _host_file(host_dir) == "host\n"
    assert not os.path.exists(hard)


def test_filling_the_layer_ends_in_no_space(api: ToolAPI, host_dir: str) -> None:
    shared = os.path.join(host_dir, "shared.txt")
    code = (
        "import errno, os\n"
        "def fill(path):\n"
        "    try:\n"
        "        with open(path, 'ab') as fh:\n"
        "            for _ in range(64):\n"
        "                fh.write(b'x' * (1 << 20))\n"
        "                fh.flush()\n"
        "    except OSError as exc:\n"
        "        return errno.errorcode[exc.errno]\n"
        "    return 'no error'\n"
        "print(fill('/mnt/fill'), os.path.getsize('/mnt/fill') >> 20)\n"
        "os.unlink('/mnt/fill')\n"
        # A host file copied up counts against the same cap.
        f"print(fill({shared!r}))\n"
    )
    first, second = _printed(_run(api, code)).splitlines()
    verdict, size_mb = first.split()
    assert verdict == "ENOSPC" and int(size_mb) <= CAP_MB, first
    assert second == "ENOSPC"
    assert _host_file(host_dir) == "host\n"
    assert _printed(_run(api, "print('still here')")) == "still here\n"


def test_switched_off_writes_outside_are_refused(host_dir: str) -> None:
    config = EngineConfig(
        prefork=1, read_roots=(host_dir,), isolation=Isolation(writable_root=False)
    )
    with Engine(config=config) as engine, engine.connect() as client:
        assert engine.layers["writable_root"] == {
            "active": False,
            "reason": "disabled by configuration",
        }
        data = _run(ToolAPI(client), "open('/mnt/a2e-attack', 'w')")
        assert data["status"] == "Failed"
        assert "Read-only file system" in data["run_result"]["stderr"]
    assert not os.path.exists("/mnt/a2e-attack")


def test_the_root_is_the_layer_and_no_descriptor_leads_out(api: ToolAPI) -> None:
    """What a program holds and where ``..`` takes it: its ``/`` is the layer's tmpfs (not the
    host's root filesystem, whose device differs), ``/..`` is ``/``, and it holds no
    descriptor of the worker's (the layer's build held the host's directories open)."""
    code = (
        "import json, os\n"
        "fds = {}\n"
        "for fd in os.listdir('/proc/self/fd'):\n"
        "    try:\n"
        "        fds[fd] = os.readlink(f'/proc/self/fd/{fd}')\n"
        "    except OSError:\n"
        "        pass\n"
        "root, up = os.stat('/'), os.stat('/..')\n"
        "print(json.dumps({'fds': fds, 'root': [root.st_dev, root.st_ino],\n"
        "                  'up': [up.st_dev, up.st_ino], 'tmp': os.stat('/tmp').st_dev}))\n"
    )
    seen = json.loads(_printed(_run(api, code)))
    assert seen["root"] == seen["up"] and seen["root"][0] == seen["tmp"]
    assert seen["root"][0] != os.stat("/").st_dev
    for fd, target in seen["fds"].items():
        assert target.startswith(("pipe:", "socket:", "/dev/null", "/proc/")), (fd, target)
