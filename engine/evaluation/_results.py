"""The results file: one JSON line per graded sample, appended as each finishes, so that a run
that is killed loses only the samples in flight, and a new run with the same ``--out`` picks up
where it stopped.

A line is the sample as it was read, plus ``sample_index`` (its line among the samples, from 0),
``completion_id``, ``passed`` and ``result`` (``passed``, ``failed: <why>``, ``timed out``, a
judge's verdict such as ``WA: case 3: ...``; ``error: <why>`` when the call itself failed).
Resuming keeps the lines that match the samples (same index, same task) and drops a last line
cut off mid-write; a line about a sample the file of samples does not have at that index means
the results came from other samples, and is refused.
"""

from __future__ import annotations

import json
import threading
from typing import IO, Any

from a2e_engine.engine.evaluation._datasets import Sample

__all__ = ["ResultsFile"]


class ResultsFile:
    def __init__(self, path: str, samples: list[Sample]) -> None:
        self.path = path
        self.done: dict[int, bool] = {}  # sample index -> passed
        self._lock = threading.Lock()
        keep = self._resume(samples)
        self._fh: IO[str] = open(path, "a+", encoding="utf-8")  # noqa: SIM115
        self._fh.truncate(keep)

    def _resume(self, samples: list[Sample]) -> int:
        """Read what an earlier run wrote; the byte offset up to which it is whole."""
        try:
            with open(self.path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return 0
        except OSError as exc:
            raise ValueError(f"{self.path}: cannot be read: {exc.strerror}") from None
        offset = 0
        for number, line in enumerate(data.splitlines(keepends=True), 1):
            if not line.endswith(b"\n"):
                break  # cut off while it was written: that sample runs again
            try:
                record = json.loads(line)
                index, task_id = int(record["sample_index"]), str(record["task_id"])
                passed = bool(record["passed"])
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{self.path}:{number}: not a result line") from None
            if not 0 <= index < len(samples) or samples[index].task_id != task_id:
                raise ValueError(
                    f"{self.path}:{number}: sample {index} of task {task_id!r} is not in the "
                    "samples given: these results came from other samples"
                )
            self.done[index] = passed
            offset += len(line)
        return offset

    def write(self, sample: Sample, passed: bool, result: str, extra: dict[str, Any]) -> None:
        record = {
            **sample.record,
            "sample_index": sample.index,
            "completion_id": sample.completion_id,
            "passed": passed,
            "result": result,
            **extra,
        }
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self._fh.write(line)
            self._fh.flush()  # in the kernel's hands: a kill of this process loses none of it
            self.done[sample.index] = passed

    def close(self) -> None:
        with self._lock:
            self._fh.close()
