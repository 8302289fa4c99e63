"""Divergent logs on real processes: truncation by leader epoch (docs/design.md invariant 4, KIP-101/279).

- divergence after an unclean tail: a leader appends records (acks=1) that its SIGSTOPped followers never fetch, dies
  (kill -9); a follower becomes leader and writes different records at the same offsets; the old leader
  returns, truncates to where its epoch ends on the new leader, and converges.
- HW truncation is not enough: a follower that fetched more than the next leader (which was paused) must truncate those
  records when it returns; later the leader dies too and every acknowledged record is still there.

After every scenario all replicas hold the same bytes at every offset they share, their epoch checkpoints
agree, and a consumer reads exactly the acknowledged records. The divergence is first shown to exist on
disk (the dead replica's files hold other records at those offsets), so a scenario that failed to set it
up fails instead of passing vacuously.
"""

from __future__ import annotations

import time

import pytest

from fluss_py.errors import ErrorCode
from fluss_py.testing.faults import kill9, pause, resume
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.zkview import ZkView
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    ReplicaFiles,
    TailingConsumer,
    assert_never_divergent,
    bootstrap,
    bucket_offsets,
    consume,
    leader_isr,
    one_bucket_on_three_servers,
    produce,
    raw_produce,
    server_id,
    server_name,
    wait_for_isr,
    wait_for_leader_change,
    wait_full_isr,
    wait_replicas_identical,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)
PREFIX = [b"p%03d" % i for i in range(20)]
# A paused follower may hold a long-poll fetch parked at the leader; the leader answers it (into the paused
# process's socket) at most replica.fetch.wait.max.ms later. Holding the pause this long before writing
# guarantees that what the leader writes next cannot reach the paused follower.
PARKED_FETCH_EXPIRY_S = 2 * int(FAULT_OVERRIDES["replica.fetch.wait.max.ms"]) / 1000


def _committed_prefix(cluster, zk, tb, table, files) -> None:
    """20 acks=all records, on every replica."""
    wait_full_isr(zk, cluster, tb, REPLICAS, 15)
    assert produce(cluster, table, PREFIX) == list(range(20))
    wait_replicas_identical(cluster, files, 20, 10)


def _values(files: ReplicaFiles, start: int, end: int) -> list[bytes | None]:
    by_offset = files.values_by_offset()
    return [by_offset.get(o) for o in range(start, end)]


def _converged(cluster, tb, table, files, timeout: float = 20.0) -> int:
    """Wait until every replica holds the leader's log (up to its LEO) byte for byte; returns the HW."""
    offsets = bucket_offsets(cluster, table)
    wait_replicas_identical(cluster, files, offsets.log_end_offset, timeout)
    final = {n: f.batches() for n, f in files.items()}
    assert_never_divergent(final)
    epochs = {n: f.epochs() for n, f in files.items()}
    first = next(iter(epochs.values()))
    assert all(e == first for e in epochs.values()), f"epoch checkpoints differ: {epochs}"
    return offsets.high_watermark


def test_unclean_tail_divergence_old_leader_truncates_its_unreplicated_records_and_converges(cluster_factory):
    table = "divergence"
    cluster, tb, files = one_bucket_on_three_servers(cluster_factory, table)
    with ZkView(cluster.zookeeper_address) as zk:
        _committed_prefix(cluster, zk, tb, table, files)
        before = leader_isr(zk, cluster, tb)
        a = server_name(before.leader)
        followers = [server_name(s) for s in REPLICAS if s != before.leader]
        tail = TailingConsumer(bootstrap(cluster), f"{DATABASE}.{table}").start()

        # 1. The followers cannot fetch; the leader appends offsets 20..29 (acks=1) that only it holds.
        for f in followers:
            pause(cluster, f)
        time.sleep(PARKED_FETCH_EXPIRY_S)  # fault duration (see PARKED_FETCH_EXPIRY_S), not a synchronisation
        leader_address = cluster.get(a).rpc_address
        old = [[b"old-%02d" % i for i in range(k, k + 5)] for k in (20, 25)]
        for values in old:
            r = raw_produce(leader_address, tb, values, acks=1, timeout_s=5.0)
            assert r.code == ErrorCode.NONE, r
        # 2. It dies; the followers run again and one of them leads.
        kill9(cluster, a)
        for f in followers:
            resume(cluster, f)
        after = wait_for_leader_change(zk, cluster, tb, before, SESSION_TIMEOUT_S + 10)
        b = server_name(after.leader)
        assert _values(files[a], 20, 30) == [v for vs in old for v in vs], "the old leader holds its own records"
        for f in followers:
            assert files[f].log_end_offset() == 20, f"{f} fetched the acks=1 records: nothing diverged"

        # 3. The new leader writes different records at the same offsets (acks=all: the ISR is the two followers).
        new = [b"new-%02d" % i for i in range(20, 25)]
        assert produce(cluster, table, new) == list(range(20, 25))
        assert _values(files[b], 20, 25) == new
        assert _values(files[a], 20, 25) != new, "the dead old leader's log diverges at offsets 20..24"
        assert_never_divergent({f: files[f].batches() for f in followers})  # the live replicas never differ

        # 4. The old leader returns: it truncates what its epoch never committed and follows.
        cluster.start_process(a, wait=True, timeout=30)
        wait_full_isr(zk, cluster, tb, REPLICAS, 30)
        hw = _converged(cluster, tb, table, files)
        assert not any(v and v.startswith(b"old-") for v in files[a].values_by_offset().values())
        assert files[a].epochs() == [(0, 0), (after.leader_epoch, 20)], files[a].epochs()

    assert hw == 25
    assert [v for _, v in consume(cluster, table, 0, hw)] == PREFIX + new
    # A consumer reading all along never saw the uncommitted old-* records (they never were below a HW).
    tail.wait_for(hw, 20)
    assert [v for _, v in tail.stop()] == PREFIX + new


