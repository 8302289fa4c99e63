"""Where the acks=all and produce->consume latency goes, leg by leg (docs/performance.md "Where the latency
goes"). ``python -m tests.bench.latency_probe [N]``.

Starts a LocalCluster (1 coordinator, 3 tablet servers) with ``FLUSS_LATENCY_TRACE`` set, so every server
marks its events (fluss_py/common/latency_trace.py) in a file per process; sends N 100 B records one at a time
with acks=all into a 1-bucket RF 3 table, then produces at 200 records/s to a consumer for 3 s; reads the
marks back and prints the median (and p90) of each leg over the records. Marks carry ``time.monotonic_ns``,
one clock for every process, so a leg may cross processes. Not part of ``make bench`` (the marks add a
write per event: the totals here run a little above the untraced bench rows).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import uvloop

from fluss_py.client import Admin, Consumer, Producer, ProducerOptions
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from tests.bench.bench_cluster import SETTINGS, _ready
from tests.bench.common import paced

TABLE, E2E_TABLE = "fluss.probe_latency", "fluss.probe_e2e"
Marks = dict[str, dict[int, int]]  # event -> offset -> t_ns (the first mark of that event for that offset)


async def _one_at_a_time(bootstrap: str, n: int) -> dict[int, tuple[int, int]]:
    out: dict[int, tuple[int, int]] = {}
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer:
        await producer.send_and_wait(TABLE, b"warm-up")
        for i in range(n):
            t = time.monotonic_ns()
            md = await producer.send_and_wait(TABLE, b"%0100d" % i)
            out[md.offset] = (t, time.monotonic_ns())
    return out


async def _e2e(bootstrap: str, rate: float, seconds: float) -> dict[int, tuple[int, int]]:
    sent: dict[int, int] = {}
    got: dict[int, tuple[int, int]] = {}
    n = int(rate * seconds)
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer, Consumer(bootstrap) as consumer:
        await producer.send_and_wait(E2E_TABLE, b"%010d" % -1)
        await consumer.assign(E2E_TABLE)
        consumer.seek_to_beginning()

        async def consume() -> None:
            while len(got) < n:
                for r in await consumer.poll(timeout=0.5):
                    i = int(r.value[:10]) if r.value else -1
                    if i in sent:
                        got[r.offset] = (sent[i], time.monotonic_ns())

        reader = asyncio.create_task(consume())
        async for i in paced(rate, n):
            sent[i] = time.monotonic_ns()
            await producer.send(E2E_TABLE, b"%010d" % i + b"x" * 90)
        await producer.flush()
        await asyncio.wait_for(reader, 10)
    return got


def _read_marks(trace_dir: Path) -> dict[int, dict[str, Marks]]:
    """pid -> bucket -> event -> offset -> t_ns."""
    out: dict[int, dict[str, Marks]] = {}
    for f in trace_dir.glob("*.trace"):
        per: dict[str, Marks] = defaultdict(lambda: defaultdict(dict))
        pending_req: dict[str, list[int]] = defaultdict(list)
        for line in f.read_text().splitlines():
            event, bucket, offset_s, t_s = line.split()
            offset, t = int(offset_s), int(t_s)
            if event == "L_req":  # offset unknown before the append: the next L_append of the bucket names it
                pending_req[bucket].append(t)
                continue
            if event == "L_append" and pending_req[bucket]:
                per[bucket]["L_req"][offset] = pending_req[bucket].pop(0)
            per[bucket][event].setdefault(offset, t)
        out[int(f.stem)] = per
    return out


def _legs(marks: dict[int, dict[str, Marks]], bucket: str, client: dict[int, tuple[int, int]], consume: bool):
    leader = next(pid for pid, per in marks.items() if per.get(bucket, {}).get("L_append"))
    followers = [pid for pid, per in marks.items() if per.get(bucket, {}).get("F_recv") and pid != leader]
    lm = marks[leader][bucket]
    fids = sorted({e[len("L_fetch_out") :] for e in lm if e.startswith("L_fetch_out") and e != "L_fetch_outC"})
    hw_marks = sorted(lm["L_hw"].items())
    legs: dict[str, list[float]] = defaultdict(list)
    for offset, (t_send, t_done) in sorted(client.items()):
        try:
            t_req, t_app, t_appd = lm["L_req"][offset], lm["L_append"][offset], lm["L_appended"][offset]
            t_hw = next(t for hw, t in hw_marks if hw > offset and t >= t_appd)
        except (KeyError, StopIteration):
            continue
        leg = {"client send -> leader request decoded": t_req - t_send, "leader decode -> append start": t_app - t_req}
        leg["leader append (validate + write)"] = t_appd - t_app
        per_f = []
        for fid, pid in zip(fids, followers, strict=False):
            fm = marks[pid][bucket]
            try:
                t_out, t_in = lm[f"L_fetch_out{fid}"][offset], lm[f"L_fetch_in{fid}"][offset + 1]
                f_recv, f_app, f_req = fm["F_recv"][offset], fm["F_appended"][offset], fm["F_req"][offset + 1]
            except KeyError:
                continue
            per_f.append((t_in, t_out, f_recv, f_app, f_req))
        if not per_f:
            continue
        last = max(per_f)  # the follower whose fetch moved the HW
        t_in, t_out, f_recv, f_app, f_req = last
        leg["leader appended -> follower fetch read (wake-up)"] = t_out - t_appd
        leg["fetch response: leader -> follower decoded"] = f_recv - t_out
        leg["follower append"] = f_app - f_recv
        leg["follower appended -> next fetch sent"] = f_req - f_app
        leg["next fetch: follower -> leader read"] = t_in - f_req
        leg["leader fetch read -> HW moved"] = t_hw - t_in
        if consume:
            t_c = lm.get("L_fetch_outC", {}).get(offset)
            if t_c is None:
                continue
            leg["HW moved -> consumer fetch read"] = t_c - t_hw
            leg["consumer fetch read -> record in poll()"] = t_done - t_c
        else:
            t_ans, t_resp = lm["L_answer"][offset], lm["L_resp"][offset]
            leg["HW moved -> delayed produce answered"] = t_ans - t_hw
            leg["answer -> response built"] = t_resp - t_ans
            leg["response -> client has ack"] = t_done - t_resp
        leg["TOTAL"] = t_done - t_send
        for k, v in leg.items():
            legs[k].append(v / 1e6)
    return legs


def _print(title: str, legs: dict[str, list[float]]) -> None:
    n = len(legs.get("TOTAL", ()))
    print(f"\n{title} ({n} records; median / p90 ms)")
    for k, v in legs.items():
        v = sorted(v)
        print(f"  {k:<48} {statistics.median(v):7.3f} {v[int(len(v) * 0.9)]:7.3f}")


async def _main(bootstrap: str, n: int) -> tuple[dict, dict]:
    async with Admin(bootstrap) as admin:
        for t in (TABLE, E2E_TABLE):
            await admin.create_table(t, num_buckets=1, replication_factor=3)
            await _ready(admin, t)
    one = await _one_at_a_time(bootstrap, n)
    e2e = await _e2e(bootstrap, 200.0, 3.0)
    return one, e2e


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    print("load average", os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="latency-probe-") as d:
        trace_dir = Path(d) / "trace"
        trace_dir.mkdir()
        os.environ["FLUSS_LATENCY_TRACE"] = str(trace_dir)
        cluster = LocalCluster(
            Path(d) / "c", coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True
        )
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            bootstrap = ",".join(cluster.get(x).rpc_address for x in cluster.names(TABLET_SERVER))
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                one, e2e = runner.run(_main(bootstrap, n))
        finally:
            cluster.close()
        marks = _read_marks(trace_dir)
        buckets = sorted({b for per in marks.values() for b in per if per[b].get("L_append")})
        # the two probe tables are the last two created: the latency table first
        b_one, b_e2e = sorted(buckets, key=lambda b: int(b.split("-")[0]))[-2:]
        _print("one-at-a-time acks=all", _legs(marks, b_one, one, consume=False))
        _print("produce -> consume at 200/s", _legs(marks, b_e2e, e2e, consume=True))
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
