"""The ClusterView's ZooKeeper side: load it on every leadership, write its changes fenced.

Every write is a transaction ``[check(<root>/coordinator/epoch, fence version), ops...]`` of at most
``max_ops`` operations; a leader_isr set also checks that node's own version (the one the view last
read or wrote), so the view never overwrites a change it has not seen (``docs/control-plane.md`` §4).
A table exists once its TableZNode exists (created last, deleted first); an assignment without one is
debris of a failed create or drop and is deleted on load.

Who may call: the event processor's task only (it owns the view this store updates).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, TypeVar

from fluss_py.coordinator.handlers import MetadataStore
from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.coordinator.unreadable import Unreadable, decode_or_report
from fluss_py.types import LeaderAndIsr, TableBucket, TablePath
from fluss_py.zk.paths import DatabaseZNode, LeaderIsrZNode, TableAssignmentZNode, TableZNode
from fluss_py.zk.values import (
    BadVersionError,
    CreateOp,
    DeleteOp,
    EpochFence,
    EpochFencedError,
    NodeExistsError,
    NoNodeError,
    Op,
    SetOp,
    ZkError,
)

# not __name__: the runbook shows its lines by this name, docs/coordinator-ha.md (the membership lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorEventProcessor")

MAX_OPS_PER_TRANSACTION = 512
"""Bound on one ZooKeeper multi-op (Fluss uses 1024; a leader_isr set is ~150 bytes, far below 1 MB)."""
READ_CONCURRENCY = 64
WRITE_PIPELINE = 8  # leader_isr transactions in flight at once (each up to MAX_OPS_PER_TRANSACTION ops)
LOG_EACH_CHANGE_UP_TO = 32  # larger writes log one summary line at INFO, each bucket at DEBUG

Change = tuple[TableBucket, LeaderAndIsr]
T = TypeVar("T")


def table_decoder(path: TablePath) -> Callable[[bytes], TableRegistration]:
    """How a TableZNode's bytes become the view's registration of ``path``."""
    return lambda data: TableRegistration.from_registration(path, TableZNode.decode(data))


class ViewStore:
    """Loads and persists one leadership's ClusterView. Owns nothing but its references."""

    def __init__(
        self, store: MetadataStore, view: ClusterView, fence: EpochFence, max_ops: int = MAX_OPS_PER_TRANSACTION
    ) -> None:
        self._store = store
        self.root = store.root
        self.view = view
        self.fence = fence
        self.max_ops = max_ops
        self.unreadable: dict[str, str] = {}  # path -> why, from the last load (its table left out)

    # ---------------------------------------------------------------- reads
    async def get(self, path: str) -> tuple[bytes, Any] | None:
        return await self._store.get(path)

    async def exists(self, path: str) -> bool:
        return await self._store.get(path) is not None

    async def children(self, path: str) -> list[str]:
        try:
            return sorted(await self._store.get_children(path))
        except NoNodeError:
            return []

    async def _gather(self, coros: Iterable[Awaitable[Any]]) -> list[Any]:
        pending = list(coros)
        out: list[Any] = []
        for i in range(0, len(pending), READ_CONCURRENCY):
            out.extend(await asyncio.gather(*pending[i : i + READ_CONCURRENCY]))
        return out

    async def load(self) -> None:
        """Rebuild the view from ZooKeeper (batched reads); delete assignment debris.

        A node that does not decode (table, assignment or leader_isr) is logged once at ERROR with its path
        and its table is left out of this leadership (``self.unreadable``); every other table loads. While
        a table node is unreadable its id is unknown, so no assignment is deleted as debris."""
        self.view.clear()
        self.unreadable = {}
        root = self.root
        paths: list[TablePath] = []
        for db in await self.children(DatabaseZNode.parent(root)):
            paths.extend(TablePath(db, t) for t in await self.children(TableZNode.parent(root, db)))
        registrations = await self._gather(self._store.get(TableZNode.path(root, p.database, p.table)) for p in paths)
        infos: list[TableRegistration] = []
        for p, got in zip(paths, registrations, strict=True):
            if got:
                decoded = self._decoded(TableZNode.path(root, p.database, p.table), got[0], table_decoder(p))
                if decoded is not None:
                    infos.append(decoded)
        by_id = {info.table_id: info for info in infos}
        assigned = {int(c) for c in await self.children(TableAssignmentZNode.parent(root)) if c.isdigit()}
        if len(infos) < sum(1 for got in registrations if got):
            log.error("Not deleting assignment debris while a table node is unreadable (its id is unknown)")
        else:
            for table_id in sorted(assigned - set(by_id)):
                await self._delete_debris(table_id)
        assignments = await self._gather(self._store.get(TableAssignmentZNode.path(root, t)) for t in by_id)
        for info, got in zip(by_id.values(), assignments, strict=True):
            if got is None:
                log.error("Table %s (id %d) has no assignment node; ignoring it", info.path, info.table_id)
                continue
            assignment = self._decoded(
                TableAssignmentZNode.path(root, info.table_id), got[0], TableAssignmentZNode.decode
            )
            if assignment is not None:
                self.view.add_table(info, assignment)
        tbs = sorted(self.view.buckets)
        states = await self._gather(self._store.get(LeaderIsrZNode.path(root, tb.table_id, tb.bucket)) for tb in tbs)
        broken: set[int] = set()
        for tb, got in zip(tbs, states, strict=True):
            if got is not None:
                lai = self._decoded(LeaderIsrZNode.path(root, tb.table_id, tb.bucket), got[0], LeaderIsrZNode.decode)
                if lai is None:
                    broken.add(tb.table_id)
                    continue
                self.view.buckets[tb].leader_and_isr = lai
                self.view.buckets[tb].zk_version = got[1].version
        for table_id in sorted(broken):
            self.view.remove_table(table_id)

    def _decoded(self, path: str, data: bytes, decode: Callable[[bytes], T]) -> T | None:
        """Decode one stored node; an unreadable one is logged (its path, what to do) and remembered."""
        got = decode_or_report(path, data, decode)
        if isinstance(got, Unreadable):
            self.unreadable[got.path] = got.reason
            log.error("Unreadable znode %s (%s): its table is left out of this leadership; "
                      "restore or delete the node, then fail the coordinator over", got.path, got.reason)  # fmt: skip
            return None
        return got

    async def _delete_debris(self, table_id: int) -> None:
        base = TableAssignmentZNode.path(self.root, table_id)
        buckets = [int(b) for b in await self.children(f"{base}/buckets") if b.isdigit()]
        with_lai = {b for b in buckets if await self._store.get(LeaderIsrZNode.path(self.root, table_id, b))}
        paths = assignment_subtree(self.root, table_id, buckets, with_lai)
        if not await self.children(base):
            paths = [base]
        try:
            await self.commit(delete_ops(paths))
            log.warning("Deleted the assignment of table id %d: its table node is gone (failed create/drop)", table_id)
        except EpochFencedError:
            raise
        except ZkError as e:
            log.warning("Could not delete the debris of table id %d: %s", table_id, e)

    # ---------------------------------------------------------------- writes
    async def commit(self, ops: list[Op]) -> list[Any]:
        """Fenced transactions of at most ``max_ops`` operations each, in order."""
        results: list[Any] = []
        for i in range(0, len(ops), self.max_ops):
            results.extend(await self._store.commit(ops[i : i + self.max_ops], fence=self.fence))
        return results

    async def write_leader_isr(self, changes: list[Change]) -> list[Change]:
        """Write changed LeaderAndIsr records conditionally, in bounded fenced transactions, up to
        ``WRITE_PIPELINE`` of them in flight at once (one round trip for many chunks: a death or a controlled
        shutdown at 20,000 buckets writes 20,000 nodes).

        Each op is a create (no node yet) or a set at the node version we last saw; chunks touch disjoint
        buckets, so their order does not matter. A chunk that fails is retried op by op: a stale version
        re-reads that bucket (logged; its change is dropped), a missing node means the table is gone.
        EpochFencedError propagates (we are no longer leader) once the chunks that were written are in the
        view. Returns the changes that were written; the view already holds them.
        """
        written: list[Change] = []
        level = logging.INFO if len(changes) <= LOG_EACH_CHANGE_UP_TO else logging.DEBUG
        chunks = [changes[i : i + self.max_ops] for i in range(0, len(changes), self.max_ops)]
        fatal: BaseException | None = None
        for first in range(0, len(chunks), WRITE_PIPELINE):
            window = chunks[first : first + WRITE_PIPELINE]
            outcomes = await asyncio.gather(
                *(
                    self._store.commit([self._lai_op(tb, lai) for tb, lai in chunk], fence=self.fence)
                    for chunk in window
                ),
                return_exceptions=True,
            )
            for chunk, outcome in zip(window, outcomes, strict=True):
                if isinstance(outcome, (BadVersionError, NoNodeError, NodeExistsError)):
                    log.warning("Batched leader_isr write of %d bucket(s) failed (%s); writing one by one",
                                len(chunk), outcome)  # fmt: skip
                    written += await self._write_one_by_one(chunk, level)
                elif isinstance(outcome, BaseException):
                    fatal = fatal or outcome
                else:
                    for (tb, lai), result in zip(chunk, outcome, strict=True):
                        self._apply(tb, lai, result, level)
                        written.append((tb, lai))
            if fatal is not None:
                raise fatal
        if level == logging.DEBUG and written:
            log.info("Wrote %d leader_isr change(s) of %d planned (each at DEBUG)", len(written), len(changes))
        return written

    async def _write_one_by_one(self, chunk: list[Change], level: int) -> list[Change]:
        written: list[Change] = []
        for tb, lai in chunk:
            try:
                (result,) = await self._store.commit([self._lai_op(tb, lai)], fence=self.fence)
            except (BadVersionError, NoNodeError, NodeExistsError) as one:
                log.error("leader_isr of %s changed behind our back (%s); re-reading it", tb, one)
                await self._reread(tb)
                continue
            self._apply(tb, lai, result, level)
            written.append((tb, lai))
        return written

    def _lai_op(self, tb: TableBucket, lai: LeaderAndIsr) -> Op:
        version = self.view.buckets[tb].zk_version
        if version < 0:
            return leader_isr_create_op(self.root, tb, lai)
        return leader_isr_set_op(self.root, tb, lai, version)

    def _apply(self, tb: TableBucket, lai: LeaderAndIsr, result: Any, level: int = logging.INFO) -> None:
        bucket = self.view.buckets[tb]
        self.view.set_leader_and_isr(tb, lai)
        bucket.zk_version = result.version if hasattr(result, "version") else 0
        log.log(level, "Bucket %s: leader %d, leader epoch %d, ISR %s, bucket epoch %d", tb, lai.leader,
                lai.leader_epoch, list(lai.isr), lai.bucket_epoch)  # fmt: skip

    async def _reread(self, tb: TableBucket) -> None:
        got = await self._store.get(LeaderIsrZNode.path(self.root, tb.table_id, tb.bucket))
        bucket = self.view.buckets.get(tb)
        if bucket is None:
            return
        if got is None:
            bucket.leader_and_isr, bucket.zk_version = None, -1
        else:
            self.view.set_leader_and_isr(tb, LeaderIsrZNode.decode(got[0]))
            bucket.zk_version = got[1].version


