"""The CPU each process spends on one one-at-a-time acks=all send: ``python -m tests.bench.send_cpu [N]``.

Starts a LocalCluster (1 coordinator, 3 tablet servers), creates a 1-bucket RF 3 table, warms up with 200
sends, then sends N (default 3000) 100 B records one at a time with acks=all. Prints the sends' p50 / p99
and wall time per send, the client's CPU per send (``getrusage`` of this process) and each tablet server's
(``/proc/<pid>/stat``, read before and after). The sends are sequential, so nearly all of this CPU lies on
the critical path of one send: the sum against the wall time per send is how much of the latency is work
rather than waiting (docs/performance.md "Targets: what remains"). Not a ``make bench`` module.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

import uvloop

from fluss_py.client import Admin, Producer, ProducerOptions
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from tests.bench.bench_cluster import SETTINGS, _ready
from tests.bench.scale import cpu_seconds

TABLE = "fluss.send_cpu"
WARM_UP = 200


def _own_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _measure(bootstrap: str, servers: dict[str, int], n: int) -> None:
    async with Admin(bootstrap) as admin:
        await admin.create_table(TABLE, num_buckets=1, replication_factor=3)
        await _ready(admin, TABLE)
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer:
        for _ in range(WARM_UP):
            await producer.send_and_wait(TABLE, b"x" * 100)
        before = {name: cpu_seconds(pid) for name, pid in servers.items()}
        own, start = _own_cpu(), time.perf_counter()
        latencies = []
        for _ in range(n):
            t = time.perf_counter()
            await producer.send_and_wait(TABLE, b"x" * 100)
            latencies.append(time.perf_counter() - t)
        wall, own = time.perf_counter() - start, _own_cpu() - own
        spent = {name: cpu_seconds(pid) - before[name] for name, pid in servers.items()}
    latencies.sort()
    print(f"{n} sends: p50 {latencies[n // 2] * 1e3:.3f} ms, p99 {latencies[int(n * 0.99)] * 1e3:.3f} ms, ", end="")
    print(f"wall {wall / n * 1e6:.0f} us per send")
    print(f"  client           {own / n * 1e6:6.0f} us CPU per send")
    for name, cpu in spent.items():
        print(f"  {name:<16} {cpu / n * 1e6:6.0f} us CPU per send")
    print(f"  all              {(own + sum(spent.values())) / n * 1e6:6.0f} us CPU per send")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    with tempfile.TemporaryDirectory(prefix="send-cpu-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            names = cluster.names(TABLET_SERVER)
            bootstrap = ",".join(cluster.get(name).rpc_address for name in names)
            servers = {name: cluster.get(name).pid for name in names}
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(_measure(bootstrap, servers, n))
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
