"""``sandbox._probe.in_child``: a probe runs in a throw-away child, whatever it does to itself
stays there, and its answer, its descriptors or how it failed come back."""

from __future__ import annotations

import os

import pytest

from a2e_engine.sandbox._probe import Answer, ProbeFailed, in_child


def test_the_answer_and_the_descriptors_come_back_and_the_caller_is_unchanged() -> None:
    here = os.getcwd()

    def probe() -> Answer:
        os.chdir("/")
        os.environ["A2E_PROBE"] = "changed"
        read, write = os.pipe()
        os.write(write, b"through the fd")
        return Answer(f"pid {os.getpid()}", (read,))

    answer = in_child(probe)
    assert answer.text.startswith("pid ") and answer.text != f"pid {os.getpid()}"
    (fd,) = answer.fds
    try:
        assert os.read(fd, 100) == b"through the fd"
    finally:
        os.close(fd)
    assert os.getcwd() == here and "A2E_PROBE" not in os.environ


def test_a_probe_that_raises_or_dies_is_a_failure_saying_how() -> None:
    def raises() -> None:
        raise PermissionError("not allowed here")

    with pytest.raises(ProbeFailed, match="PermissionError: not allowed here"):
        in_child(raises)

    def dies() -> None:
        os._exit(3)

    with pytest.raises(ProbeFailed, match="died without answering"):
        in_child(dies)
    assert in_child(lambda: None) == Answer()
