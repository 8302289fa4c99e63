"""One ``fluss-py verify`` run: cluster, workload, fault schedule, healing, final read, verdict, files.

    report = Verify(VerifyOptions(time=120, seed=7), Path("verify-out")).run()   # report.ok

Steps (``workload="kv"``: a primary-key table, kv_workload.py, judged by kv_checker.py against every replica's
KV and its log's replay): start a cluster on test hosts (or attach to one: ``cluster_dir``); create the table; start the
workload process on the client host; inject the scheduled faults one after another, each undone at its end
(restart, SIGCONT, heal); then heal everything, restart what is down, wait until the cluster is ready and
every bucket's ISR is full again; stop the workload (its producers flush: every send is answered); read
the final log below the high watermark and every replica's files; check (checker.py).

Files in ``out``: ``history.jsonl`` (the workload's events), ``faults.json`` (what was injected, when),
``final.json``, ``report.json`` (verdict, counts, stalls by kind), ``timeline.svg``; the cluster's own
directory (logs of every process) is ``out/cluster`` when verify started it.

Who calls: ``fluss-py verify`` (cli/verify.py) and the verify tests, from one thread.
"""

from __future__ import annotations

import bisect
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fluss_py.log.manager import bucket_dir_name
from fluss_py.record.batch import iter_batches
from fluss_py.testing import nemesis
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER, ZOOKEEPER
from fluss_py.testing.procs import WaitTimeout
from fluss_py.types import TableBucket
from fluss_py.verify.checker import Report, check
from fluss_py.verify.client import WorkloadClient
from fluss_py.verify.history import FAULT, Fault
from fluss_py.verify.kv_checker import as_send_events, check_kv
from fluss_py.verify.kv_replicas import replica_kvs
from fluss_py.verify.plot import timeline_svg
from fluss_py.verify.schedule import KINDS, Planned, make_schedule
from fluss_py.zk.paths import LeaderIsrZNode, TableAssignmentZNode

NETWORK_KINDS = ("partition", "netem")
VERIFY_OVERRIDES = {
    "zookeeper.session-timeout": "4s",
    "zookeeper.connection-timeout": "30s",
    "log.level": "INFO",
}
VERIFY_TABLET_OVERRIDES = {"replica.lag.time.max.ms": "4000", "replica.fetch.wait.max.ms": "250"}


@dataclass
class VerifyOptions:
    """What to run: cluster shape, workload, schedule. ``cluster_dir``: attach instead of starting one."""

    time: float = 120.0
    seed: int = 1
    faults: tuple[str, ...] = KINDS
    zookeepers: int = 3
    coordinators: int = 3
    tablet_servers: int = 5
    producers: int = 3
    rate: float = 30.0
    buckets: int = 3
    rf: int = 3
    netns: bool = True
    cluster_dir: Path | None = None
    table: str = "fluss.verify"
    recovery_timeout: float = 180.0
    fault_s: tuple[float, float] = (2.0, 6.0)  # each fault lasts this long (min, max) ...
    gap_s: tuple[float, float] = (1.0, 3.0)  # ... then this long healed
    overrides: dict[str, str] = field(default_factory=dict)
    workload: str = "log"  # or "kv": upserts, deletes and lookups of a primary-key table (kv_workload.py)
    keys: int = 300  # keys of the kv workload


