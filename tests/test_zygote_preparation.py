"""What the zygote works out once for all its workers: the paths Landlock's read rules need and
the paths a private ``/tmp`` binds back. Fewer is cheaper; never less than what is covered."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from a2e_engine.sandbox._landlock import covering_paths
from a2e_engine.sandbox._mount_template import TmpBind, tmp_binds


def test_covering_paths_resolve_links_and_drop_what_is_covered(tmp_path: Path) -> None:
    (tmp_path / "usr" / "lib").mkdir(parents=True)
    (tmp_path / "lib").symlink_to(tmp_path / "usr" / "lib")  # a merged /usr
    (tmp_path / "code").mkdir()
    (tmp_path / "code-two").mkdir()  # a sibling whose name starts like another path's
    (tmp_path / "code" / "mod.py").write_text("")
    paths = [
        str(tmp_path / "usr"),
        str(tmp_path / "lib"),
        str(tmp_path / "missing"),
        str(tmp_path / "code" / "mod.py"),
        str(tmp_path / "code"),
        str(tmp_path / "code-two"),
        str(tmp_path / "usr"),
    ]
    assert covering_paths(paths) == (
        str(tmp_path / "usr"),
        str(tmp_path / "code"),
        str(tmp_path / "code-two"),
    )


def test_a_rule_on_the_root_covers_everything() -> None:
    assert covering_paths(["/usr", "/", "/etc", "/proc"]) == ("/",)


def test_the_paths_a_private_tmp_binds_back() -> None:
    under_tmp = Path("/tmp") / f"a2e-test-binds-{os.getpid()}"
    under_tmp.mkdir()
    try:
        (under_tmp / "state").mkdir()
        (under_tmp / "module.py").write_text("")
        binds = tmp_binds(
            [
                str(under_tmp / "state"),
                str(under_tmp / "state") + "/",  # the same path once
                str(under_tmp / "module.py"),
                str(under_tmp / "gone"),  # missing: nothing to bind
                "/tmp",  # the new /tmp itself is not bound back
                "/usr",  # outside /tmp: a private /tmp does not hide it
            ]
        )
        assert binds == (
            TmpBind(str(under_tmp / "state"), True),
            TmpBind(str(under_tmp / "module.py"), False),
        )
    finally:
        for child in under_tmp.iterdir():
            child.rmdir() if child.is_dir() else child.unlink()
        under_tmp.rmdir()


def test_the_zygote_settings_arrive_as_the_value_that_was_sent() -> None:
    from a2e_engine.sandbox._limits import Limits
    from a2e_engine.sandbox._settings import Isolation, ZygoteSettings

    isolation = Isolation(
        namespaces=False,
        landlock=False,
        identity=False,
        cgroups=False,
        uid_range=(2_000_000, 16),
        idle_priority=False,
    )
    sent = ZygoteSettings(
        limits=Limits(memory_mb=512, tmp_mb=32),
        isolation=isolation,
        profiles=("compute",),
        max_frame=1 << 20,
        writable_paths=("/srv/state",),
        read_roots=("/etc", "/opt"),
        receive_mounts=("/srv/state",),
    )
    assert ZygoteSettings.from_json(sent.to_json()) == sent
    assert ZygoteSettings.from_json(ZygoteSettings().to_json()) == ZygoteSettings()


def test_each_layer_lives_in_the_module_the_catalog_names() -> None:
    """A reader finds each layer in one module: the one ``sandbox.layers`` names, whose
    docstring opens on it."""
    import importlib

    from a2e_engine.sandbox.layers import CATALOG

    for name, layer in CATALOG.items():
        module = importlib.import_module(f"a2e_engine.sandbox.{layer.module}")
        opening = (module.__doc__ or "").split(":", 1)[0]
        assert opening.startswith("Layer") and f"``{name}``" in opening, (name, layer.module)


def test_each_layer_is_reported_by_its_own_module_only() -> None:
    """Whether a layer is on, and why not, is said in one place: the layer's module. A second
    module that names the layer is a second place that decides or reads its report."""
    from pathlib import Path

    import a2e_engine.sandbox
    from a2e_engine.sandbox.layers import CATALOG

    sources = {
        path.stem: path.read_text()
        for path in Path(a2e_engine.sandbox.__file__).parent.glob("*.py")
        if path.stem != "layers"
    }
    for name, layer in CATALOG.items():
        naming = sorted(module for module, text in sources.items() if f'"{name}"' in text)
        assert naming == [layer.module], (name, naming)


def test_the_run_layer_a_worker_builds(tmp_path: Path) -> None:
    """sandbox._run_root.plan: read roots as overlays, system and code read-only; programs
    may write the layer's own directories, never one holding the state directory, the
    system's or the code's; links on the way to code made again; a state directory reached
    through a link bound where it really is."""
    from a2e_engine.sandbox._run_root import plan

    data, code, real_state = tmp_path / "data", tmp_path / "checkout", tmp_path / "state"
    for folder in (data, code / "src", real_state):
        folder.mkdir(parents=True)
    (code / "pkg").symlink_to("src")  # an editable checkout's package directory
    (tmp_path / "state-link").symlink_to(real_state)
    readable = covering_paths(["/usr", "/etc", str(code / "pkg"), str(data)])
    root, why_not = plan(
        readable,
        covering_paths([str(data)]),
        [str(tmp_path / "state-link")],
        16,
        ["/usr", "/etc", str(code / "pkg"), str(data)],
    )
    assert root is not None and why_not is None
    assert root.overlays == (str(data),)
    assert set(root.bound) == {"/usr", "/etc", str(code / "src")}
    assert root.shared == (str(real_state),)
    assert (str(code / "pkg"), "src") in root.links
    assert {"/mnt", "/home", "/root"} <= set(root.program_writable)
    top = "/" + str(tmp_path).strip("/").split("/")[0]  # holds the state directory
    assert not {"/usr", "/etc", top} & set(root.program_writable)
    modes = dict(root.skeleton)
    assert modes["/mnt"] == 0o1777 and modes[str(code)] & 0o022 == 0
    assert list(root.skeleton).index((str(code), modes[str(code)])) > 0
    assert plan(["/"], [], [], 16)[0] is None


def test_the_layers_run_in_one_order_written_once() -> None:
    """``sandbox._contain.LAYERS`` is the only list of layers that runs: every module the
    catalog names (but the supervisor's own and the parts of another) has one layer there, no
    other module names a layer's steps, and the order keeps what each step relies on."""
    from pathlib import Path

    import a2e_engine.sandbox
    from a2e_engine.sandbox import _contain as contain
    from a2e_engine.sandbox.layers import CATALOG

    order = [type(layer).__module__.rsplit("._", 1)[1] for layer in contain.LAYERS]
    assert len(set(order)) == len(order)
    not_in_a_worker = {"run", "quota", "run_root"}  # the supervisor's; mount_template's part
    no_layer = {"plugin_code"}  # the plugins' preload: a step, not an isolation layer
    cataloged = {layer.module.removeprefix("_") for layer in CATALOG.values()}
    assert cataloged - not_in_a_worker == set(order) - no_layer
    sources = Path(a2e_engine.sandbox.__file__).parent.glob("*.py")
    listing = sorted(
        p.stem for p in sources if ".LAYER," in p.read_text() or "LAYERS:" in p.read_text()
    )
    assert listing == ["_contain"]
    before = [
        ("subreaper", "plugin_code"),  # what a preload leaves running is caught
        ("plugin_code", "network"),  # a preload runs where the zygote started, network and all
        ("plugin_code", "identity"),  # identity, the mount template, Landlock read its paths
        ("plugin_code", "forking"),  # a preload's thread decides how the zygote forks
        ("network", "clean_start"),  # the namespace's fd is joined before it is closed
        ("clean_start", "cgroups"),  # nothing runs with the zygote's fds open
        ("namespaces", "identity"),  # identity's way to the interpreter needs a mount namespace
        ("identity", "mount_template"),  # which opens that way
        ("mount_template", "landlock"),  # Landlock's plan reads the private /tmp and run layer
        ("identity", "landlock"),  # on a job: the uid first, then the workspace's rule
        ("cgroups", "rlimits"),  # which profiles go without RLIMIT_AS reads the memory cgroup
        ("rlimits", "seccomp"),  # seccomp refuses to raise them
        ("forking", "capabilities"),  # leaving idle priority needs CAP_SYS_NICE
    ]
    for first, then in before:
        assert order.index(first) < order.index(then), (first, then)
    assert order[-1] == "seccomp"


def test_without_the_mount_template_the_layers_that_need_it_go_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A template that cannot be made takes back the PID namespace (the two are set up
    together) and the session uid whose way to the interpreter it was to open: each reported
    off with the template's reason, nothing left half on."""
    from a2e_engine.sandbox import _identity as identity
    from a2e_engine.sandbox import _mount_template as mount_template
    from a2e_engine.sandbox import _namespaces as namespaces
    from a2e_engine.sandbox._identity import Crossing
    from a2e_engine.sandbox._preparation import Preparation
    from a2e_engine.sandbox._settings import ZygoteSettings

    closed: list[bool] = []

    class Namespaces:
        def close(self) -> None:
            closed.append(True)

    def refuse(*_: object) -> int:
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(mount_template, "create_mount_template", refuse)
    prep = Preparation(ZygoteSettings())
    prep.pidns = Namespaces()  # type: ignore[assignment]
    prep.change_identity = True
    prep.identity_ways = (Crossing("/root", ("venv",)),)
    prep.need_mounts = [namespaces.LAYER, identity.LAYER]
    mount_template.LAYER.prepare(prep)
    why = "the workers' mount namespace could not be prepared: Operation not permitted"
    for name in ("pid_namespace", "identity", "private_proc", "private_tmp", "writable_root"):
        assert prep.layers[name] == {**prep.layers[name], "active": False, "reason": why}, name
    assert prep.mounts is None and prep.pidns is None and closed == [True]
    assert not prep.change_identity and prep.identity_ways == ()


def test_a_worker_refused_by_one_layer_gives_back_what_the_others_gave_it(
    tmp_path: Path,
) -> None:
    """The zygote's half of a worker's life goes through the layers (``contain.spawning``,
    ``reaped``): a slot taken from one controller's group is not lost when another's cannot
    be had, and the refusal says which."""
    from a2e_engine.sandbox import _cgroups as cgroups
    from a2e_engine.sandbox import _contain as contain
    from a2e_engine.sandbox._cgroups import SlotGroups
    from a2e_engine.sandbox._preparation import Preparation, Worker
    from a2e_engine.sandbox._settings import ZygoteSettings

    (tmp_path / "pids").mkdir()
    prep = Preparation(ZygoteSettings())
    pids = SlotGroups(str(tmp_path / "pids"), {"pids.max": "7"}, None)
    prep.cgroups = {
        "pids": pids,
        "memory": SlotGroups(str(tmp_path / "gone"), {}, "memory.oom_control"),
    }
    worker = Worker(profile="process", keep_fds=(), parent_pid=os.getpid())
    with pytest.raises(
        OSError, match=r"^\[Errno 2\] cgroup: a memory slot: No such file"
    ) as refused:
        contain.spawning(prep, worker, ())
    assert refused.value.filename == str(tmp_path / "gone" / "slot1")
    assert worker.slots == {} and not worker.oom
    again = Worker(profile="process", keep_fds=(), parent_pid=os.getpid())
    del prep.cgroups["memory"]
    contain.spawning(prep, again, ())
    assert again.slots["pids"].path == str(tmp_path / "pids" / "slot1")  # the one given back
    assert (tmp_path / "pids" / "slot1" / "pids.max").read_text() == "7"
    # The cgroup layer's own step: the subreaper's would kill this test's children.
    cgroups.LAYER.reaped(prep, again, ())
    assert again.slots == {} and not again.oom


def test_a_layer_whose_before_fork_ran_is_undone_whatever_another_undo_does() -> None:
    """A zygote left in a worker's PID namespace could fork no more: each ``after_fork``
    runs for each ``before_fork`` that ran, though another raises, and a child forked
    meanwhile is killed."""
    from a2e_engine.sandbox import _contain as contain
    from a2e_engine.sandbox._preparation import Layer, Preparation
    from a2e_engine.sandbox._settings import ZygoteSettings

    said: list[str] = []

    class Careful(Layer):
        def before_fork(self, prep: Preparation) -> None:
            said.append("into its namespace")

        def after_fork(self, prep: Preparation) -> None:
            said.append("back")

    class Failing(Layer):
        def before_fork(self, prep: Preparation) -> None:
            said.append("at idle")

        def after_fork(self, prep: Preparation) -> None:
            raise PermissionError("no CAP_SYS_NICE any more")

    class Refusing(Layer):
        def before_fork(self, prep: Preparation) -> None:
            raise OSError(1, "refused")

    prep = Preparation(ZygoteSettings())
    forked: list[int] = []

    def fork_sleeper() -> int:
        pid = os.fork()
        if pid == 0:
            os.execv("/bin/sleep", ["sleep", "60"])
        forked.append(pid)
        return pid

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(contain, "_FORKING", (Careful(), Failing()))
        with pytest.raises(PermissionError):
            contain.fork(prep, fork_sleeper)
        assert said == ["into its namespace", "at idle", "back"]
        with pytest.raises(ChildProcessError):
            os.waitpid(forked[0], os.WNOHANG)  # killed and reaped
        said.clear()
        patch.setattr(contain, "_FORKING", (Careful(), Refusing(), Failing()))
        with pytest.raises(OSError, match="refused"):
            contain.fork(prep, fork_sleeper)
        assert said == ["into its namespace", "back"] and len(forked) == 1
