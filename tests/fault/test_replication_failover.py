"""Issue 4 acceptance on real processes: ZooKeeper, coordinators and three tablet servers, real signals.

- the steady-producer leader kill: one bucket, RF 3, an idempotent acks=all producer sending one record every 20 ms and
  waiting for each; kill -9 of the leader, restart, full ISR, kill -9 of the new leader. 0 failed sends,
  every acknowledged record exactly once and in order, the new leader's leader-epoch-checkpoint gains the
  line (new epoch, first offset written after the kill), and the three replicas end byte-identical.
  A failover report (stall, slow requests > 100 ms, counts, leader/ISR, checkpoint) is printed.
- coordinator leader kill -9 during steady producing: no producer error, nothing lost or duplicated.

Divergence, HW truncation, ISR and zombie-leader scenarios are in test_replication_divergence.py and
test_replication_isr.py. The tests skip only while the tablet server's data path answers "not implemented".
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from fluss_py.testing.faults import kill9
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.zkview import ZkView
from fluss_py.types import LeaderAndIsr, TableBucket
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    SLOW_MS,
    STEADY,
    Batch,
    ReplicaFiles,
    Sent,
    SteadyProducer,
    TailingConsumer,
    assert_every_ack_read_once,
    assert_exactly_once_in_order,
    assert_never_divergent,
    bootstrap,
    bucket_offsets,
    consume,
    create_table,
    epochs_of_batches,
    explain_offset,
    first_mismatch,
    leader_isr,
    server_name,
    slow_sends,
    wait_for_leader_change,
    wait_full_isr,
    wait_replicas_identical,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)
FAILOVER_TIMEOUT_S = SESSION_TIMEOUT_S + 10.0  # generous: the budget is checked by the failover-speed issue
# The steady producer: acks=all, idempotent, default-like retries. Timeouts far above any failover.


@dataclass
class Trial:
    number: int
    killed: str
    before: LeaderAndIsr
    after: LeaderAndIsr
    t_kill: float
    wall_kill_ms: int
    new_leader: str = ""
    epoch_line: tuple[int, int] = (-1, -1)
    checkpoint: list[tuple[int, int]] = field(default_factory=list)
    around: list[Batch] = field(default_factory=list)
    sends: list[Sent] = field(default_factory=list)


def _kill_the_leader(cluster, zk, tb: TableBucket, producer: SteadyProducer, number: int) -> Trial:
    """kill -9 the bucket leader while the producer runs; wait for the new leader and 1 s of traffic through it;
    check the new leader's leader-epoch-checkpoint gained exactly (new epoch, first offset written after the kill)."""
    before = leader_isr(zk, cluster, tb)
    assert before is not None
    killed = server_name(before.leader)
    others = [server_name(s) for s in REPLICAS if s != before.leader]
    checkpoints = {n: ReplicaFiles(cluster, n, tb).epochs() for n in others}
    wall = int(time.time() * 1000)
    t_kill = kill9(cluster, killed)
    after = wait_for_leader_change(zk, cluster, tb, before, FAILOVER_TIMEOUT_S)
    trial = Trial(number, killed, before, after, t_kill, wall, new_leader=server_name(after.leader))
    producer.wait_acked_after(t_kill, 50, FAILOVER_TIMEOUT_S + 20)

    files = ReplicaFiles(cluster, trial.new_leader, tb)
    old_lines = checkpoints[trial.new_leader]

    def gained_one_line() -> bool:
        lines = files.epochs()
        return len(lines) == len(old_lines) + 1 and lines[: len(old_lines)] == old_lines

    cluster.wait_until(gained_one_line, 10, lambda: f"{trial.new_leader}'s checkpoint {files.epochs()} vs {old_lines}")
    trial.checkpoint = files.epochs()
    epoch, start = trial.epoch_line = trial.checkpoint[-1]
    assert epoch == after.leader_epoch, f"checkpoint line {trial.epoch_line}, leader epoch {after.leader_epoch}"

    # The start offset is the first record written after the kill: every record acknowledged before the kill
    # lies below it; the record at it was not acknowledged before the kill and is the next one sent (seq = offset,
    # one record per batch); the batch there carries the new epoch, the one before an older epoch.
    sent = list(producer.sent)
    # A failed send lets the next record take its offset: say so first, or the checks below would report a
    # misplaced record (a failed send is an error of its own, never a loss: it was not acknowledged).
    failed = [s for s in sent if s.error]
    replicas = {server_name(r): ReplicaFiles(cluster, server_name(r), tb) for r in REPLICAS}
    assert not failed, f"send of {failed[0].value!r} failed: {failed[0].error}\n" + explain_offset(
        replicas, sent, failed[0].seq
    )
    acked_before = [s for s in sent if s.end < t_kill and s.error is None]
    assert all(s.offset is not None and s.offset < start for s in acked_before), "acknowledged before the kill"
    by_offset = {b.base_offset: b for b in files.batches()}
    assert start in by_offset, f"no batch at the new epoch's start offset {start}\n" + explain_offset(
        replicas, sent, start
    )
    first = by_offset[start]
    ok = first.leader_epoch == epoch and first.values == (b"m%07d" % start,)
    assert ok, f"{first}\n" + explain_offset(replicas, sent, start)
    assert sent[start].end > t_kill, f"record {start} was acknowledged before the kill"
    if start > 0:
        assert by_offset[start - 1].leader_epoch < epoch
    trial.around = [by_offset[o] for o in (start - 1, start, start + 1) if o in by_offset]
    return trial


