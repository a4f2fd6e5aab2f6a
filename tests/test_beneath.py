"""Files opened beneath a directory without following a link (``sandbox._beneath``), with
``openat2`` and with the component walk used where the kernel has none: a link on the way or
at the end, a way out with ``..`` or an absolute path, are refused and nothing is written or
read through them; plain paths work, directories made on the way."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from a2e_engine.sandbox import _beneath as beneath
from a2e_engine.sandbox._beneath import LinkRefused


@pytest.fixture(params=["openat2", "walk"])
def root(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[int]:
    if request.param == "openat2":
        if not beneath.has_openat2():
            pytest.skip("this kernel has no openat2")
    else:
        monkeypatch.setattr(beneath, "_kernel_has_openat2", False)
    (tmp_path / "inside").mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("secret")
    (tmp_path / "inside" / "out").symlink_to(tmp_path / "outside")
    (tmp_path / "inside" / "file_link").symlink_to(tmp_path / "outside" / "secret")
    fd = beneath.open_dir(str(tmp_path / "inside"))
    yield fd
    os.close(fd)


def test_plain_paths_are_written_and_read_with_their_directories(root: int, tmp_path: Path) -> None:
    beneath.write_beneath(root, "a/b/c.txt", b"data", 0o640)
    assert (tmp_path / "inside" / "a" / "b" / "c.txt").read_bytes() == b"data"
    assert beneath.read_beneath(root, "a/b/c.txt", 100) == b"data"
    assert beneath.read_beneath(root, "a/./b/../b/c.txt", 2) == b"da"
    target = beneath.open_dir(str(tmp_path))
    try:
        beneath.copy_beneath(root, target, "a/b/c.txt")
    finally:
        os.close(target)
    copied = tmp_path / "a" / "b" / "c.txt"
    assert copied.read_bytes() == b"data" and copied.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize(
    "path", ["out/secret", "out/new", "file_link", "../outside/secret", "/etc/passwd", "a/../../x"]
)
def test_links_and_ways_out_are_refused(root: int, tmp_path: Path, path: str) -> None:
    with pytest.raises(LinkRefused):
        beneath.read_beneath(root, path, 100)
    with pytest.raises(LinkRefused):
        beneath.write_beneath(root, path, b"planted")
    assert (tmp_path / "outside" / "secret").read_text() == "secret"
    assert sorted(os.listdir(tmp_path / "outside")) == ["secret"]


def test_a_path_with_a_link_anywhere_is_refused_from_the_root() -> None:
    with pytest.raises(LinkRefused):
        beneath.open_unlinked("/proc/self/root/etc")
    os.close(beneath.open_unlinked("/proc"))