class Verify:
    """Owns one run: its cluster (unless attached), the workload process and the output directory."""

    def __init__(self, options: VerifyOptions, out: Path) -> None:
        self.o = options
        self.out = out.absolute()
        self.t0 = time.monotonic()
        self.faults: list[Fault] = []
        self.crashes: list[dict[str, Any]] = []  # processes that exited by themselves (not a fault of ours)
        self.cluster: LocalCluster | None = None
        self.client: WorkloadClient | None = None
        self.owns_cluster = options.cluster_dir is None

    # ---------------------------------------------------------------- the run
    def run(self) -> Report:
        self.out.mkdir(parents=True, exist_ok=True)
        try:
            cluster = self.cluster = self._cluster()
            if cluster.net is None and set(self.o.faults) & set(NETWORK_KINDS):
                raise ValueError(f"faults {NETWORK_KINDS} need a cluster on test hosts (--netns)")
            client = self.client = WorkloadClient(
                cluster, self.out, self.o.table, self.o.recovery_timeout, self.o.workload, self.o.keys
            )
            client.create(self.o.buckets, self.o.rf)
            self.t0 = time.monotonic()
            client.start(self.o.producers, self.o.rate, self.o.buckets, self.t0)
            self._inject(self._schedule(cluster))
            self._log("healing: every rule removed, every process running, waiting for full ISRs")
            self._recover(cluster)
            client.stop()
            return self._verdict(cluster, client.final(), client.events())
        finally:
            if self.client is not None:
                self.client.kill()
            if self.cluster is not None:
                if self.owns_cluster:
                    self.cluster.close(grace=5.0)
                else:
                    self.cluster.detach()

    def _cluster(self) -> LocalCluster:
        if self.o.cluster_dir is not None:
            return LocalCluster.open(self.o.cluster_dir)
        cluster = LocalCluster(
            self.out / "cluster",
            self.o.coordinators,
            self.o.tablet_servers,
            zookeepers=self.o.zookeepers,
            netns=self.o.netns,
            overrides={**VERIFY_OVERRIDES, **self.o.overrides},
            tablet_overrides=VERIFY_TABLET_OVERRIDES,
            die_with_parent=True,
        )
        self._log(f"starting {self.o.zookeepers} ZooKeeper, {self.o.coordinators} coordinators, "
                  f"{self.o.tablet_servers} tablet servers" + (" on test hosts" if self.o.netns else ""))  # fmt: skip
        cluster.start(timeout=120)
        cluster.wait_for_leader(60)
        return cluster

    def _schedule(self, cluster: LocalCluster) -> list[Planned]:
        return make_schedule(
            self.o.seed,
            self.o.time,
            self.o.faults,
            cluster.names(ZOOKEEPER),
            cluster.names(COORDINATOR),
            cluster.names(TABLET_SERVER),
            min_fault=self.o.fault_s[0],
            max_fault=self.o.fault_s[1],
            min_gap=self.o.gap_s[0],
            max_gap=self.o.gap_s[1],
        )

    def _inject(self, plan: list[Planned]) -> None:
        assert self.cluster is not None
        for p in plan:
            self._sleep_until(p.at)
            self._reap_crashes(self.cluster)
            start = self._now()
            self._log(f"{start:7.1f}s  {p.describe()}")
            undo = self._apply(self.cluster, p)
            self._sleep_until(p.at + p.duration)
            undo()
            self.faults.append(Fault(start, self._now(), p.kind, p.describe()))
            (self.out / "faults.json").write_text(json.dumps([f.__dict__ for f in self.faults], indent=1))
        self._sleep_until(self.o.time)

    def _apply(self, cluster: LocalCluster, p: Planned) -> Callable[[], None]:
        """Inject ``p``; return what undoes it."""
        names = list(p.targets)

        def restart() -> None:
            for n in names:
                if not cluster.alive(n):
                    cluster.start_process(n)

        if p.kind in ("kill", "zookeeper"):
            for n in names:
                cluster.kill(n)
            return restart
        if p.kind == "term":
            cluster.stop_process(names[0], timeout=15.0)
            return restart
        if p.kind == "pause":
            cluster.pause(names[0])
            return lambda: cluster.resume(names[0]) if cluster.alive(names[0]) else None
        if p.kind == "netem":
            nemesis.netem(
                cluster, names[0], p.params.get("delay_ms", 0), p.params.get("jitter_ms", 0), p.params["loss_pct"]
            )
        elif p.variant == "isolate":
            nemesis.isolate(cluster, names[0])
        elif p.variant == "cut-off":
            nemesis.cut_off(cluster, names[0])
        elif p.variant == "one-way":
            nemesis.one_way(cluster, names[0], [names[1]])
        elif p.variant == "halves":
            nemesis.split(cluster, names)
        else:
            half = len(names) // 2
            nemesis.bridge(cluster, names[:half], names[half + 1 :], middle=names[half])
        return lambda: nemesis.heal(cluster)

    def _reap_crashes(self, cluster: LocalCluster) -> None:
        """Every fault was undone: a process that is not running now exited by itself. Record it, restart it."""
        for n in cluster.names():
            if not cluster.alive(n):
                handle = cluster.handle(n)
                code = handle.returncode if handle is not None else None
                tail = cluster.log_text(n).splitlines()[-3:]
                self.crashes.append({"t": round(self._now(), 1), "process": n, "exit_code": code, "log": tail})
                self._log(f"{self._now():7.1f}s  {n} exited by itself (exit code {code}): {' | '.join(tail)[-300:]}")
                cluster.start_process(n)

    def _recover(self, cluster: LocalCluster) -> None:
        if cluster.net is not None:
            nemesis.heal(cluster)
        self._reap_crashes(cluster)
        for n in cluster.names():
            if cluster.paused(n):
                cluster.resume(n)
            elif not cluster.alive(n):
                cluster.start_process(n)
        cluster.wait_ready(timeout=self.o.recovery_timeout)
        cluster.wait_for_leader(self.o.recovery_timeout)
        with cluster.zk_view() as zk:
            table_ids = [int(t) for t in zk.children(TableAssignmentZNode.parent(cluster.zk_root))]
            for table_id in table_ids:
                data = zk.get_bytes(TableAssignmentZNode.path(cluster.zk_root, table_id))
                for b, replicas in (TableAssignmentZNode.decode(data) if data else {}).items():
                    path = LeaderIsrZNode.path(cluster.zk_root, table_id, b)

                    def full(path: str = path, want: tuple[int, ...] = replicas) -> bool:
                        raw = zk.get_bytes(path)
                        return raw is not None and sorted(LeaderIsrZNode.decode(raw).isr) == sorted(want)

                    cluster.wait_until(full, self.o.recovery_timeout, f"full ISR of {table_id}/{b}")

    # ---------------------------------------------------------------- verdict
    def _verdict(self, cluster: LocalCluster, final: dict[str, Any], events: list[dict]) -> Report:
        hw = final["hw"]
        if self.o.workload == "kv":
            replicas = replica_kvs(cluster, final["table_id"], hw, self.o.keys)
            report = check_kv(events, final["final"], final["committed"], replicas)
            events = as_send_events(events)  # the writes' latencies, for the stalls and the timeline
        else:
            report = check(events, final["log"], replica_logs(cluster, final["table_id"], hw), hw)
        stalls = stalls_by_kind(events, self.faults)
        result = {
            **report.to_dict(),
            "seed": self.o.seed,
            "time_s": self.o.time,
            "faults_by_kind": _count_by_kind(self.faults),
            "longest_stall_s_by_kind": stalls,
            "crashes": self.crashes,
            "workload": self.o.workload,
        }
        (self.out / "report.json").write_text(json.dumps(result, indent=2) + "\n")
        history = [*events, *({"k": FAULT, **f.__dict__} for f in self.faults)]
        (self.out / "timeline.svg").write_text(timeline_svg(history))
        return report

    # ---------------------------------------------------------------- helpers
    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _sleep_until(self, t: float) -> None:
        while (left := t - self._now()) > 0:
            time.sleep(min(left, 0.5))  # pacing the schedule, not synchronisation
            if self.client is not None and not self.client.alive():
                raise RuntimeError(f"the workload exited during the run; see {self.out / 'workload.log'}")

    def _log(self, text: str) -> None:
        print(f"verify: {text}", flush=True)