def _report(trials: list[Trial], sent: list[Sent], checkpoints: dict[str, list[tuple[int, int]]], hw: int) -> str:
    """The failover report: per trial the kill time, slow requests with latencies, counts, leader/ISR change,
    the new leader's checkpoint and the batches around the new epoch's start."""
    lines = ["", "leader kill: 3 tablet servers, 1 bucket RF 3, acks=all + idempotence, one record / 20 ms"]
    for t in trials:
        window = t.sends
        slow = slow_sends(window)
        failed = [s for s in window if s.error]
        worst = max((s.latency_ms for s in window), default=0.0)
        lines.append(f"trial {t.number}: kill -9 leader ({t.killed}) @ {t.wall_kill_ms}")
        for s in slow:
            lines.append(f"  slow request @{s.wall_ms} latency {s.latency_ms:.0f}ms")
        lines.append(f"  ok {len(window) - len(failed)} failed {len(failed)} max latency {worst:.0f}ms")
        resumed = min((s.end for s in window if s.end > t.t_kill and s.error is None), default=t.t_kill)
        lines.append(f"  stall: first acknowledgement after the kill +{(resumed - t.t_kill) * 1e3:.0f}ms")
        lines.append(
            f"  Leader: {t.before.leader} -> {t.after.leader} (epoch {t.before.leader_epoch} -> "
            f"{t.after.leader_epoch}), ISR: {','.join(map(str, t.after.isr))}"
        )
        cp = " / ".join([f"{0}", f"{len(t.checkpoint)}", *(f'"{e} {o}"' for e, o in t.checkpoint)])
        lines.append(f"  leader-epoch-checkpoint on {t.new_leader}: {cp}")
        for b in t.around:
            mark = "   <- first record of the new epoch" if b.base_offset == t.epoch_line[1] else ""
            lines.append(
                f"  baseOffset: {b.base_offset}  epoch: {b.leader_epoch}  CreateTime: {b.first_timestamp}"
                f"  (kill {b.first_timestamp - t.wall_kill_ms:+d} ms){mark}"
            )
    lines.append(f"total: sent {len(sent)}, failed {sum(1 for s in sent if s.error)}, high watermark {hw}")
    for name, cp in sorted(checkpoints.items()):
        lines.append(f"  final leader-epoch-checkpoint {name}: {cp}")
    return "\n".join(lines)


def _assert_epoch_cache_matches_batches(files: ReplicaFiles) -> None:
    """Design invariant 4 / storage invariant 5: the checkpoint is the batches' epoch boundaries, plus at most an
    election entry at the log end."""
    batches = files.batches()
    leo = batches[-1].last_offset + 1 if batches else 0
    lines = files.epochs()
    below = [line for line in lines if line[1] < leo]
    assert below == epochs_of_batches(batches), f"{files.name}: checkpoint {lines} vs batches"
    assert all(o == leo for _, o in lines[len(below) :]), f"{files.name}: {lines} beyond LEO {leo}"


