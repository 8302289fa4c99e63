"""The producer client's own CPU per pipelined record, without servers or sockets.

``python -m tests.bench.client_cpu [--pairs N] [TREE ...]``: for this tree (and each other checkout named, e.g.
a ``git worktree`` of another commit; no ``.venv`` needed there), in alternation, a ``Producer`` sends 5 x 30 000
records of 100 B into a 3-bucket table of the in-memory fake cluster (``tests/unit/client/fake_cluster.py``, the
client unit tests' transport) and the best round's process CPU time per record is printed; ``N`` passes over
the trees (default 3), then each tree's median and minimum over them. Each tree runs in a process of its
own with ``PYTHONPATH`` set to it. Not a `make bench` module: it compares client code, and the
servers' side of the same workload is ``tests.bench.latency_ab``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROUNDS = 5
RECORDS = 30_000


async def _measure() -> float:
    from fluss_py.client import Producer
    from fluss_py.client.options import ProducerOptions
    from tests.unit.client.fake_cluster import FakeCluster

    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=3)
    value = b"x" * 100
    async with Producer(cluster.servers[0], ProducerOptions(linger=0.0), transport=cluster) as producer:
        await producer.send_and_wait("t", value)
        best = float("inf")
        for _ in range(ROUNDS):
            t0 = time.process_time()
            for _ in range(RECORDS):
                await producer.send("t", value)
            await producer.flush()
            best = min(best, time.process_time() - t0)
    return best / RECORDS * 1e6


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        import uvloop

        print(f"{uvloop.run(_measure()):.2f}")
        return
    pairs = 3
    if argv[:1] == ["--pairs"]:
        pairs, argv = int(argv[1]), argv[2:]
    trees = [Path(__file__).resolve().parents[2], *(Path(t).resolve() for t in argv)]
    figures: dict[Path, list[float]] = {tree: [] for tree in trees}
    for pair in range(pairs):
        for tree in trees:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            out = subprocess.run(
                [sys.executable, __file__, "--child"],  # this script, the tree's code (PYTHONPATH)
                cwd=tree, env=env, capture_output=True, text=True, check=True,
            )  # fmt: skip
            figures[tree].append(float(out.stdout))
            print(f"run {pair + 1}  {tree}: {out.stdout.strip()} us CPU per 100 B record (best of {ROUNDS})")
    for tree, values in figures.items():
        print(f"{tree}: median {statistics.median(values):.2f}  min {min(values):.2f} us ({len(values)} runs)")


if __name__ == "__main__":
    main(sys.argv[1:])
