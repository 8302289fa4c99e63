"""The producer client's own CPU per pipelined record, without servers or sockets.

``python -m tests.bench.client_cpu [--pairs N] [TREE ...]``: for this tree (and each other checkout named, e.g.
a ``git worktree`` of another commit; no ``.venv`` needed there), in alternation, a ``Producer`` sends 5 x 30 000
records of 100 B into a 3-bucket table of the in-memory fake cluster (``tests/unit/client/fake_cluster.py``, the
client unit tests' transport) and the best round's process CPU time per record is printed; ``N`` passes over
the trees (default 3), then each tree's median and minimum over them. Each tree runs in a process of its
own with ``PYTHONPATH`` set to it. Not a `make bench` module: it compares client code, and the
servers' side of the same workload is ``tests.bench.latency_ab``.

``python -m tests.bench.client_cpu --instructions [TREE ...]``: the same workload's instructions per record,
counted by valgrind (``cachegrind``, no cache simulation) in two runs of 10 000 and 40 000 sends after a
warm-up, the difference divided by 30 000 (start-up and import cancel out); ``PYTHONHASHSEED=0``. The count
repeats to within a few instructions run to run and does not move with the machine's load, so it shows
differences of 0.1 % that the CPU time (±10 % on the shared machine) cannot; it does not see cache misses.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fluss_py.client import Producer

ROUNDS = 5
RECORDS = 30_000
COUNTS = (10_000, 40_000)


async def _producer_on_fake_cluster(body: Callable[[Producer], Awaitable[Any]]) -> Any:
    from fluss_py.client import Producer
    from fluss_py.client.options import ProducerOptions
    from tests.unit.client.fake_cluster import FakeCluster

    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=3)
    async with Producer(cluster.servers[0], ProducerOptions(linger=0.0), transport=cluster) as producer:
        await producer.send_and_wait("t", b"warm-up")
        return await body(producer)


async def _sends(producer: Producer, n: int) -> None:
    value = b"x" * 100
    for _ in range(n):
        await producer.send("t", value)
    await producer.flush()


async def _measure() -> float:
    async def body(producer: Producer) -> float:
        best = float("inf")
        for _ in range(ROUNDS):
            t0 = time.process_time()
            await _sends(producer, RECORDS)
            best = min(best, time.process_time() - t0)
        return best

    return await _producer_on_fake_cluster(body) / RECORDS * 1e6


async def _count(n: int) -> None:
    async def body(producer: Producer) -> None:
        await _sends(producer, 2000)  # warm-up: the batches' and the loop's first allocations
        await _sends(producer, n)

    await _producer_on_fake_cluster(body)


def _child(tree: Path, *args: str, valgrind: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    tool = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"] if valgrind else []
    return subprocess.run(
        [*tool, sys.executable, __file__, *args],  # this script, the tree's code (PYTHONPATH)
        cwd=tree, env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip


def _instructions(tree: Path) -> int:
    counts = []
    for n in COUNTS:
        out = _child(tree, "--count", str(n), valgrind=True).stderr
        found = re.search(r"I\s+refs:\s+([\d,]+)", out)
        assert found is not None, out
        counts.append(int(found.group(1).replace(",", "")))
    return round((counts[1] - counts[0]) / (COUNTS[1] - COUNTS[0]))


def main(argv: list[str]) -> None:
    import uvloop

    if argv[:1] == ["--child"]:
        print(f"{uvloop.run(_measure()):.2f}")
        return
    if argv[:1] == ["--count"]:
        uvloop.run(_count(int(argv[1])))
        return
    here = Path(__file__).resolve().parents[2]
    if argv[:1] == ["--instructions"]:
        for tree in [here, *(Path(t).resolve() for t in argv[1:])]:
            print(f"{tree}: {_instructions(tree)} instructions per 100 B record")
        return
    pairs = 3
    if argv[:1] == ["--pairs"]:
        pairs, argv = int(argv[1]), argv[2:]
    trees = [here, *(Path(t).resolve() for t in argv)]
    figures: dict[Path, list[float]] = {tree: [] for tree in trees}
    for pair in range(pairs):
        for tree in trees:
            out = _child(tree, "--child").stdout
            figures[tree].append(float(out))
            print(f"run {pair + 1}  {tree}: {out.strip()} us CPU per 100 B record (best of {ROUNDS})")
    for tree, values in figures.items():
        print(f"{tree}: median {statistics.median(values):.2f}  min {min(values):.2f} us ({len(values)} runs)")


if __name__ == "__main__":
    main(sys.argv[1:])
