"""Replication between ReplicaManagers over in-memory endpoints: truncation by epoch, convergence, fetchers."""

from __future__ import annotations

import asyncio
import dataclasses

from fluss_py import config as cfg
from fluss_py.log.manager import LogManager
from fluss_py.record import RecordBatchBuilder
from fluss_py.replica.fetcher.state import FetchPhase
from fluss_py.replica.manager import ReplicaManager
from fluss_py.replica.messages import (
    EpochEndOffset,
    EpochResult,
    FetchBucketRequest,
    FetchBucketResult,
    FetchResponse,
    LeaderAndIsrItem,
)
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr, TableBucket
from tests.unit.replica.fakes import FakeCoordinator, batch, epochs, log_contents
from tests.unit.replica.harness import SETTINGS, TB, ReplicaCluster, node

MIN1 = {"min.insync.replicas": "1"}


def log_of(c: ReplicaCluster, server: int):
    return c.log_managers[server].get(TB)


def contents(c: ReplicaCluster, server: int) -> list[tuple[int, int, bytes]]:
    if server in c.managers:
        return log_contents(log_of(c, server))
    lm = LogManager(c.root / f"server-{server}", c.config)  # a stopped server: read its disk
    try:
        return log_contents(lm.load_logs()[TB])
    finally:
        lm.shutdown()


def raw(c: ReplicaCluster, server: int) -> bytes:
    lg = log_of(c, server)
    return lg.read(0, 1 << 30, lg.log_end_offset).records


def assert_no_divergence(c: ReplicaCluster, servers: tuple[int, ...]) -> None:
    """No offset holds different content on two replicas (the shorter log is a prefix of the longer)."""
    logs = [contents(c, s) for s in servers]
    for a in logs:
        for b in logs:
            n = min(len(a), len(b))
            assert a[:n] == b[:n]


async def caught_up(c: ReplicaCluster, leader: int, followers: tuple[int, ...]) -> None:
    leo = log_of(c, leader).log_end_offset
    await wait_until(lambda: all(log_of(c, f).log_end_offset == leo for f in followers), message="catch up")


async def test_followers_replicate_byte_identical_batches(clock, tmp_path) -> None:
    c = ReplicaCluster(3, clock, tmp_path)
    try:
        await c.create(TB, (1, 2, 3))
        for i in range(5):
            assert (await c.managers[1].append(-1, 5.0, {TB: batch(b"v%d" % i, b"w%d" % i)}))[TB].error is None
        await caught_up(c, 1, (2, 3))
        assert raw(c, 1) == raw(c, 2) == raw(c, 3)
        assert epochs(log_of(c, 2)) == [(0, 0)]
        await wait_until(lambda: log_of(c, 2).high_watermark == 10)  # HW reaches followers
    finally:
        await c.close()


async def test_unclean_tail_divergence_old_leader_truncates_and_converges(clock, tmp_path) -> None:
    """Unclean tail: A (epoch 0) appends records nobody fetched, dies; B (epoch 1) writes different records at
    the same offsets; A returns, truncates by epoch and converges."""
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        await c.managers[1].append(-1, 5.0, {TB: batch(b"m0", b"m1")})
        await caught_up(c, 1, (2,))
        await c.kill(2)
        await c.managers[1].append(1, 5.0, {TB: batch(b"a2", b"a3", b"a4")})  # acks=1, never replicated
        await c.kill(1)
        c.start_server(2)
        await c.elect(TB, (1, 2), leader=2, isr=(2,))
        await c.managers[2].append(1, 5.0, {TB: batch(b"b2")})
        await c.managers[2].append(1, 5.0, {TB: batch(b"b3")})
        assert contents(c, 1)[2][2] == b"a2" and contents(c, 2)[2][2] == b"b2"  # diverged at offset 2
        c.start_server(1)
        await c.notify(TB, (1, 2))
        await caught_up(c, 2, (1,))
        assert contents(c, 1) == contents(c, 2)
        assert [v for _, _, v in contents(c, 1)] == [b"m0", b"m1", b"b2", b"b3"]
        assert epochs(log_of(c, 1)) == [(0, 0), (1, 2)]
    finally:
        await c.close()