def test_hw_truncation_follower_ahead_of_the_new_leader_truncates_and_nothing_acked_is_lost(
    cluster_factory,
):
    table = "hw_truncation"
    cluster, tb, files = one_bucket_on_three_servers(cluster_factory, table)
    with ZkView(cluster.zookeeper_address) as zk:
        _committed_prefix(cluster, zk, tb, table, files)
        before = leader_isr(zk, cluster, tb)
        a = server_name(before.leader)
        b, c = (server_name(s) for s in REPLICAS if s != before.leader)
        tail = TailingConsumer(bootstrap(cluster), f"{DATABASE}.{table}").start()

        # 1. b (the next leader) is paused; the leader writes 3 acks=1 records that only c fetches.
        #    The HW stays at 20: b is still in the ISR (paused for less than replica.lag.time.max.ms).
        pause(cluster, b)
        time.sleep(PARKED_FETCH_EXPIRY_S)  # fault duration (see PARKED_FETCH_EXPIRY_S), not a synchronisation
        extra = [b"x%d" % i for i in range(3)]
        for v in extra:
            r = raw_produce(cluster.get(a).rpc_address, tb, [v], acks=1, timeout_s=5.0)
            assert r.code == ErrorCode.NONE, r
        cluster.wait_until(lambda: files[c].log_end_offset() == 23, 5, f"{c} fetched offsets 20..22")
        # 2. The leader and c die; b runs again and becomes the leader without those records.
        kill9(cluster, a)
        kill9(cluster, c)
        resume(cluster, b)
        led = wait_for_isr(
            zk, cluster, tb, lambda lai: lai.leader == server_id(b) and list(lai.isr) == [lai.leader],
            SESSION_TIMEOUT_S + 15, f"{b} leading alone",
        )  # fmt: skip
        assert files[b].log_end_offset() == 20
        assert _values(files[c], 20, 23) == extra, "c holds records the new leader does not"
        # The leader alone is below min.insync.replicas (2): it takes acks=1 writes at the same offsets.
        new = [b"y%d" % i for i in range(2)]
        assert produce(cluster, table, new, acks=1) == [20, 21]

        # 3. c returns first: it asks b where its epoch 0 ends (20) and truncates x0..x2, not to its HW.
        cluster.start_process(c, wait=True, timeout=30)
        wait_for_isr(zk, cluster, tb, lambda lai: server_id(c) in lai.isr, 30, f"{c} back in the ISR")
        cluster.wait_until(lambda: _values(files[c], 20, 22) == new, 15, f"{c} truncated and fetched y0, y1")
        assert files[c].epochs() == [(0, 0), (led.leader_epoch, 20)], files[c].epochs()
        # 4. Then the old leader, which holds the same extra records.
        cluster.start_process(a, wait=True, timeout=30)
        wait_full_isr(zk, cluster, tb, REPLICAS, 30)
        _converged(cluster, tb, table, files)
        for name in (a, c):
            assert not any(v in extra for v in files[name].values_by_offset().values()), name

        # 5. acks=all again, then the leader dies: every acknowledged record survives on the new leader.
        more = [b"z%d" % i for i in range(5)]
        assert produce(cluster, table, more) == list(range(22, 27))
        current = leader_isr(zk, cluster, tb)
        kill9(cluster, server_name(current.leader))
        wait_for_leader_change(zk, cluster, tb, current, SESSION_TIMEOUT_S + 10)
        last = [b"w%d" % i for i in range(5)]
        assert produce(cluster, table, last) == list(range(27, 32))
        assert_never_divergent({n: f.batches() for n, f in files.items()})  # the dead leader's log is a prefix

    hw = bucket_offsets(cluster, table).high_watermark
    assert hw == 32
    assert [v for _, v in consume(cluster, table, 0, hw)] == PREFIX + new + more + last
    tail.wait_for(hw, 20)
    assert [v for _, v in tail.stop()] == PREFIX + new + more + last  # never the truncated x0..x2
