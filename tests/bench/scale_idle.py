"""Idle CPU of the scale scenario's cluster alone (``tests/bench/scale.py`` step 2, without the failovers):
for each bucket count, a fresh cluster (3 tablet servers, RF 3, tables of at most 4000 buckets), the
tables created, 2 s to settle, then the CPU of every process over a window long enough to hold the
periodic passes (the ISR shrink scan every 15 s, retention every 60 s, size reports every 2 s).

    .venv/bin/python -m tests.bench.scale_idle 2000 5000 20000     # FLUSS_BENCH_IDLE_S=60 by default

Prints one line per bucket count: idle CPU (% of a core) and RSS per process. A figure, not a test.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER, ZOOKEEPER
from tests.bench.scale import create, idle_cpu, rss_mb, start_cluster


def measure(buckets: int, seconds: float) -> str:
    with tempfile.TemporaryDirectory(prefix=f"scale-idle-{buckets}-") as d:
        cluster: LocalCluster = start_cluster(Path(d))
        try:
            create_s = create(cluster, buckets)
            time.sleep(2.0)  # start-up work (first fetches, checkpoints) settles; not a synchronisation
            names = [ZOOKEEPER, *cluster.names(COORDINATOR), *cluster.names(TABLET_SERVER)]
            pids = {n: p for n in names if (p := cluster.pid(n)) is not None}
            load = Path("/proc/loadavg").read_text().split()[0]
            cpu = idle_cpu(pids, seconds)
            rss = {n: rss_mb(p) for n, p in pids.items()}
            load += "-" + Path("/proc/loadavg").read_text().split()[0]
        finally:
            cluster.close()
    cells = " ".join(f"{n}={cpu[n]:.2f}%/{rss[n]:.0f}MB" for n in pids)
    return f"{buckets} buckets: create {create_s:.1f} s, idle {seconds:.0f} s (load {load}): {cells}"


def main() -> None:
    seconds = float(os.environ.get("FLUSS_BENCH_IDLE_S", "60"))
    for arg in sys.argv[1:] or ["2000", "5000", "20000"]:
        print(measure(int(arg), seconds), flush=True)


if __name__ == "__main__":
    main()
