"""The cap every tool's output goes through: head and tail kept, the whole saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2e_engine.tools._output import MARKER, CappedText, marker, saved_in

CASES = {
    "one big piece": ["a" * 50],
    "small then big": ["b" * 5, "c" * 50],
    "many small": ["x" * 3] * 20,
    "just over": ["0123456789"] * 3,
    "unicode": ["é" * 7, "ü" * 40],
}


@pytest.mark.parametrize("pieces", CASES.values(), ids=CASES.keys())
def test_head_and_tail_are_kept_and_the_whole_is_saved(tmp_path: Path, pieces: list[str]) -> None:
    kept = CappedText("out", cap=20, spool_dir=str(tmp_path / "spool"), prefix="call")
    for piece in pieces:
        kept.add(piece)
    whole = "".join(pieces)
    value, facts = kept.value(), kept.report()
    assert kept.truncated
    head, _, rest = value.partition("\n[... ")
    tail = rest.partition(" ...]\n")[2]
    assert (head, tail) == (whole[:10], whole[-10:])
    assert f"{len(whole) - 20} characters of out omitted" in value
    assert Path(facts["out_path"]).read_text() == whole


def test_small_output_is_untouched_and_not_saved(tmp_path: Path) -> None:
    kept = CappedText("out", cap=20, spool_dir=str(tmp_path / "spool"))
    kept.add("hello ")
    kept.add("world")
    assert (kept.value(), kept.truncated, kept.report()) == ("hello world", False, {})
    assert not (tmp_path / "spool").exists()


def test_a_full_disk_is_said_not_hidden(tmp_path: Path) -> None:
    blocker = tmp_path / "spool"
    blocker.write_text("a file where the directory should be")
    kept = CappedText("out", cap=4, spool_dir=str(blocker))
    kept.add("0123456789")
    assert "could not be saved" in kept.report()["out_note"]
    assert kept.value().startswith("01") and kept.value().endswith("89")


def test_the_saved_file_is_whole_as_soon_as_the_marker_names_it(tmp_path: Path) -> None:
    """A result in SandboxFusion's shape (run_code) carries the marker and never the report:
    the file it names is read, and copied (a2e call --keep-output), while the worker may still
    hold it open."""
    kept = CappedText("stdout", cap=20, spool_dir=str(tmp_path), prefix="call")
    lines = [f"line {number}\n" for number in range(5000)]
    for line in lines:  # small writes: the last of them wait in the file's buffer
        kept.add(line)
    whole = "".join(lines)
    match = MARKER.search(kept.value())
    assert match is not None and match["name"] == "stdout"
    assert Path(saved_in(match["where"])).read_text() == whole
    assert match[0] == marker(len(whole) - 20, "stdout", path=str(tmp_path / "call-stdout.txt"))
