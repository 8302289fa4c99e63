"""The tablet server's copy of the cluster view, so any server answers a client's GetMetadata.

The coordinator leader sends UpdateMetadata with the **complete** view (live tablet servers, itself, every
table with its buckets' leader/ISR/assignment); each one replaces the previous view as a whole (tables
missing from it are gone). The service's ``CoordinatorEpochFence`` has already refused stale senders.

The coordinator field of answers comes from the freshest source: the ``coordinator/leader`` znode the
server watches (``observe_coordinator``) when its epoch is at least the view's, else the view's own.

Who may call: the tablet server's loop only (UpdateMetadata handler, GetMetadata handler, leader watch).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from fluss_py.errors import CoordinatorNotAvailableError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2
from fluss_py.types import CoordinatorLeaderInfo, ServerNode, TablePath

log = logging.getLogger(__name__)


class MetadataCache:
    """Owns the last full ``ClusterMetadata`` received, indexed by table path and id."""

    def __init__(self) -> None:
        self._view: common_pb2.ClusterMetadata | None = None
        self._by_path: dict[TablePath, common_pb2.TableMetadata] = {}
        self._by_id: dict[int, common_pb2.TableMetadata] = {}
        self._servers: dict[int, ServerNode] = {}
        self._leader: CoordinatorLeaderInfo | None = None
        self.updates = 0

    # ---------------------------------------------------------------- writers
    def update(self, metadata: common_pb2.ClusterMetadata) -> None:
        """Replace the whole view with ``metadata`` (an UpdateMetadata's full cluster view)."""
        by_path: dict[TablePath, common_pb2.TableMetadata] = {}
        by_id: dict[int, common_pb2.TableMetadata] = {}
        for tm in metadata.tables:
            by_path[convert.table_path_from_pb(tm.info.path)] = tm
            by_id[tm.info.table_id] = tm
        gone = set(self._by_id) - set(by_id)
        if gone:
            log.info("Tables %s are gone from the cluster view", sorted(gone))
        self._view, self._by_path, self._by_id = metadata, by_path, by_id
        self._servers = {s.id: convert.server_node_from_pb(s) for s in metadata.tablet_servers}
        self.updates += 1

    def observe_coordinator(self, leader: CoordinatorLeaderInfo | None) -> None:
        """The coordinator leader as the ``coordinator/leader`` znode names it (None: no leader now)."""
        self._leader = leader

    # ---------------------------------------------------------------- readers
    @property
    def servers(self) -> list[ServerNode]:
        """Live tablet servers of the last view."""
        return list(self._servers.values())

    def server(self, server_id: int) -> ServerNode | None:
        return self._servers.get(server_id)

    def table_properties(self, table_id: int) -> dict[str, str] | None:
        tm = self._by_id.get(table_id)
        return dict(tm.info.descriptor.properties) if tm is not None else None

    def table_name(self, table_id: int) -> str | None:
        """``"db.table"`` of a table id in the last view (None: unknown here), for authorization."""
        tm = self._by_id.get(table_id)
        return f"{tm.info.path.database}.{tm.info.path.table}" if tm is not None else None

    def table_count(self) -> int:
        return len(self._by_id)

    def cluster_metadata(self, paths: Iterable[TablePath] = ()) -> common_pb2.ClusterMetadata:
        """The view for a client: every table, or only the asked ones this server knows (a table unknown
        here is left out; clients ask the coordinator leader before concluding it does not exist).
        Raises COORDINATOR_NOT_AVAILABLE before the first UpdateMetadata."""
        if self._view is None:
            raise CoordinatorNotAvailableError("this tablet server has no metadata from a coordinator leader yet")
        wanted = list(paths)
        tables = [self._by_path[p] for p in wanted if p in self._by_path] if wanted else list(self._view.tables)
        out = common_pb2.ClusterMetadata(
            tablet_servers=self._view.tablet_servers,
            tables=tables,
            coordinator_epoch=self._view.coordinator_epoch,
        )
        leader = self._leader
        if leader is not None and leader.epoch >= self._view.coordinator_epoch:
            out.coordinator.CopyFrom(common_pb2.ServerNode(id=leader.server_id, host=leader.host, port=leader.port))
            out.coordinator_epoch = leader.epoch
        elif self._view.HasField("coordinator"):
            out.coordinator.CopyFrom(self._view.coordinator)
        return out
