"""The tablet server's copy of the cluster view, so any server answers a client's GetMetadata.

The coordinator leader sends UpdateMetadata with either the **full** view (live tablet servers, itself,
every table with its buckets' leader/ISR/assignment), which replaces the previous one as a whole (tables
missing from it are gone), or a **delta** numbered on top of a full view (docs/control-plane.md §8): the
tables whose buckets changed, each with its whole info and only those buckets, and the dropped tables. A
delta applies only to the view it names as its base (same coordinator epoch, ``base_version``); one already
covered (its version at or below the view's) changes nothing; any other is refused with "send the full view".
So a server that missed a delta (it restarted, or was away) never serves a view with holes. The service's
``CoordinatorEpochFence`` has already refused stale senders.

The coordinator field of answers comes from the freshest source: the ``coordinator/leader`` znode the
server watches (``observe_coordinator``) when its epoch is at least the view's, else the view's own.

Who may call: the tablet server's loop only (UpdateMetadata handler, GetMetadata handler, leader watch).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from fluss_py.errors import CoordinatorNotAvailableError, FlussError, InvalidRequestError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2
from fluss_py.schema.schema import TableSchema
from fluss_py.types import CoordinatorLeaderInfo, ServerNode, TablePath

log = logging.getLogger(__name__)


class _Unset:
    """A table's schema not decoded yet."""


_UNSET = _Unset()


def table_schema_of(info: common_pb2.TableInfo) -> TableSchema | None:
    """The schema a TableInfo carries (None: a log table without one). The coordinator checked it when it was
    created or altered; a schema that does not check here raises INVALID_REQUEST naming the table."""
    if not info.descriptor.HasField("schema"):
        return None
    try:
        return convert.schema_from_pb(info.descriptor.schema)
    except FlussError as e:
        raise InvalidRequestError(f"table {info.table_id}: its schema does not check: {e.message}") from None


class _Table:
    """One table of the view: its info and its buckets by number; the TableMetadata built from them is kept
    until the next change (a GetMetadata costs nothing per bucket while nothing changes)."""

    __slots__ = ("_built", "_schema", "buckets", "info")

    def __init__(self, info: common_pb2.TableInfo, buckets: Iterable[common_pb2.BucketLeaderAndIsr]) -> None:
        self.info = info
        self.buckets = {b.table_bucket.bucket: b for b in buckets}
        self._built: common_pb2.TableMetadata | None = None
        self._schema: TableSchema | _Unset | None = _UNSET

    def merge(self, tm: common_pb2.TableMetadata) -> None:
        self.info = tm.info
        for b in tm.buckets:
            self.buckets[b.table_bucket.bucket] = b
        self._built = None
        self._schema = _UNSET

    def schema(self) -> TableSchema | None:
        """The table's schema (None: a log table without one), decoded once per info received."""
        if isinstance(self._schema, _Unset):
            self._schema = table_schema_of(self.info)
        return self._schema

    def metadata(self) -> common_pb2.TableMetadata:
        if self._built is None:
            self._built = common_pb2.TableMetadata(
                info=self.info, buckets=[self.buckets[b] for b in sorted(self.buckets)]
            )
        return self._built


