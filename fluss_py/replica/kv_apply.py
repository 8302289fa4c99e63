"""The KV side of the primary-key buckets hosted here: each replica's ``KvTablet`` opened beside its log and
closed with it, and the apply task that moves committed changes into every KV, leader and follower alike
(docs/primary-key-tables.md §1, invariant 2; §4).

The apply task is woken by every HW move (the log tells its manager, which tells ``log_changed``). It applies
one bounded round (``APPLY_ROUND_BYTES`` of the log: one RocksDB ``WriteBatch``) per bucket that is behind, then
gives the loop back before the next round, so a KV replaying a long log never stalls produce, fetch or the
liveness stream. After each round it wakes the lookups waiting for that bucket's applied offset (``wait``).

Failures (docs/primary-key-tables.md §9): a RocksDB call that fails on a disk error (``KvResources.on_error``)
is the failure of the KV's data directory, as a log's (``report_io_error``: the directory's replicas go
offline, their leaderships move). A KV that stops applying for any other reason (a changelog that does not
decode, a broken store, a bug in a round) takes its one replica offline here and reports it (``stop``).
``health`` tells /health and /metrics each KV's state.

Who may call: the ``ReplicaManager`` (``attach`` when it takes a replica, ``detach`` when it stops or loses one,
``role_changed``, ``close_all`` at shutdown), the log change hook (``log_changed``), ``KvReads`` (``wait``);
the task runs ``run``. Everything on the server's one asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from fluss_py.errors import StorageError
from fluss_py.kv.store import KvResources
from fluss_py.kv.store_errors import KvStoreError
from fluss_py.kv.tablet import KvTable, KvTablet
from fluss_py.log.disk_io import report_io_error
from fluss_py.log.tablet import LogTablet
from fluss_py.replica.delayed import wait_futures
from fluss_py.replica.kv_health import KvHealth
from fluss_py.replica.replica import Replica
from fluss_py.schema.schema import TableSchema
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

# One apply round: at most this much of the log and this many changelog records (a round holds the loop
# for ~5 us per record on the benchmark machine: docs/primary-key-tables.md §4)
APPLY_ROUND_BYTES = 64 * 1024
APPLY_ROUND_RECORDS = 512


class KvApplier:
    """Owns the KV resources of the server (shared RocksDB memory), the set of buckets whose KV is behind their
    HW, and the futures of lookups waiting for an applied offset. See the module docstring."""

    def __init__(self, manager: ReplicaManager, replicas: Mapping[TableBucket, Replica], memory_bytes: int) -> None:
        self._rm = manager
        self._replicas = replicas
        self.resources = KvResources(memory_bytes)
        self.resources.on_error = self._store_failed
        self.health = KvHealth()
        self._behind: set[TableBucket] = set()
        self._wakeup = asyncio.Event()
        self._waiters: dict[TableBucket, list[tuple[int, asyncio.Future[None]]]] = {}
        self.rounds = 0  # apply rounds since start
        self.applied_records = 0  # changelog records applied since start
        self.apply_cpu_s = 0.0  # CPU time the rounds took (the loop's thread)
        self.failures = 0  # rounds that raised (a store that failed, a bug)

    # ------------------------------------------------------------ attach / detach
    def attach(self, replica: Replica, schema: TableSchema | None, properties: Mapping[str, str], buckets: int) -> None:
        """Give a replica of a primary-key table its KV (opened, checked against the log: invariant 4), or a
        newer schema to the KV it has. Nothing for a log table. ConfigError for merge-engine properties that
        do not fit the schema (the coordinator refused them at create: a metadata mistake)."""
        if schema is None or not schema.is_primary_key_table:
            if replica.kv is not None:
                log.error("bucket %s: has a KV but its table now has no primary key; keeping it", replica.table_bucket)
            return
        table = KvTable.of(schema, properties, buckets)
        kv = replica.kv
        if kv is not None:
            if len(schema.versions) >= len(kv.table.schema.versions):
                kv.update_table(table)
            return
        replica.log.holds_changelog = True
        try:
            kv = KvTablet.open(replica.table_bucket, replica.log, table, self.resources)
        except StorageError:  # its disk failed (the directory's failure), or its store is broken (stopped)
            raise
        except Exception as e:  # a bug
            log.exception("bucket %s: opening its KV failed", replica.table_bucket)
            self.stop(replica, f"its KV could not be opened: {e!r}")
            raise StorageError(f"bucket {replica.table_bucket}: its KV could not be opened: {e!r}") from e
        replica.kv = kv
        self.health.opened(replica.table_bucket, kv, replica.log)
        if kv.failed is not None:
            self.stop(replica, kv.failed)
            return
        if replica.is_leader:  # (a replica that led before its table's schema reached us)
            kv.become_leader(replica.log)
        self._mark(replica.table_bucket)

    def schema_changed(self, table_id: int, schema: TableSchema) -> None:
        """A newer schema of a hosted table (UpdateMetadata after a column was added)."""
        for tb, replica in self._replicas.items():
            kv = replica.kv
            if tb.table_id == table_id and kv is not None and len(schema.versions) > len(kv.table.schema.versions):
                kv.update_table(KvTable(schema, kv.table.rule, kv.table.num_buckets))

    def detach(self, replica: Replica, *, delete: bool = False, failed: bool = False) -> None:
        """The replica stops here: its KV is closed (``failed``: its disk failed, nothing more is written there;
        ``delete``: its files go too). Lookups waiting on it are answered."""
        kv, replica.kv = replica.kv, None
        tb = replica.table_bucket
        self._behind.discard(tb)
        self.health.forget(tb)
        self.role_changed(tb)
        if kv is None:
            return
        if delete:
            kv.delete()
        elif failed:
            kv.close_without_flush()
        else:
            try:
                kv.close()  # (flushes its memtables)
            except StorageError as e:  # told already: its directory failed, no clean-shutdown marker for it
                log.warning("bucket %s: closing its KV failed: %s", tb, e)

    def close_all(self) -> None:
        """Shutdown: every KV closed cleanly (memtables flushed)."""
        for replica in list(self._replicas.values()):
            if replica.kv is not None:
                self.detach(replica)

    # ------------------------------------------------------------ the apply task
    def log_changed(self, tablet: LogTablet) -> None:
        """A log's offsets changed (the LogManager's notice): its KV may be behind a moved HW."""
        replica = self._replicas.get(tablet.table_bucket)
        kv = replica.kv if replica is not None else None
        if kv is not None and replica.log is tablet and tablet.high_watermark > kv.applied_offset:  # type: ignore[union-attr]
            self._mark(tablet.table_bucket)

    def _mark(self, tb: TableBucket) -> None:
        self._behind.add(tb)
        self._wakeup.set()

    async def run(self) -> None:
        """The apply task (owned by the ReplicaManager): one round per bucket that is behind, a loop turn between
        rounds, until every KV caught up with its HW; then wait for the next HW move."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._behind:
                for tb in list(self._behind):
                    self._apply_round(tb)
                    await asyncio.sleep(0)

    def _apply_round(self, tb: TableBucket) -> None:
        replica = self._replicas.get(tb)
        kv = replica.kv if replica is not None else None
        if kv is None or kv.closed or replica.log.closed:  # type: ignore[union-attr]  (closed: its dir failed)
            self._behind.discard(tb)
            return
        started = time.thread_time()
        try:
            n = kv.apply_committed(replica.log, APPLY_ROUND_BYTES, APPLY_ROUND_RECORDS)  # type: ignore[union-attr]
        except Exception as e:
            self.failures += 1
            if kv.failed is None:
                kv.failed = f"applying failed: {e}" if isinstance(e, StorageError) else f"applying failed: {e!r}"
            if not isinstance(e, StorageError):  # (a store's failure was logged when it was told)
                log.exception("bucket %s: applying committed changes to the KV failed; it stops applying", tb)
            n = 0
        if kv.failed is not None:
            self.stop(replica, kv.failed)  # type: ignore[arg-type]
        self.apply_cpu_s += time.thread_time() - started
        self.rounds += 1
        self.applied_records += n
        if n == 0 or kv.applied_offset >= replica.log.high_watermark:  # type: ignore[union-attr]
            self._behind.discard(tb)
        self._wake(tb, kv.applied_offset)

    # ------------------------------------------------------------ failures
    def _store_failed(self, kv_dir: Path, error: KvStoreError) -> None:
        """``KvResources.on_error``, from inside the failing call: a disk error is the failure of the KV's data
        directory (docs/storage.md §10); whatever the directory did not take offline stops here."""
        replica = next((r for r in self._replicas.values() if Path(r.log.dir) == kv_dir.parent), None)
        log.error("%s %s: RocksDB failed: %s", "bucket" if replica else "KV store",
                  replica.table_bucket if replica else kv_dir, error.rocksdb)  # fmt: skip
        if replica is None:
            return
        if replica.kv is not None and replica.kv.failed is None:
            replica.kv.failed = f"its store failed: {error.message}"
        if error.disk:
            report_io_error(replica.log, error)  # (LogDirs closes the directory's logs at once)
        self.stop(replica, f"its store failed: {error.message}")

    def stop(self, replica: Replica, reason: str) -> None:
        """The KV of ``replica`` stopped applying: the replica goes offline here and is reported (its leadership
        moves), unless its data directory failed (its log is closed), which took it offline already."""
        tb = replica.table_bucket
        if replica.log.closed or self._replicas.get(tb) is not replica or tb in self.health.stopped:
            return
        self.health.stopped[tb] = reason
        log.error("bucket %s: KV stopped applying: %s; the replica goes offline on this server until it restarts",
                  tb, reason)  # fmt: skip
        self._rm.faults.replica_failed(tb, f"KV stopped applying: {reason}")

    def stopped_offline(self) -> dict[TableBucket, str]:
        """Why each KV that stopped here stopped, for the replicas now offline because of it (/health)."""
        offline = self._rm.offline
        return {tb: why for tb, why in self.health.stopped.items() if tb in offline and tb not in self._replicas}

    # ------------------------------------------------------------ waits of lookups
    def _wake(self, tb: TableBucket, applied: int) -> None:
        waiters = self._waiters.get(tb)
        if not waiters:
            return
        keep = []
        for target, future in waiters:
            if target <= applied:
                if not future.done():
                    future.set_result(None)
            elif not future.done():
                keep.append((target, future))
        if keep:
            self._waiters[tb] = keep
        else:
            del self._waiters[tb]

    def role_changed(self, tb: TableBucket) -> None:
        """The replica of ``tb`` changed role or left: its waiting lookups look again at once."""
        for _, future in self._waiters.pop(tb, []):
            if not future.done():
                future.set_result(None)

    async def wait(self, targets: Mapping[TableBucket, int], timeout_s: float) -> None:
        """Wait until each bucket's KV applied up to its target offset, its replica changed role, or
        ``timeout_s`` passed (the caller looks again at what it found)."""
        loop = asyncio.get_running_loop()
        futures = []
        for tb, target in targets.items():
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.setdefault(tb, []).append((target, future))
            futures.append(future)
        try:
            await wait_futures(futures, timeout_s)
        finally:
            for tb in targets:
                self._wake(tb, -1)  # drops the finished and cancelled futures