# ---------------------------------------------------------------- ZooKeeper operations (pure)
def create_table_ops(
    root: str,
    info: TableRegistration,
    assignment: Mapping[int, tuple[int, ...]],
    leaders: Mapping[int, LeaderAndIsr],
) -> tuple[list[Op], Op]:
    """Operations creating a table: (assignment + per-bucket nodes, the table node last).

    The table node is the commit point: a table exists once its TableZNode exists; an assignment
    without one is debris of a failed create and is deleted when a coordinator loads.
    """
    base = TableAssignmentZNode.path(root, info.table_id)
    ops: list[Op] = [CreateOp(base, TableAssignmentZNode.encode(dict(assignment))), CreateOp(f"{base}/buckets")]
    for b in sorted(assignment):
        leader_isr = LeaderIsrZNode.path(root, info.table_id, b)
        ops.append(CreateOp(leader_isr.rsplit("/", 1)[0]))
        if b in leaders:
            ops.append(CreateOp(leader_isr, LeaderIsrZNode.encode(leaders[b])))
    table_node = CreateOp(
        TableZNode.path(root, info.path.database, info.path.table), TableZNode.encode(info.registration())
    )
    return ops, table_node


def assignment_subtree(root: str, table_id: int, buckets: list[int], with_leader_isr: set[int]) -> list[str]:
    """Paths of a table's assignment subtree, children before parents (the order to delete them in)."""
    base = TableAssignmentZNode.path(root, table_id)
    paths: list[str] = []
    for b in buckets:
        if b in with_leader_isr:
            paths.append(LeaderIsrZNode.path(root, table_id, b))
        paths.append(f"{base}/buckets/{b}")
    paths.extend([f"{base}/buckets", base])
    return paths


def leader_isr_set_op(root: str, tb: TableBucket, lai: LeaderAndIsr, zk_version: int) -> SetOp:
    """Conditional set of one bucket's leader_isr: fails unless the node is still at ``zk_version``."""
    return SetOp(LeaderIsrZNode.path(root, tb.table_id, tb.bucket), LeaderIsrZNode.encode(lai), zk_version)


def leader_isr_create_op(root: str, tb: TableBucket, lai: LeaderAndIsr) -> CreateOp:
    return CreateOp(LeaderIsrZNode.path(root, tb.table_id, tb.bucket), LeaderIsrZNode.encode(lai))


def delete_ops(paths: list[str]) -> list[Op]:
    return [DeleteOp(p) for p in paths]


async def node_write_ops(store: Any, path: str, data: bytes, version: int) -> list[Op]:
    """Ops writing one persistent node of the coordinator's own: a set at ``version`` (as last read or written),
    or, at -1 (absent), its create, with its parent's when that is missing too (the rebalance progress node,
    the server tags node)."""
    if version >= 0:
        return [SetOp(path, data, version)]
    parent = path.rsplit("/", 1)[0]
    return ([] if await store.exists(parent) else [CreateOp(parent)]) + [CreateOp(path, data)]