async def test_a_diverged_tail_as_long_as_the_leaders_log_rejoins_the_isr_after_truncation(clock, tmp_path) -> None:
    """Model seed 211: the old leader's acks=1 tail (epoch 0) ends at the new leader's LEO, so equal LEOs say
    nothing; the leader admits the follower to the ISR only from a non-diverging fetch, i.e. after truncation."""
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        assert (await c.managers[1].append(-1, 5.0, {TB: batch(b"m0")}))[TB].error is None
        c.down.add(1)  # 2 cannot fetch from 1
        await c.managers[1].append(1, 5.0, {TB: batch(b"a1")})
        await c.managers[1].append(1, 5.0, {TB: batch(b"a2")})
        await c.kill(1)
        await c.elect(TB, (1, 2), leader=2, isr=(2,))  # epoch 1
        await c.managers[2].append(1, 5.0, {TB: batch(b"b1")})
        await c.managers[2].append(1, 5.0, {TB: batch(b"b2")})
        assert contents(c, 1)[-1][0] == contents(c, 2)[-1][0] == 2  # same LEO 3, different records
        assert contents(c, 1) != contents(c, 2)
        c.start_server(1)
        await c.notify(TB, (1, 2))
        await wait_until(lambda: 1 in c.coordinator.state[TB].isr, message="1 back in the ISR")
        assert contents(c, 1) == contents(c, 2)
        assert [v for _, _, v in contents(c, 1)] == [b"m0", b"b1", b"b2"]
        assert epochs(log_of(c, 1)) == [(0, 0), (1, 1)]
    finally:
        await c.close()


async def test_hw_truncation_case(clock, tmp_path) -> None:
    """HW truncation is not enough: B1 has msg6 that B2 (new leader) lacks; B1 truncates to 6, keeping msg5."""
    c = ReplicaCluster(3, clock, tmp_path)
    r3 = (1, 2, 3)
    try:
        await c.create(TB, r3, MIN1)
        await c.managers[1].append(-1, 5.0, {TB: batch(b"msg0", b"msg1", b"msg2")})
        await c.elect(TB, r3, leader=1, isr=r3)  # epoch 1
        await c.managers[1].append(-1, 5.0, {TB: batch(b"msg3")})
        await c.managers[1].append(-1, 5.0, {TB: batch(b"msg4")})
        await caught_up(c, 1, (2, 3))
        await c.kill(3)
        await c.managers[1].append(1, 5.0, {TB: batch(b"msg5")})
        await caught_up(c, 1, (2,))
        await c.kill(2)
        await c.managers[1].append(1, 5.0, {TB: batch(b"msg6")})
        await c.kill(1)
        c.start_server(2)
        await c.elect(TB, r3, leader=2, isr=(2,))  # epoch 2
        c.start_server(3)
        await c.notify(TB, r3)
        c.start_server(1)
        await c.notify(TB, r3)
        await c.managers[2].append(1, 5.0, {TB: batch(b"new6")})
        await caught_up(c, 2, (1, 3))
        for s in r3:
            assert [v for _, _, v in contents(c, s)] == [b"msg%d" % i for i in range(6)] + [b"new6"]
        assert contents(c, 1) == contents(c, 2) == contents(c, 3)
        assert epochs(log_of(c, 1)) == [(0, 0), (1, 3), (2, 6)]
    finally:
        await c.close()


async def test_kip101_restarted_follower_does_not_truncate_to_its_hw(clock, tmp_path) -> None:
    """KIP-101 scenario 1: a follower holding m1 above its HW restarts and then becomes leader: m1 survives."""
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        await c.managers[1].append(-1, 5.0, {TB: batch(b"m0")})
        await c.managers[1].append(-1, 5.0, {TB: batch(b"m1")})  # acked: follower 2 has it
        log_of(c, 2).update_high_watermark(1)  # its HW had not caught up yet (checkpointed at kill)
        await c.kill(2)
        c.start_server(2)
        await c.notify(TB, (1, 2))
        fetcher = c.managers[2].fetchers.fetcher_of(TB)
        await wait_until(lambda: fetcher.buckets[TB].phase is FetchPhase.FETCHING)
        assert log_of(c, 2).log_end_offset == 2
        await c.kill(1)
        await c.elect(TB, (1, 2), leader=2, isr=(2,))
        assert [v for _, _, v in contents(c, 2)] == [b"m0", b"m1"]
    finally:
        await c.close()


