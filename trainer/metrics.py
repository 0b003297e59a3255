"""Metrics of a run: one JSON object per line, appended and flushed every step.

On resume, lines written after the checkpoint (by the run that was killed) are dropped, so
the file then reads exactly as if the run had never stopped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

# Clock readings in a step's record, not results: two runs of one seed agree on everything else.
TIMING = frozenset({"step_s", "gen_s", "tokens_per_s", "env_s", "env_share"})


class JsonlLog:
    def __init__(self, path: str | Path):
        self.path = Path(path)

    def append(self, record: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def read(self) -> list[dict]:
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut short by a kill
                break
        return rows

    def truncate_after(self, step: int) -> None:
        """Keep only the records of steps <= `step`."""
        kept = [r for r in self.read() if r.get("step", 0) <= step]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept), encoding="utf-8")
        os.replace(tmp, self.path)


def read_jsonl(path: str | Path) -> list[dict]:
    return JsonlLog(path).read()