@pytest.mark.parametrize("secure", [False, True], ids=["plaintext", "secure"])
def test_kill9_of_the_leader_twice_is_a_pause_not_an_error(cluster_factory, capsys, secure):
    """``secure``: TLS with client certificates, passwords, ACLs (docs/security.md) change nothing of it."""
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES, secure=secure)
    table = "leader_failure_demo"
    table_id = create_table(cluster, table)
    tb = TableBucket(table_id, 0)
    trials: list[Trial] = []
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        identity = cluster.client_identity()
        tail = TailingConsumer(bootstrap(cluster), f"{DATABASE}.{table}", security=identity).start()  # both failovers
        producer = SteadyProducer(bootstrap(cluster), f"{DATABASE}.{table}", STEADY, security=identity).start()
        t0 = time.monotonic()
        try:
            producer.wait_acked_after(t0, 75, 30)  # ~1.5 s of steady traffic before the first kill
            trials.append(_kill_the_leader(cluster, zk, tb, producer, 1))
            # The second trial: the killed broker restarts and is back in the ISR, then the new leader dies.
            cluster.start_process(trials[0].killed, wait=True, timeout=30)
            wait_full_isr(zk, cluster, tb, REPLICAS, 30)
            t_second = time.monotonic()
            producer.wait_acked_after(t_second, 25, 15)
            trials.append(_kill_the_leader(cluster, zk, tb, producer, 2))
        finally:
            sent = producer.stop()
        trials[0].sends = [s for s in sent if s.start < t_second] if len(trials) > 1 else list(sent)
        if len(trials) > 1:
            trials[1].sends = [s for s in sent if s.start >= t_second]

        cluster.start_process(trials[1].killed, wait=True, timeout=30)
        wait_full_isr(zk, cluster, tb, REPLICAS, 30)
        hw = bucket_offsets(cluster, table).high_watermark
        files = {server_name(s): ReplicaFiles(cluster, server_name(s), tb) for s in REPLICAS}
        wait_replicas_identical(cluster, files, hw, 20)
        final = {n: f.batches() for n, f in files.items()}
        assert_never_divergent(final)
        checkpoints = {n: f.epochs() for n, f in files.items()}

    report = _report(trials, sent, checkpoints, hw)
    with capsys.disabled():
        print(report)
    consumed = consume(cluster, table, 0, hw)
    try:
        assert hw == len(sent), f"high watermark {hw} but {len(sent)} records sent (one record per send)"
        assert_exactly_once_in_order(sent, consumed)
    except AssertionError as e:  # add what each replica holds where the log first differs from the sends
        at = first_mismatch(sent, consumed)
        raise AssertionError(f"{e}\n{explain_offset(files, sent, at if at is not None else hw)}") from e
    # A consumer reading during both failovers saw exactly the same: no record that vanished, no gap, no repeat.
    tail.wait_for(hw, 20)
    assert tail.stop() == consumed
    for f in files.values():
        _assert_epoch_cache_matches_batches(f)
    # The epoch history is the same everywhere: 0 at 0, then one line per kill at its start offset.
    expected = [(trials[0].before.leader_epoch, 0)] + [t.epoch_line for t in trials]
    for name, cp in checkpoints.items():
        assert [line for line in cp if line[1] < hw] == expected, f"{name}: {cp} vs {expected}"


def test_kill9_of_the_coordinator_leader_during_steady_producing_is_not_felt(cluster_factory, capsys):
    cluster = cluster_factory(coordinators=3, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    table = "coordinator_failover"
    table_id = create_table(cluster, table, buckets=3)
    tbs = [TableBucket(table_id, b) for b in range(3)]
    with ZkView(cluster.zookeeper_address) as zk:
        for tb in tbs:
            wait_full_isr(zk, cluster, tb, REPLICAS, 15)
    producer = SteadyProducer(bootstrap(cluster), f"{DATABASE}.{table}", STEADY, bucket_of=lambda seq: seq % 3).start()
    killed: list[str] = []
    try:
        producer.wait_acked_after(time.monotonic(), 50, 30)
        for _ in range(2):  # 3 -> 2 -> 1 coordinators
            leader = cluster.wait_for_leader(15, exclude=killed)
            t_kill = kill9(cluster, leader)
            killed.append(leader)
            cluster.wait_for_leader(SESSION_TIMEOUT_S + 10, exclude=killed)
            producer.wait_acked_after(t_kill, 50, 30)
    finally:
        sent = producer.stop()
    worst = max(sent, key=lambda s: s.latency_ms)
    with capsys.disabled():
        print(
            f"\ncoordinator kill -9 x2 during steady producing: sent {len(sent)}, failed "
            f"{sum(1 for s in sent if s.error)}, max latency {worst.latency_ms:.0f} ms, "
            f"slow (> {SLOW_MS:.0f} ms): {[round(s.latency_ms) for s in slow_sends(sent)]}"
        )
    assert not [s for s in sent if s.error], [s.error for s in sent if s.error][:3]
    for tb in tbs:
        assert_every_ack_read_once(cluster, table, sent, tb.bucket)