def replica_logs(cluster: LocalCluster, table_id: int, hw: dict[int, int]) -> dict[str, dict[int, Any]]:
    """Each tablet server's records of the table, once each replica's files reach the HW (or after 60 s)."""

    def read() -> dict[str, dict[int, list[tuple[int, str]]]]:
        out: dict[str, dict[int, list[tuple[int, str]]]] = {}
        for n in cluster.names(TABLET_SERVER):
            for b in hw:
                d = Path(cluster.get(n).data_dir) / bucket_dir_name(TableBucket(table_id, b))
                if d.is_dir():
                    out.setdefault(n, {})[b] = read_replica(d)
        return out

    def caught_up() -> dict[str, dict[int, Any]] | None:
        now = read()
        ends = [(recs[-1][0] + 1 if recs else 0) >= hw[b] for r in now.values() for b, recs in r.items()]
        return now if all(ends) else None

    try:
        return cluster.wait_until(caught_up, 60, "every replica's files to reach the HW")  # type: ignore[return-value]
    except WaitTimeout:
        return read()  # compared as they are: divergence is judged on offsets both hold


def read_replica(directory: Path) -> list[tuple[int, str]]:
    """``(offset, value)`` of every record in a replica's segment files (a torn tail is ignored)."""
    out = []
    for seg in sorted(directory.glob("*.log")):
        try:
            buf = seg.read_bytes()
        except FileNotFoundError:  # removed by a truncation meanwhile
            continue
        for batch in iter_batches(buf):
            for i, r in enumerate(batch.records()):
                out.append((batch.base_offset + i, (r.value or b"").decode()))
    return out


def stalls_by_kind(events: list[dict], faults: list[Fault]) -> dict[str, float]:
    """Per fault (``kind/variant``): the longest a send waited for its answer, among the sends started while it was
    in force or after it until the next fault began (at most 5 s after its end): faults come one at a time."""
    sent = {(e["p"], e["s"]): e["t"] for e in events if e.get("k") == "send"}
    answered = sorted(
        (sent[(e["p"], e["s"])], e["t"] - sent[(e["p"], e["s"])])
        for e in events
        if e.get("k") in ("ack", "fail") and (e["p"], e["s"]) in sent
    )
    starts = [t for t, _ in answered]
    ordered = sorted(faults, key=lambda f: f.start)
    out: dict[str, float] = {}
    for i, f in enumerate(ordered):
        until = min(f.end + 5.0, ordered[i + 1].start if i + 1 < len(ordered) else f.end + 5.0)
        lo, hi = bisect.bisect_left(starts, f.start), bisect.bisect_right(starts, until)
        worst = max((latency for _, latency in answered[lo:hi]), default=0.0)
        name = f.what.split()[0]
        out[name] = round(max(out.get(name, 0.0), worst), 3)
    return dict(sorted(out.items()))


def _count_by_kind(faults: list[Fault]) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in faults:
        out[f.kind] = out.get(f.kind, 0) + 1
    return out
