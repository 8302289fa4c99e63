"""The KV of a primary-key replica fails (docs/primary-key-tables.md §9), across ReplicaManagers over real logs
and RocksDB: a disk error of a KV takes its data directory offline as a log's does (its replicas reported,
a full disk back with its KVs reopened, a failed fsync never), a KV that stops applying for another reason
takes its one replica offline and reports it, and /health and /metrics say which KV is applying, rebuilding
or stopped and why. The failing RocksDB calls go through ``FailingDb`` (RocksDB's own texts)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import rocksdict

from fluss_py import config as cfg
from fluss_py.kv.store import APPLIED_KEY
from fluss_py.log.dirs import LogDirs
from fluss_py.record.batch import CHANGELOG, RecordBatchBuilder, set_base_offset_and_epoch
from fluss_py.replica.kv_health import KvState
from fluss_py.replica.log_faults import OFFLINE, RECOVERED
from fluss_py.replica.manager import ReplicaManager
from fluss_py.tablet.metrics import render
from fluss_py.tablet.storage_health import hide_table_details, replica_fields
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import TableBucket
from tests.unit.kv.helpers import (
    CORRUPT_BLOCK,
    EIO_WRITE,
    ENOSPC_FSYNC,
    ENOSPC_WRITE,
    SCHEMA,
    fail_store,
    key,
    kv_batch,
    kv_contents,
    replay,
    row,
    upsert,
)
from tests.unit.replica.harness import TB, ReplicaCluster

R3 = (1, 2, 3)
TB2 = TableBucket(TB.table_id + 1, 0)  # (another table: the harness's tables have one bucket)
DIRS_CONFIG = cfg.load_config(cfg.TABLET, None, {"log.dir.recovery-check-interval": "1s", "log.dir.min-free": "0"})


async def _cluster(clock, tmp_path: Path) -> tuple[ReplicaCluster, ReplicaManager, LogDirs]:
    """Three servers; server 2 on a ``LogDirs`` (its data directory can fail) follows TB and TB2."""
    c = ReplicaCluster(3, clock, tmp_path)
    c.schemas[TB.table_id] = c.schemas[TB2.table_id] = SCHEMA
    m, dirs = await c.restart_on_dirs(2, [tmp_path / "server-2"], DIRS_CONFIG)
    for tb in (TB, TB2):
        await c.create(tb, R3)
    return c, m, dirs


async def _write(c: ReplicaCluster, tb: TableBucket, *rows: int) -> None:
    result = (await c.managers[1].append(-1, 5.0, {tb: kv_batch([upsert(i, f"r{i}", i) for i in rows])}))[tb]
    assert result.error is None


async def _applied(m: ReplicaManager, tb: TableBucket, hw: int) -> None:
    def done() -> bool:
        r = m.replica(tb)
        return r is not None and r.kv is not None and r.high_watermark == hw and r.kv.applied_offset == hw

    await wait_until(done, message=f"{tb}'s KV on server {m.server_id} at {hw}")


def _leader_hw(c: ReplicaCluster, tb: TableBucket) -> int:
    return c.managers[1].replica(tb).high_watermark


@pytest.mark.parametrize(
    ("text", "code", "comes_back"),
    [(EIO_WRITE, "EIO", False), (ENOSPC_FSYNC, "ENOSPC", False), (ENOSPC_WRITE, "ENOSPC", True)],
    ids=["EIO", "fsync", "full"],
)
async def test_a_kv_disk_error_is_its_data_directorys_failure(clock, tmp_path, text, code, comes_back) -> None:
    c, m, dirs = await _cluster(clock, tmp_path)
    path = tmp_path / "server-2"
    try:
        await _write(c, TB, 1, 2)
        await _applied(m, TB, _leader_hw(c, TB))
        fail_store(m.replica(TB).kv, write=text)
        await _write(c, TB, 3)  # committed by 1 and 3; server 2's apply of it fails
        await wait_until(lambda: (2, OFFLINE, [TB, TB2]) in c.coordinator.faults, message="the dir's replicas reported")
        failure = dirs.offline[path]
        assert failure.code == code and failure.recoverable is comes_back and "KV store" in failure.reason
        assert m.replica(TB) is None and m.replica(TB2) is None  # every replica of the directory, not only TB
        assert m.offline[TB].startswith(f"data directory {path} failed: ")
        assert m.kv.stopped_offline() == {}  # the directory's failure, not a KV stop
        if not comes_back:
            await asyncio.sleep(2.5)  # two recovery checks
            assert path in dirs.offline and not any(f[1] == RECOVERED for f in c.coordinator.faults)
            return
        # the full disk has room again (the fake's failure is gone with the closed store): back, KV reopened
        await wait_until(lambda: (2, RECOVERED, [TB, TB2]) in c.coordinator.faults, timeout=10)
        for tb in (TB, TB2):
            await c.notify(tb, R3)
        await _write(c, TB, 4)
        await _applied(m, TB, _leader_hw(c, TB))
        kv, log = m.replica(TB).kv, m.replica(TB).log
        assert kv_contents(kv) == replay(log, log.log_end_offset) == {key(i): row(i, f"r{i}", i) for i in (1, 2, 3, 4)}
    finally:
        await c.close()


def _undecodable_changelog(offset: int) -> bytes:
    """A changelog batch at ``offset`` (epoch 0) with a valid CRC whose change does not decode (change type 9):
    impossible from a leader, which validates what it writes; a bug or a memory fault."""
    builder = RecordBatchBuilder(attributes=CHANGELOG)
    builder.append(b"\x09not a change", key(7), 1_000)
    buf = builder.build_buffer()
    set_base_offset_and_epoch(buf, 0, offset, 0)
    return bytes(buf)


async def test_a_changelog_its_kv_cannot_apply_takes_only_that_replica_offline(clock, tmp_path) -> None:
    c, m, dirs = await _cluster(clock, tmp_path)
    try:
        await _write(c, TB, 1)
        await _write(c, TB2, 1)
        await _applied(m, TB, 1)
        await m.fetchers.remove_buckets([TB])  # server 2 is fed by hand from here
        m.replica(TB).append_as_follower(_undecodable_changelog(1), leader_hw=2)
        await wait_until(lambda: (2, OFFLINE, [TB]) in c.coordinator.faults, message="the replica reported")
        assert m.replica(TB) is None and m.offline[TB].startswith("KV stopped applying: changelog at offset 1")
        assert not dirs.offline and m.replica(TB2) is not None  # the directory and its other replicas serve
        await _write(c, TB2, 2)
        await _applied(m, TB2, 2)

        stats = m.stats()
        assert [tb for tb, _ in stats.kv_stopped] == [TB]
        body: dict = {}
        problems = replica_fields(body, m)
        stopped = body["kv_replicas"][str(TB)]
        assert stopped["state"] == "stopped" and stopped["reason"].startswith("changelog at offset 1 does not apply")
        assert body["kv_replicas"][str(TB2)] == {"state": "applying", "applied_offset": 2, "apply_lag": 0}
        assert body["kv_states"] == {"applying": 1, "rebuilding": 0, "stopped": 1}
        assert problems == [f"KV stopped: bucket {TB}: {stopped['reason']}"]
        body["problems"] = problems
        hidden = hide_table_details(body)  # a principal without DESCRIBE_CONFIGS: no bucket named
        assert "kv_replicas" not in hidden and hidden["kv_states"]["stopped"] == 1
        assert str(TB) not in str(hidden) and hidden["problems"][0].startswith("KV stopped (details need")
        text = render(stats).decode()
        assert f'fluss_kv_state{{bucket="{TB.bucket}",table_id="{TB.table_id}"}} 2' in text
        assert f'fluss_kv_state{{bucket="{TB2.bucket}",table_id="{TB2.table_id}"}} 0' in text
        m.check_health()  # the apply task lives on
    finally:
        await c.close()


@pytest.mark.parametrize("failure", ["bug", "corrupt store"])
async def test_a_kv_that_stops_for_another_reason_takes_its_replica_offline(clock, tmp_path, failure) -> None:
    c, m, dirs = await _cluster(clock, tmp_path)
    try:
        await _write(c, TB, 1)
        await _applied(m, TB, 1)
        kv = m.replica(TB).kv
        if failure == "bug":

            def broken(*args, **kwargs):
                raise RuntimeError("a bug in the apply")

            kv.apply_committed = broken
        else:
            fail_store(kv, write=CORRUPT_BLOCK)
        await _write(c, TB, 2)
        await wait_until(lambda: (2, OFFLINE, [TB]) in c.coordinator.faults, message="the replica reported")
        assert m.replica(TB) is None and m.offline[TB].startswith("KV stopped applying: ")
        assert not dirs.offline and m.replica(TB2) is not None and m.kv.failures == 1
        m.check_health()
    finally:
        await c.close()


async def test_a_kv_rebuilding_from_its_log_says_so_until_it_caught_up(clock, tmp_path) -> None:
    c = ReplicaCluster(1, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, (1,), {"min.insync.replicas": "1"})
        await _write(c, TB, 1, 2, 3)
        await _applied(c.managers[1], TB, 3)
        kv_dir = Path(c.managers[1].replica(TB).log.dir) / "kv"
        await c.kill(1)
        db = rocksdict.Rdict(str(kv_dir), rocksdict.Options(raw_mode=True))
        db[APPLIED_KEY] = b"bad"  # its applied offset cannot be read: rebuilt from the log at open
        db.close()
        m = c.start_server(1)
        m.kv._apply_round = lambda tb: m.kv._behind.discard(tb)  # the apply waits
        await c.notify(TB, (1,), {"min.insync.replicas": "1"})
        status = m.stats().buckets[0].kv
        assert status.state is KvState.REBUILDING and status.apply_lag == 3 and status.reason == "from offset 0 to 3"
        assert f'fluss_kv_state{{bucket="{TB.bucket}",table_id="{TB.table_id}"}} 1' in render(m.stats()).decode()
        del m.kv._apply_round
        m.kv.log_changed(m.replica(TB).log)
        await _applied(m, TB, 3)
        status = m.stats().buckets[0].kv
        assert (status.state, status.apply_lag, status.reason) == (KvState.APPLYING, 0, "")
    finally:
        await c.close()


async def test_a_kv_that_cannot_be_opened_takes_its_data_directory_offline(clock, tmp_path) -> None:
    c, m, dirs = await _cluster(clock, tmp_path)
    path = tmp_path / "server-2"
    try:
        await _write(c, TB, 1)
        await _applied(m, TB, 1)
        kv_dir = Path(m.replica(TB).log.dir) / "kv"
        await m.shutdown()
        dirs.shutdown()  # server 2 stops cleanly (its KV closed, its directory unlocked)
        shutil.rmtree(kv_dir)
        kv_dir.write_bytes(b"in the way")  # real RocksDB, really refused: "File exists (os error 17)"
        m, dirs = await c.restart_on_dirs(2, [path], DIRS_CONFIG)
        errors = await c.notify(TB, R3)
        assert errors[2][TB] is not None and errors[2][TB].code.name == "STORAGE_ERROR"
        await wait_until(lambda: (2, OFFLINE, [TB, TB2]) in c.coordinator.faults, message="the dir's replicas reported")
        assert dirs.offline[path].code == "EEXIST" and m.replica(TB) is None and TB in m.offline and TB2 in m.offline
    finally:
        await c.close()