async def test_leader_reports_diverging_epoch_to_a_follower_fetch(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        await c.managers[1].append(-1, 5.0, {TB: batch(b"a", b"b")})
        await c.elect(TB, (1, 2), leader=1, isr=(1, 2))
        await c.managers[1].append(-1, 5.0, {TB: batch(b"c")})
        # a follower claiming epoch 0 runs to offset 3: epoch 0 ended at 2 here
        req = FetchBucketRequest(TB, 3, 1 << 20, current_leader_epoch=1, last_fetched_epoch=0)
        r = (await c.managers[1].fetch(2, 0, 1, 1 << 20, [req]))[TB]
        assert r.diverging_epoch is not None and (r.diverging_epoch.epoch, r.diverging_epoch.end_offset) == (0, 2)
        assert r.records == b""
    finally:
        await c.close()


async def test_stale_follower_epoch_is_fenced_by_the_leader(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        await c.elect(TB, (1, 2), leader=1, isr=(1, 2))  # epoch 1
        req = FetchBucketRequest(TB, 0, 1 << 20, current_leader_epoch=0)
        r = (await c.managers[1].fetch(2, 0, 1, 1 << 20, [req]))[TB]
        assert r.error is not None and r.error.code.name == "FENCED_LEADER_EPOCH"
    finally:
        await c.close()


async def test_one_fetcher_per_leader_carries_all_buckets(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    buckets = [TableBucket(7, b) for b in range(6)]
    try:
        for tb in buckets:
            await c.create(tb, (1, 2) if tb.bucket % 2 == 0 else (2, 1), MIN1)
        m2 = c.managers[2]
        assert len(m2.fetchers.fetchers) == 1  # server 2 follows only leader 1
        fetcher = next(iter(m2.fetchers.fetchers.values()))
        assert set(fetcher.buckets) == {tb for tb in buckets if tb.bucket % 2 == 0}
        assert len(c.managers[1].fetchers.fetchers) == 1
        await c.managers[1].append(-1, 5.0, {tb: batch(b"x") for tb in buckets if tb.bucket % 2 == 0})
        for tb in buckets:
            if tb.bucket % 2 == 0:
                assert c.log_managers[2].get(tb).log_end_offset == 1
    finally:
        await c.close()


async def test_fetcher_backs_off_while_leader_unreachable_then_catches_up(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        endpoint = c.managers[2].fetchers.fetcher_of(TB).endpoint
        c.down.add(1)
        await c.managers[1].append(1, 5.0, {TB: batch(b"x")})
        before = endpoint.calls
        await asyncio.sleep(0.2)
        assert endpoint.calls - before <= 0.2 / 0.01 + 2  # one attempt per backoff, no busy loop
        c.down.discard(1)
        await caught_up(c, 1, (2,))
    finally:
        await c.close()


async def test_calls_to_a_leader_that_keeps_failing_back_off_longer_and_longer(clock, tmp_path) -> None:
    # backoff 10 ms: a fixed backoff makes ~60 attempts in 0.6 s; doubling (10, 20, 40 .. ms) at most 7
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        fetcher = c.managers[2].fetchers.fetcher_of(TB)
        c.down.add(1)
        await wait_until(lambda: fetcher.failed_calls >= 1)
        before = fetcher.endpoint.calls
        await asyncio.sleep(0.6)
        assert fetcher.endpoint.calls - before <= 8
        c.down.discard(1)
        await c.managers[1].append(1, 5.0, {TB: batch(b"x")})
        await caught_up(c, 1, (2,))  # at most 1 s later, and back to the configured backoff
        assert fetcher.failed_calls == 0
    finally:
        await c.close()


async def test_buckets_added_and_removed_while_the_fetcher_runs(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    tb2 = TableBucket(8, 0)
    try:
        await c.create(TB, (1, 2), MIN1)
        fetcher = c.managers[2].fetchers.fetcher_of(TB)
        await c.create(tb2, (1, 2), MIN1)
        assert c.managers[2].fetchers.fetcher_of(tb2) is fetcher
        await c.managers[1].append(1, 5.0, {tb2: batch(b"y")})
        await wait_until(lambda: c.log_managers[2].logs[tb2].log_end_offset == 1)
        await c.managers[2].fetchers.remove_buckets([TB])
        await c.managers[1].append(1, 5.0, {TB: batch(b"z")})
        await asyncio.sleep(0.1)
        assert log_of(c, 2).log_end_offset == 0
        await c.managers[2].fetchers.remove_buckets([tb2])
        assert c.managers[2].fetchers.fetchers == {}  # idle fetcher closed
        assert fetcher.endpoint.closed
    finally:
        await c.close()


async def test_a_bucket_added_during_a_long_poll_is_fetched_at_once(clock, tmp_path) -> None:
    """A bucket added to a fetcher whose long poll is in flight (a leader moved to a server this follower
    already fetches from: controlled shutdown, failover) must not wait for that poll to end: acks=all
    writes to it wait for this follower."""
    fetch = dataclasses.replace(SETTINGS.fetch, wait_max_s=30.0)
    c = ReplicaCluster(2, clock, tmp_path, dataclasses.replace(SETTINGS, fetch=fetch))
    tb2 = TableBucket(8, 0)
    try:
        await c.create(TB, (1, 2))
        await asyncio.sleep(0.05)  # the follower's fetch of TB is parked at leader 1 for up to 30 s
        await c.create(tb2, (1, 2))
        result = await asyncio.wait_for(c.managers[1].append(-1, 30.0, {tb2: batch(b"y")}), 5.0)
        assert result[tb2].error is None and c.log_managers[2].get(tb2).log_end_offset == 1
    finally:
        await c.close()


async def test_a_bucket_backed_off_during_a_long_poll_is_fetched_when_its_backoff_ends(clock, tmp_path) -> None:
    """The follower learns of a new leader before the leader does (NotifyLeaderAndIsr races): its first call
    is refused and the bucket backs off while the fetcher long-polls the leader for its other buckets; the
    poll must end with the backoff, not after replica.fetch.wait.max.ms."""
    fetch = dataclasses.replace(SETTINGS.fetch, wait_max_s=30.0)
    c = ReplicaCluster(2, clock, tmp_path, dataclasses.replace(SETTINGS, fetch=fetch))
    tb2 = TableBucket(8, 0)
    try:
        await c.create(TB, (1, 2))
        lai = LeaderAndIsr(1, 0, (1, 2), c.coordinator_epoch, 0)
        c.coordinator.state[tb2] = lai
        state = [LeaderAndIsrItem(tb2, lai, (1, 2), {})]
        await c.managers[2].become_leader_or_follower(c.coordinator_epoch, state, [node(1), node(2)])
        await asyncio.sleep(0.1)  # leader 1 does not know tb2 yet: refused, backed off, TB long-polled again
        await c.managers[1].become_leader_or_follower(c.coordinator_epoch, state, [node(1), node(2)])
        result = await asyncio.wait_for(c.managers[1].append(-1, 30.0, {tb2: batch(b"y")}), 5.0)
        assert result[tb2].error is None and c.log_managers[2].get(tb2).log_end_offset == 1
    finally:
        await c.close()


async def test_leader_failover_without_loss_of_acknowledged_writes(clock, tmp_path) -> None:
    c = ReplicaCluster(3, clock, tmp_path)
    r3 = (1, 2, 3)
    acked = []
    try:
        await c.create(TB, r3)
        for i in range(5):
            res = (await c.managers[1].append(-1, 5.0, {TB: batch(b"k%d" % i)}))[TB]
            acked.append((res.base_offset, b"k%d" % i))
        await c.kill(1)
        await c.elect(TB, r3, leader=2, isr=(2, 3))
        for i in range(5, 8):
            res = (await c.managers[2].append(-1, 5.0, {TB: batch(b"k%d" % i)}))[TB]
            assert res.error is None
            acked.append((res.base_offset, b"k%d" % i))
        c.start_server(1)
        await c.notify(TB, r3)
        await caught_up(c, 2, (1, 3))
        for s in r3:
            assert [(o, v) for o, _, v in contents(c, s)] == acked
        assert_no_divergence(c, r3)
    finally:
        await c.close()


class ScriptedLeader:
    """A LeaderEndpoint whose answers a test scripts; records every fetch request."""

    def __init__(self, epoch_answer, fetch_answers) -> None:
        self.epoch_answer = epoch_answer
        self.fetch_answers = list(fetch_answers)
        self.fetches: list = []

    async def fetch(self, request):
        self.fetches.append(request)
        await asyncio.sleep(0.001)
        if self.fetch_answers:
            return FetchResponse(self.fetch_answers.pop(0)(request))  # sessionless: every request stays full
        return FetchResponse(
            {b.table_bucket: FetchBucketResult(b.table_bucket, None, 0, 0, b.fetch_offset) for b in request.buckets}
        )

    async def offsets_for_leader_epoch(self, replica_id, requests):
        return {r.table_bucket: self.epoch_answer(r) for r in requests}

    async def close(self) -> None:
        pass


async def test_follower_truncates_on_a_diverging_epoch_in_a_fetch_answer(clock, tmp_path) -> None:
    def no_truncation(r):
        return EpochResult(r.table_bucket, None, r.leader_epoch, 4)

    def diverged(request):
        return {TB: FetchBucketResult(TB, None, 2, 0, 2, b"", EpochEndOffset(0, 2))}

    leader = ScriptedLeader(no_truncation, [diverged])
    lm = LogManager(tmp_path / "s2", cfg.Config(cfg.TABLET))
    m = ReplicaManager(2, lm, cfg.Config(cfg.TABLET), FakeCoordinator(), lambda node: leader, clock, settings=SETTINGS)
    m.start()
    try:
        lai = LeaderAndIsr(2, 0, (2,), 1, 0)
        await m.become_leader_or_follower(1, [LeaderAndIsrItem(TB, lai, (1, 2), MIN1)], [node(1), node(2)])
        await m.append(1, 1.0, {TB: batch(b"a", b"b")})
        await m.append(1, 1.0, {TB: batch(b"c", b"d")})
        lai = lai.with_leader(1, (1, 2), 1)
        await m.become_leader_or_follower(1, [LeaderAndIsrItem(TB, lai, (1, 2), MIN1)], [node(1), node(2)])
        await wait_until(lambda: len(leader.fetches) >= 2)
        assert m.replica(TB).log_end_offset == 2
        assert leader.fetches[0].buckets[0].fetch_offset == 4 and leader.fetches[0].buckets[0].last_fetched_epoch == 0
        assert leader.fetches[1].buckets[0].fetch_offset == 2
    finally:
        await m.shutdown()
        lm.shutdown()


async def test_idempotent_retry_after_failover_gets_the_original_offsets(clock, tmp_path) -> None:
    """docs/design.md invariant 7 across a leader change: followers keep writer state."""
    c = ReplicaCluster(3, clock, tmp_path)
    r3 = (1, 2, 3)
    try:
        await c.create(TB, r3)
        b = RecordBatchBuilder(writer_id=42, writer_epoch=0, base_sequence=0)
        b.append(b"once")
        data = b.build()
        first = (await c.managers[1].append(-1, 5.0, {TB: data}))[TB]
        assert first.error is None
        await c.kill(1)
        await c.elect(TB, r3, leader=2, isr=(2, 3))
        retry = (await c.managers[2].append(-1, 5.0, {TB: data}))[TB]
        assert retry.error is None and (retry.base_offset, retry.last_offset) == (first.base_offset, first.last_offset)
        assert [v for _, _, v in contents(c, 2)] == [b"once"]
    finally:
        await c.close()


async def test_corrupt_batch_is_refused_and_nothing_appended(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        bad = bytearray(batch(b"abc"))
        bad[-1] ^= 0xFF
        result = (await c.managers[1].append(-1, 1.0, {TB: bytes(bad)}))[TB]
        assert result.error_code.name == "CORRUPT_MESSAGE"
        assert log_of(c, 1).log_end_offset == 0
    finally:
        await c.close()


async def test_same_leader_new_epoch_keeps_the_fetcher_and_restarts_truncation(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        fetcher = c.managers[2].fetchers.fetcher_of(TB)
        await c.elect(TB, (1, 2), leader=1, isr=(1, 2))
        assert c.managers[2].fetchers.fetcher_of(TB) is fetcher and not fetcher.endpoint.closed
        assert fetcher.buckets[TB].leader_epoch == 1
        await c.managers[1].append(-1, 5.0, {TB: batch(b"x")})
        assert log_of(c, 2).log_end_offset == 1
    finally:
        await c.close()
