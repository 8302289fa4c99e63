"""Primary-key buckets across ReplicaManagers (real logs and RocksDB, in-memory endpoints): the leader's write
path, every replica applying the committed changelog, the lookups' waits (docs/primary-key-tables.md §1
invariant 5), the kinds of batches each table takes, and the KV's life with its replica."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from fluss_py.errors import ErrorCode
from fluss_py.kv.store import KvResources
from fluss_py.kv.tablet import KvTablet
from fluss_py.log.tablet import LogTablet
from fluss_py.replica.kv_reads import KvReadResult, KvReads
from fluss_py.replica.messages import ListOffsetsRequest, StopReplicaItem
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr, OffsetSpec
from tests.unit.kv.helpers import CONFIG, SCHEMA, TABLE, delete, key, kv_batch, kv_contents, replay, row, upsert
from tests.unit.replica.fakes import HandFetches, batch
from tests.unit.replica.harness import TB, ReplicaCluster

MIN1 = {"min.insync.replicas": "1"}


def kv_of(c: ReplicaCluster, server: int) -> KvTablet:
    kv = c.managers[server].replica(TB).kv
    assert kv is not None
    return kv


async def lookup(c: ReplicaCluster, server: int, *keys: bytes, timeout_s: float = 5.0, tb=TB) -> KvReadResult:
    m = c.managers[server]
    return (await KvReads(m, m.kv).lookup({tb: list(keys)}, timeout_s))[tb]


async def all_applied(c: ReplicaCluster, servers: tuple[int, ...]) -> None:
    def done() -> bool:
        return all(kv_of(c, s).applied_offset == c.log_managers[s].get(TB).high_watermark for s in servers)

    await wait_until(done, message="every KV applied up to its HW")


async def test_every_replica_applies_the_committed_changelog(clock, tmp_path: Path) -> None:
    c = ReplicaCluster(3, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, (1, 2, 3))
        for records in ([upsert(1, "a", 1), upsert(2, "b", 2)], [upsert(1, "c", 3), delete(2), upsert(3)]):
            result = (await c.managers[1].append(-1, 5.0, {TB: kv_batch(records)}))[TB]
            assert result.error is None
        answer = await lookup(c, 1, key(1), key(2), key(3))  # read-your-writes right after the ack
        assert answer.error is None and answer.values == [row(1, "c", 3), None, row(3, "n", 0)]
        leo = c.log_managers[1].get(TB).log_end_offset
        await wait_until(lambda: all(c.log_managers[s].get(TB).high_watermark == leo for s in (1, 2, 3)))
        await all_applied(c, (1, 2, 3))
        expected = {key(1): row(1, "c", 3), key(3): row(3, "n", 0)}
        for s in (1, 2, 3):
            assert kv_contents(kv_of(c, s)) == expected == replay(c.log_managers[s].get(TB), leo)
        follower = await lookup(c, 2, key(1))
        assert follower.error is not None and follower.error.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    finally:
        await c.close()


async def test_a_lookup_waits_until_the_kv_applied_the_hw_it_arrived_with(clock, tmp_path: Path) -> None:
    c = ReplicaCluster(1, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, (1,), MIN1)
        await c.managers[1].append(1, 5.0, {TB: kv_batch([upsert(5, "x", 5)])})
        kv, log = kv_of(c, 1), c.log_managers[1].get(TB)
        assert kv.applied_offset < log.high_watermark  # the apply task has not run yet: the row is not in RocksDB
        answer = await lookup(c, 1, key(5))
        assert answer.error is None and answer.values == [row(5, "x", 5)]  # it waited for the apply
        assert answer.applied_offset >= 1
    finally:
        await c.close()


async def test_a_lookup_answers_kv_not_ready_when_the_apply_does_not_catch_up_in_time(clock, tmp_path) -> None:
    c = ReplicaCluster(1, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, (1,), MIN1)
        c.managers[1].kv._apply_round = lambda tb: None  # the apply makes no progress
        await c.managers[1].append(1, 5.0, {TB: kv_batch([upsert(5)])})
        answer = await lookup(c, 1, key(5), timeout_s=0.1)
        assert answer.error is not None and answer.error.code is ErrorCode.KV_NOT_READY
        assert answer.values == []  # not a stale "absent"
    finally:
        await c.close()


async def test_a_new_leader_serves_lookups_only_once_its_hw_reached_its_epoch_start(clock, tmp_path) -> None:
    """Server 1 followed server 2 and holds changes 2 acknowledged, but the HW it learned lags them. Elected
    leader with server 2 still in its ISR, it must not answer from its KV (which lacks them) until its HW
    reaches the end of its log as elected (the start of its epoch): KV_NOT_READY, then the new rows."""
    c = ReplicaCluster(1, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        c.coordinator.state[TB] = LeaderAndIsr(2, 0, (1, 2), c.coordinator_epoch, 0)
        await c.notify(TB, (1, 2))  # follower of 2, which does not answer
        m = c.managers[1]
        await m.fetchers.remove_buckets([TB])
        changelog = _changelog_of([upsert(1, "old", 1)], [upsert(1, "new", 2), upsert(2, "two", 2)])
        m.replica(TB).append_as_follower(changelog, leader_hw=1)  # only the first change known committed
        await all_applied(c, (1,))
        assert kv_contents(kv_of(c, 1)) == {key(1): row(1, "old", 1)}
        c.coordinator.state[TB] = LeaderAndIsr(1, 1, (1, 2), c.coordinator_epoch, 1)
        await c.notify(TB, (1, 2))
        replica = m.replica(TB)
        assert replica.is_leader and replica.leader_epoch_start_offset == 3 and replica.high_watermark == 1
        stale = await lookup(c, 1, key(1), key(2), timeout_s=0.1)
        assert stale.error is not None and stale.error.code is ErrorCode.KV_NOT_READY  # never the old row
        waiting = asyncio.ensure_future(lookup(c, 1, key(1), key(2)))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        follower = HandFetches(m, 2)
        await follower.open({TB: (3, 1)})  # server 2 caught up: the HW reaches 3
        await follower.next()  # (and it confirms server 1 leads at epoch 1: docs/primary-key-tables.md §1.5)
        answer = await waiting
        assert answer.error is None and answer.values == [row(1, "new", 2), row(2, "two", 2)]
    finally:
        await c.close()


def _changelog_of(*requests: list) -> bytes:
    """Changelog batches (epoch 0) as a leader wrote them for ``requests``, read from a scratch log."""
    with tempfile.TemporaryDirectory() as d:
        log = LogTablet.open(Path(d) / "7-0", TB, CONFIG)
        log.holds_changelog = True
        kv = KvTablet.open(TB, log, TABLE, KvResources(8 << 20))
        kv.become_leader(log)
        for records in requests:
            kv.append_as_leader(log, kv_batch(records), 0)
        data = log.read(0, 1 << 20, log.log_end_offset).records
        kv.close()
        log.close()
        return data


async def test_each_table_takes_its_kind_of_batches_only(clock, tmp_path: Path) -> None:
    c = ReplicaCluster(1, clock, tmp_path)
    log_table = TB._replace(table_id=8)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, (1,), MIN1)
        await c.create(log_table, (1,), MIN1)
        m = c.managers[1]
        plain = (await m.append(1, 5.0, {TB: batch(b"v")}))[TB]
        assert plain.error is not None and plain.error.code is ErrorCode.TABLE_TYPE_MISMATCH
        upserts = (await m.append(1, 5.0, {log_table: kv_batch([upsert(1)])}))[log_table]
        assert upserts.error is not None and upserts.error.code is ErrorCode.TABLE_TYPE_MISMATCH
        changelog = (await m.append(1, 5.0, {log_table: _changelog_of([upsert(1)])}))[log_table]
        assert changelog.error is not None and changelog.error.code is ErrorCode.TABLE_TYPE_MISMATCH
        assert m.replica(TB).log.log_end_offset == m.replica(log_table).log.log_end_offset == 0
        assert (await m.list_offsets([ListOffsetsRequest(log_table, OffsetSpec.LATEST)]))[log_table].kv is None
        bad_key = (await m.append(1, 5.0, {TB: kv_batch([(b"\x01", upsert(1)[1])])}))[TB]
        assert bad_key.error is not None and bad_key.error.code is ErrorCode.INVALID_ROW
        assert "record 0" in bad_key.error.message
        assert m.replica(TB).log.log_end_offset == 0  # nothing written
        on_log_table = await lookup(c, 1, b"\x00" * 8, tb=log_table)
        assert on_log_table.error is not None and on_log_table.error.code is ErrorCode.TABLE_TYPE_MISMATCH
        malformed = await lookup(c, 1, b"\x00")
        assert malformed.error is not None and malformed.error.code is ErrorCode.INVALID_ROW
    finally:
        await c.close()


async def test_the_kv_lives_and_dies_with_its_replica(clock, tmp_path: Path) -> None:
    c = ReplicaCluster(1, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, (1,), MIN1)
        await c.managers[1].append(1, 5.0, {TB: kv_batch([upsert(1, "a", 1)])})
        await all_applied(c, (1,))
        await c.kill(1)  # clean stop: the KV is closed with its log
        m = c.start_server(1)
        await c.notify(TB, (1,), MIN1)
        assert kv_contents(kv_of(c, 1)) == {key(1): row(1, "a", 1)} and kv_of(c, 1).rebuilds == 0
        latest = (await m.list_offsets([ListOffsetsRequest(TB, OffsetSpec.LATEST)]))[TB]  # (table describe)
        assert latest.kv is not None and latest.kv.rows >= 1 and latest.kv.size_bytes >= 0
        kv_dir = Path(m.replica(TB).log.dir) / "kv"
        assert kv_dir.is_dir()
        kv = kv_of(c, 1)
        await m.stop_replicas(c.coordinator_epoch, [StopReplicaItem(TB, delete=True)])
        assert kv.closed and not kv_dir.exists() and not kv_dir.parent.exists()
    finally:
        await c.close()


async def test_answers_stay_within_their_byte_budget(clock, tmp_path: Path, monkeypatch) -> None:
    from fluss_py.replica import kv_reads

    c = ReplicaCluster(1, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, (1,), MIN1)
        await c.managers[1].append(1, 5.0, {TB: kv_batch([upsert(i, "x" * 40) for i in range(4)])})
        monkeypatch.setattr(kv_reads, "MAX_ANSWER_BYTES", 100)  # two rows of ~60 bytes
        too_many = await lookup(c, 1, *(key(i) for i in range(4)))
        assert too_many.error is not None and too_many.error.code is ErrorCode.INVALID_REQUEST
        assert (await lookup(c, 1, key(0))).values == [row(0, "x" * 40, 0)]
        m = c.managers[1]
        page = await KvReads(m, m.kv).scan(TB, None, 0, 5.0)
        assert len(page.rows) == 1 and page.more  # cut by the budget, not by max_rows
    finally:
        await c.close()
