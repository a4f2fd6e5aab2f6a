"""The cap every tool's output goes through: head and tail kept, the whole saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from a2e_engine.tools.output import CappedText

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
