"""The rebalance executor's writes: one fenced transaction per step (assignments, leader_isr, the progress
node) and the requests it implies to the tablet servers. Part of ``RebalanceExecutor`` (a mixin: the same
object, on the event loop's task).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fluss_py.coordinator.rebalance.progress import RebalanceProgress
from fluss_py.coordinator.state import ReplicaState
from fluss_py.coordinator.view_store import leader_isr_set_op, node_write_ops
from fluss_py.errors import InvalidRebalancePlanError
from fluss_py.types import LeaderAndIsr, TableBucket
from fluss_py.zk.paths import RebalanceZNode, TableAssignmentZNode
from fluss_py.zk.values import Op, SetOp

log = logging.getLogger(__name__)

Change = tuple[tuple[int, ...], LeaderAndIsr]  # new replicas, new LeaderAndIsr


class RebalanceWrites:
    """ZooKeeper writes and tablet-server requests of ``RebalanceExecutor`` (see the module docstring)."""

    # ---------------------------------------------------------------- ZooKeeper and requests
    async def _read_node_version(self) -> int:
        got = await self._p.store.get(RebalanceZNode.path(self._p.store.root))
        return got[1].version if got else -1

    async def _commit(self, changes: Mapping[TableBucket, Change], progress: RebalanceProgress) -> None:
        """One fenced transaction: the tables' assignments, the buckets' leader_isr and the progress node.
        The view and ``self.progress`` change only once it succeeded."""
        store, view, root = self._p.store, self._p.view, self._p.store.root
        ops: list[Op] = []
        for table_id in sorted({tb.table_id for tb in changes}):
            path = TableAssignmentZNode.path(root, table_id)
            got = await store.get(path)
            if got is None:
                raise InvalidRebalancePlanError(f"table id {table_id} has no assignment node")
            assignment = {tb.bucket: b.replicas for tb, b in view.table_buckets(table_id)}
            assignment.update({tb.bucket: c[0] for tb, c in changes.items() if tb.table_id == table_id})
            ops.append(SetOp(path, TableAssignmentZNode.encode(assignment), got[1].version))
        lai_at: dict[TableBucket, int] = {}
        for tb, (_, lai) in changes.items():
            lai_at[tb] = len(ops)
            ops.append(leader_isr_set_op(root, tb, lai, view.buckets[tb].zk_version))
        data = RebalanceZNode.encode(progress.to_json())
        ops += await node_write_ops(store, RebalanceZNode.path(root), data, self._node_version)
        results = await store.commit(ops)
        self._node_version = getattr(results[-1], "version", 0)
        for tb, (replicas, lai) in changes.items():
            b = view.buckets[tb]
            b.replicas = replicas
            view.set_leader_and_isr(tb, lai)
            b.zk_version = getattr(results[lai_at[tb]], "version", b.zk_version + 1)
        self.progress = progress
        view.adding_replicas = progress.adding_replicas()  # the _tell after a commit names them (throttle)

    def _tell(
        self, batch: Any, changes: Mapping[TableBucket, Change], removed: Mapping[TableBucket, int] | None = None
    ) -> None:
        """NotifyLeaderAndIsr to each changed bucket's replicas, then StopReplica(delete) to removed ones."""
        for tb in changes:
            self._p.notify(batch, tb)
            self._p.refresh_states(tb)
        live = self._p.live()
        for tb, server in (removed or {}).items():
            lai = self._p.view.buckets[tb].leader_and_isr
            if server in live:
                batch.stop_replica(server, tb, lai.leader_epoch if lai else 0, delete=True)
            self._retire(tb, server)
        if changes:
            batch.metadata_delta(live, changes)
        self._p.send(batch)

    def _retire(self, tb: TableBucket, server: int) -> None:
        states, key = self._p.view.replica_states, (tb, server)
        if states.get(key) is ReplicaState.NON_EXISTENT:
            return
        for target in (ReplicaState.OFFLINE, ReplicaState.MIGRATION_STARTED, ReplicaState.NON_EXISTENT):
            states.move(key, target)
