"""A stage's last line gives its own work, paperdag's time around it, and its process's whole life: what
benchmarks/bench_engine_share.py adds up into the engine's share of a build."""

from __future__ import annotations

import re
import time
from pathlib import Path

from support import cli

DONE = re.compile(r"toy:make: done: stage ([0-9.]+) s, ([0-9.]+) s in all, ([0-9.]+) s since the process started")


def test_a_stage_reports_its_work_its_time_in_all_and_its_process_age(toy: Path) -> None:
    t = time.perf_counter()
    r = cli(toy, "stage", "toy:make", env={"PAPERDAG_WARM": "off"})
    wall = time.perf_counter() - t
    m = DONE.search(r.stderr)
    assert m, r.stderr
    stage, in_all, age = map(float, m.groups())
    # figures printed to 0.1 s; the process age counts from its first start (before the numerics' re-execution)
    assert stage <= in_all + 0.05 and in_all <= age + 0.05 and age <= wall + 0.05, (stage, in_all, age, wall)
    assert age - in_all > 0.05, "the interpreter's start and paperdag's imports come before paperdag's own clock"
