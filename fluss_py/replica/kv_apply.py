"""The KV side of the primary-key buckets hosted here: each replica's ``KvTablet`` opened beside its log and
closed with it, and the apply task that moves committed changes into every KV, leader and follower alike
(docs/primary-key-tables.md §1, invariant 2; §4).

The apply task is woken by every HW move (the log tells its manager, which tells ``log_changed``). It applies
one bounded round (``APPLY_ROUND_BYTES`` of the log: one RocksDB ``WriteBatch``) per bucket that is behind, then
gives the loop back before the next round, so a KV replaying a long log never stalls produce, fetch or the
liveness stream. After each round it wakes the lookups waiting for that bucket's applied offset (``wait``).

Who may call: the ``ReplicaManager`` (``attach`` when it takes a replica, ``detach`` when it stops or loses one,
``role_changed``, ``close_all`` at shutdown), the log change hook (``log_changed``), ``KvReads`` (``wait``);
the task runs ``run``. Everything on the server's one asyncio loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fluss_py.kv.store import KvResources
from fluss_py.kv.tablet import KvTable, KvTablet
from fluss_py.log.tablet import LogTablet
from fluss_py.replica.delayed import wait_futures
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
        self._behind: set[TableBucket] = set()
        self._wakeup = asyncio.Event()
        self._waiters: dict[TableBucket, list[tuple[int, asyncio.Future[None]]]] = {}
        self.rounds = 0  # apply rounds since start
        self.applied_records = 0  # changelog records applied since start
        self.apply_cpu_s = 0.0  # CPU time the rounds took (the loop's thread)
        self.failures = 0  # rounds that raised (a store that failed)

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
        kv = replica.kv = KvTablet.open(replica.table_bucket, replica.log, table, self.resources)
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
        self.role_changed(tb)
        if kv is None:
            return
        if delete:
            kv.delete()
        elif failed:
            kv.close_without_flush()
        else:
            kv.close()

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
        if kv is None or kv.closed:
            self._behind.discard(tb)
            return
        started = time.thread_time()
        try:
            n = kv.apply_committed(replica.log, APPLY_ROUND_BYTES, APPLY_ROUND_RECORDS)  # type: ignore[union-attr]
        except Exception:
            self.failures += 1
            kv.failed = "its store failed (see the log)"
            log.exception("bucket %s: applying committed changes to the KV failed; it stops applying", tb)
            n = 0
        self.apply_cpu_s += time.thread_time() - started
        self.rounds += 1
        self.applied_records += n
        if n == 0 or kv.applied_offset >= replica.log.high_watermark:  # type: ignore[union-attr]
            self._behind.discard(tb)
        self._wake(tb, kv.applied_offset)

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