class MetadataCache:
    """Owns the cluster view built from the UpdateMetadata requests received, indexed by table path and id."""

    def __init__(self) -> None:
        self._has_view = False
        self._epoch = -1  # coordinator epoch and version of the view
        self._version = -1
        self._tablet_servers: list[common_pb2.ServerNode] = []
        self._coordinator: common_pb2.ServerNode | None = None
        self._tables: dict[int, _Table] = {}
        self._by_path: dict[TablePath, int] = {}
        self._servers: dict[int, ServerNode] = {}
        self._leader: CoordinatorLeaderInfo | None = None
        self.updates = 0
        self.deltas_refused = 0

    # ---------------------------------------------------------------- writers
    def update(self, metadata: common_pb2.ClusterMetadata, version: int = 0) -> None:
        """Replace the whole view with ``metadata`` (a full view, numbered ``version``)."""
        tables = {tm.info.table_id: _Table(tm.info, tm.buckets) for tm in metadata.tables}
        gone = set(self._tables) - set(tables)
        if gone and self._has_view:
            log.info("Tables %s are gone from the cluster view", sorted(gone))
        self._tables = tables
        self._by_path = {convert.table_path_from_pb(t.info.path): tid for tid, t in tables.items()}
        self._set_servers(metadata)
        self._has_view, self._epoch, self._version = True, metadata.coordinator_epoch, version
        self.updates += 1

    def apply(self, request: Any) -> bool:
        """Apply an UpdateMetadataRequest (full or delta); False: a delta this view is not the base of (the
        coordinator must send the full view)."""
        metadata = request.metadata
        if not request.incremental:
            self.update(metadata, request.metadata_version)
            return True
        if not self._has_view or metadata.coordinator_epoch != self._epoch:
            self.deltas_refused += 1
            return False
        if request.metadata_version <= self._version:
            return True  # already in the view (a full view sent after it covered it)
        if request.base_version != self._version:
            self.deltas_refused += 1
            return False
        for table_id in request.removed_table_ids:
            table = self._tables.pop(table_id, None)
            if table is not None:
                self._by_path.pop(convert.table_path_from_pb(table.info.path), None)
                log.info("Table %d is gone from the cluster view", table_id)
        for tm in metadata.tables:
            table = self._tables.get(tm.info.table_id)
            if table is None:
                self._tables[tm.info.table_id] = _Table(tm.info, tm.buckets)
                self._by_path[convert.table_path_from_pb(tm.info.path)] = tm.info.table_id
            else:
                table.merge(tm)
        self._set_servers(metadata)
        self._version = request.metadata_version
        self.updates += 1
        return True

    def _set_servers(self, metadata: common_pb2.ClusterMetadata) -> None:
        self._tablet_servers = list(metadata.tablet_servers)
        self._coordinator = metadata.coordinator if metadata.HasField("coordinator") else None
        self._servers = {s.id: convert.server_node_from_pb(s) for s in metadata.tablet_servers}

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
        t = self._tables.get(table_id)
        return dict(t.info.descriptor.properties) if t is not None else None

    def num_buckets(self, table_id: int) -> int | None:
        t = self._tables.get(table_id)
        return t.info.descriptor.num_buckets if t is not None else None

    def table_schema(self, table_id: int) -> TableSchema | None:
        """The schema of a table in the last view (None: unknown here, or a log table without a schema)."""
        t = self._tables.get(table_id)
        return t.schema() if t is not None else None

    def table_name(self, table_id: int) -> str | None:
        """``"db.table"`` of a table id in the last view (None: unknown here), for authorization."""
        t = self._tables.get(table_id)
        return f"{t.info.path.database}.{t.info.path.table}" if t is not None else None

    def table_count(self) -> int:
        return len(self._tables)

    def assignments(self, table_ids: Iterable[int] | None = None) -> dict[int, dict[int, tuple[int, ...]]]:
        """table id -> bucket -> replicas, of every table in the view (or of ``table_ids`` known here)."""
        ids = list(self._tables) if table_ids is None else [t for t in table_ids if t in self._tables]
        return {t: {b: tuple(p.replicas) for b, p in self._tables[t].buckets.items()} for t in ids}

    def cluster_metadata(self, paths: Iterable[TablePath] = ()) -> common_pb2.ClusterMetadata:
        """The view for a client: every table, or only the asked ones this server knows (a table unknown
        here is left out; clients ask the coordinator leader before concluding it does not exist).
        Raises COORDINATOR_NOT_AVAILABLE before the first UpdateMetadata."""
        if not self._has_view:
            raise CoordinatorNotAvailableError("this tablet server has no metadata from a coordinator leader yet")
        wanted = list(paths)
        ids = [self._by_path[p] for p in wanted if p in self._by_path] if wanted else sorted(self._tables)
        out = common_pb2.ClusterMetadata(
            tablet_servers=self._tablet_servers,
            tables=[self._tables[t].metadata() for t in ids],
            coordinator_epoch=self._epoch,
        )
        leader = self._leader
        if leader is not None and leader.epoch >= self._epoch:
            out.coordinator.CopyFrom(common_pb2.ServerNode(id=leader.server_id, host=leader.host, port=leader.port))
            out.coordinator_epoch = leader.epoch
        elif self._coordinator is not None:
            out.coordinator.CopyFrom(self._coordinator)
        return out
