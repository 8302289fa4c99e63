"""(e) The 2000-bucket scenario (issue 7 item 4) as figures: creation, idle CPU and RSS of every process,
controlled shutdown (SIGTERM) of a server leading ~667 buckets, kill -9 of a server until every bucket has a
live leader. The steps and how each is measured: tests/bench/scale.py. The behaviour (every bucket led, no
acknowledged record lost) is asserted by tests/fault/test_scale.py (--run-slow).

``FLUSS_BENCH_SCALE_BUCKETS`` overrides the bucket count (default 2000).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tests.bench.scale import run_scenario

BUCKETS = int(os.environ.get("FLUSS_BENCH_SCALE_BUCKETS", "2000"))


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as d:
        return run_scenario(Path(d), BUCKETS, idle_seconds=10.0).rows()


if __name__ == "__main__":
    for r in run():
        print(r)
