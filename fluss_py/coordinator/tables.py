"""The coordinator leader's in-memory view of tables and buckets (no I/O).

``TableRegistration`` is a table's registration (the TableZNode JSON, its schema included:
docs/primary-key-tables.md §2). ``ClusterView`` holds, for every table, its assignment, each bucket's
LeaderAndIsr with the leader_isr znode version it was read or written at, the bucket/replica state tables,
the servers shutting down and the failed replicas. ``view_store.py`` loads it from ZooKeeper and writes its
changes. It is *what the cluster holds*, written by
``TableProcessor``; ``context.CoordinatorContext`` is *who is in it* (fence, databases, live servers), written
by ``handlers.MetadataHandlers`` (docs/control-plane.md §1.1).

Who may call: the event processor's task only (single writer); TableRegistration and validation from anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from fluss_py import config as cfg
from fluss_py.coordinator.state import BucketState, ReplicaState, StateTable
from fluss_py.errors import FlussError, InvalidConfigError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2
from fluss_py.schema.schema import TableSchema
from fluss_py.types import LeaderAndIsr, TableBucket, TablePath

MIN_INSYNC_REPLICAS = cfg.TABLE_MIN_INSYNC_REPLICAS.key


@dataclass(frozen=True, slots=True)
class TableRegistration:
    """A table's registration: what TableZNode stores and TableInfo (pb) carries. ``schema`` None: a log table
    without a schema (opaque key/value records); its node has no "schema" key."""

    table_id: int
    path: TablePath
    num_buckets: int
    replication_factor: int
    properties: Mapping[str, str] = field(default_factory=dict)
    comment: str = ""
    created_ms: int = 0
    schema: TableSchema | None = None

    def registration(self) -> dict[str, Any]:
        """The TableZNode payload (without "version", added by the codec)."""
        reg = {
            "table_id": self.table_id,
            "num_buckets": self.num_buckets,
            "replication_factor": self.replication_factor,
            "properties": dict(self.properties),
            "comment": self.comment,
            "created_ms": self.created_ms,
        }
        if self.schema is not None:
            reg["schema"] = self.schema.to_json()
        return reg

    @classmethod
    def from_registration(cls, path: TablePath, reg: Mapping[str, Any]) -> TableRegistration:
        """Raises ValueError (the node is unreadable, ``unreadable.py``) when the stored schema does not check."""
        schema = None
        if reg.get("schema") is not None:
            try:
                schema = TableSchema.from_json(reg["schema"])
            except FlussError as e:
                raise ValueError(f"schema: {e.message}") from None
        return cls(
            int(reg["table_id"]),
            path,
            int(reg["num_buckets"]),
            int(reg["replication_factor"]),
            {str(k): str(v) for k, v in dict(reg.get("properties", {})).items()},
            str(reg.get("comment", "")),
            int(reg.get("created_ms", 0)),
            schema,
        )

    def to_pb(self) -> common_pb2.TableInfo:
        descriptor = common_pb2.TableDescriptor(
            num_buckets=self.num_buckets,
            replication_factor=self.replication_factor,
            properties=dict(self.properties),
            comment=self.comment,
        )
        if self.schema is not None:
            descriptor.schema.CopyFrom(convert.schema_to_pb(self.schema))
        return common_pb2.TableInfo(
            table_id=self.table_id,
            path=convert.table_path_to_pb(self.path),
            descriptor=descriptor,
            created_ms=self.created_ms,
        )

    def buckets(self) -> list[TableBucket]:
        return [TableBucket(self.table_id, b) for b in range(self.num_buckets)]


def validate_properties(properties: Mapping[str, str], replication_factor: int) -> dict[str, str]:
    """Check table properties before anything is written: every key must be a table option of the config
    registry (e.g. ``log.segment.file-size``, ``table.log.ttl``, ``min.insync.replicas``) and its value in
    that option's range (tablet servers read it so); ``min.insync.replicas`` must also be at most the
    replication factor. A value is at most ``MAX_TABLE_PROPERTY_BYTES`` (1 KiB, UTF-8): values are stored as
    given in the table's znode, and the parsers take any amount of blanks (" " * 2_000_000 + "60s" is 60 s),
    which would make the znode larger than ZooKeeper's 1 MiB limit (the keys are bounded: known options
    only). Raises INVALID_CONFIG naming the key, the value and what is allowed.
    """
    props = {str(k): str(v) for k, v in properties.items()}
    for key, value in props.items():
        if len(key) > 200:  # no option's key is that long; do not echo it whole in the answer
            raise InvalidConfigError(f"unknown table property {key[:100]!r}... (docs/configuration.md)")
        if len(value.encode(errors="replace")) > cfg.MAX_TABLE_PROPERTY_BYTES:
            raise InvalidConfigError(
                f"table property {key[:100]!r}: the value {value[:40]!r}... is longer than "
                f"{cfg.MAX_TABLE_PROPERTY_BYTES} bytes"
            )
    parsed = cfg.Config(cfg.TABLE, props)  # ConfigError (INVALID_CONFIG): unknown key, bad value, out of range
    min_isr = parsed[cfg.TABLE_MIN_INSYNC_REPLICAS]
    if min_isr is not None and min_isr > replication_factor:
        raise InvalidConfigError(
            f"{MIN_INSYNC_REPLICAS}={min_isr} must be between 1 and the replication factor {replication_factor}"
        )
    return props


class FailedReplicas:
    """Replicas that reported a storage failure, indexed by bucket: they count as dead for their bucket until
    their server re-registers. ``on(tb)`` is O(1): elections ask it per bucket, for thousands of buckets."""

    def __init__(self) -> None:
        self._by_bucket: dict[TableBucket, set[int]] = {}

    def add(self, tb: TableBucket, server: int) -> None:
        self._by_bucket.setdefault(tb, set()).add(server)

    def discard(self, tb: TableBucket, server: int) -> None:
        servers = self._by_bucket.get(tb)
        if servers is not None:
            servers.discard(server)
            if not servers:
                del self._by_bucket[tb]

    def forget_server(self, server: int) -> None:
        for tb in [tb for tb, servers in self._by_bucket.items() if server in servers]:
            self.discard(tb, server)

    def on(self, tb: TableBucket) -> set[int]:
        return self._by_bucket.get(tb, _NONE)

    def __contains__(self, item: tuple[TableBucket, int]) -> bool:
        tb, server = item
        return server in self._by_bucket.get(tb, _NONE)

    def __len__(self) -> int:
        return sum(len(s) for s in self._by_bucket.values())

    def clear(self) -> None:
        self._by_bucket.clear()


_NONE: set[int] = set()  # never mutated: what ``FailedReplicas.on`` answers for a bucket without failures


@dataclass
class BucketInfo:
    """One bucket: replicas (preferred leader first), its LeaderAndIsr (None before the first election) and
    the leader_isr znode version that LeaderAndIsr was read or written at (-1: node absent)."""

    replicas: tuple[int, ...]
    leader_and_isr: LeaderAndIsr | None = None
    zk_version: int = -1


LeaderAndIsrHook = Callable[[TableBucket, "LeaderAndIsr | None", LeaderAndIsr], None]


class ClusterView:
    """Tables, assignments and bucket states of the leader. Owned by the event processor's task.

    ``set_leader_and_isr`` is how a bucket's LeaderAndIsr changes once loaded (elections, ISR changes,
    rebalance moves); it tells ``on_leader_and_isr`` (old, new), the console's failover timeline, so the
    timeline costs O(changes) and nothing while the cluster is quiet (docs/console.md).
    """

    def __init__(self) -> None:
        self.tables: dict[int, TableRegistration] = {}
        self.by_path: dict[TablePath, int] = {}
        self.buckets: dict[TableBucket, BucketInfo] = {}
        self.bucket_states: StateTable[TableBucket, BucketState] = StateTable(BucketState.NON_EXISTENT)
        self.replica_states: StateTable[tuple[TableBucket, int], ReplicaState] = StateTable(ReplicaState.NON_EXISTENT)
        self.shutting_down: set[int] = set()
        self.failed_replicas = FailedReplicas()  # reported a storage failure
        # replicas a rebalance move is adding, per bucket: set by the rebalance executor from its progress
        # (durable in ZooKeeper), sent in every BucketLeaderAndIsr (docs/rebalance.md §6)
        self.adding_replicas: dict[TableBucket, tuple[int, ...]] = {}
        # server -> its tag ("permanent-offline", "temporary-offline"): set by the tag room after every load and
        # write of the tags node; nothing new is placed on these servers (docs/rebalance.md §12)
        self.tagged: dict[int, str] = {}
        self._info_pb: dict[int, common_pb2.TableInfo] = {}  # table id -> its TableInfo message (table_info_pb)
        # tb -> (leader_and_isr, replicas, adding, message): the inputs it was built from, compared by identity
        self._bucket_pb: dict[TableBucket, tuple[Any, tuple[int, ...], tuple[int, ...], Any]] = {}
        self._table_pb: dict[int, common_pb2.TableMetadata] = {}  # valid while no bucket_pb of it was rebuilt
        self.on_leader_and_isr: LeaderAndIsrHook | None = None  # told (bucket, old, new) by set_leader_and_isr

    def set_leader_and_isr(self, tb: TableBucket, lai: LeaderAndIsr) -> None:
        """The bucket's new LeaderAndIsr (written to ZooKeeper, or read back from it)."""
        bucket = self.buckets[tb]
        old, bucket.leader_and_isr = bucket.leader_and_isr, lai
        if self.on_leader_and_isr is not None and old is not lai:
            self.on_leader_and_isr(tb, old, lai)

    def is_offline(self, tb: TableBucket) -> bool:
        """The bucket's state is OFFLINE: its leader died and no live ISR member could take over yet."""
        return self.bucket_states.get(tb) is BucketState.OFFLINE

    def placeable(self, registrations: Mapping[int, Any]) -> dict[int, str]:
        """id -> rack of the registered servers new replicas may go to: not shutting down, not tagged."""
        return {s: r.rack for s, r in registrations.items() if s not in self.shutting_down and s not in self.tagged}

    def failed_on(self, tb: TableBucket) -> set[int]:
        """Servers whose replica of ``tb`` failed: they count as dead for ``tb`` until they re-register."""
        return self.failed_replicas.on(tb)

    def table_info_pb(self, table_id: int) -> common_pb2.TableInfo:
        """The table's TableInfo message, built once per table (every NotifyLeaderAndIsr of its buckets
        carries it: 20,000 builds when a server leading a third of 20,000 buckets dies)."""
        pb = self._info_pb.get(table_id)
        if pb is None:
            pb = self._info_pb[table_id] = self.tables[table_id].to_pb()
        return pb

    def table_name(self, table_id: int) -> str | None:
        """``"db.table"`` of a table id (a partition: ``"db.table$name"``), None when the view holds no such
        table; the coordinator's security interceptor names subscribed tables by it (docs/security.md)."""
        info = self.tables.get(table_id)
        return None if info is None else f"{info.path.database}.{info.path.table}"

    def _forget_pb(self, table_id: int) -> None:
        self._info_pb.pop(table_id, None)
        self._table_pb.pop(table_id, None)
        for tb in [tb for tb in self._bucket_pb if tb.table_id == table_id]:
            del self._bucket_pb[tb]

    def clear(self) -> None:
        self._info_pb.clear()
        self._bucket_pb.clear()
        self._table_pb.clear()
        self.tables.clear()
        self.by_path.clear()
        self.buckets.clear()
        self.bucket_states.clear()
        self.replica_states.clear()
        self.shutting_down.clear()
        self.failed_replicas.clear()
        self.adding_replicas.clear()
        self.tagged.clear()

    def add_table(self, info: TableRegistration, assignment: Mapping[int, tuple[int, ...]]) -> None:
        self._forget_pb(info.table_id)
        self.tables[info.table_id] = info
        self.by_path[info.path] = info.table_id
        for b, replicas in assignment.items():
            self.buckets[TableBucket(info.table_id, b)] = BucketInfo(tuple(replicas))

    def remove_table(self, table_id: int) -> TableRegistration | None:
        self._forget_pb(table_id)
        info = self.tables.pop(table_id, None)
        if info is None:
            return None
        self.by_path.pop(info.path, None)
        for tb in info.buckets():
            bucket = self.buckets.pop(tb, None)
            if bucket is not None:
                for server in bucket.replicas:
                    self.replica_states.force((tb, server), ReplicaState.NON_EXISTENT)
            self.bucket_states.force(tb, BucketState.NON_EXISTENT)
        return info

    def table_buckets(self, table_id: int) -> Iterator[tuple[TableBucket, BucketInfo]]:
        info = self.tables[table_id]
        for tb in info.buckets():
            bucket = self.buckets.get(tb)
            if bucket is not None:
                yield tb, bucket

    def buckets_on(self, server: int) -> list[TableBucket]:
        """Buckets with a replica on ``server`` (in table, bucket order)."""
        return sorted(tb for tb, b in self.buckets.items() if server in b.replicas)

    def buckets_led_by(self, server: int) -> list[TableBucket]:
        return sorted(
            tb for tb, b in self.buckets.items() if b.leader_and_isr is not None and b.leader_and_isr.leader == server
        )

    def bucket_pb(self, tb: TableBucket) -> common_pb2.BucketLeaderAndIsr:
        """The bucket's message, rebuilt only when its LeaderAndIsr, replicas or adding replicas are other
        objects than the last build's (all three are immutable: a change assigns a new one). A death at 20,000
        buckets asks for each changed bucket twice (NotifyLeaderAndIsr and the metadata delta) and every
        GetMetadata for every bucket. Callers must not modify the message."""
        bucket = self.buckets[tb]
        lai, replicas, adding = bucket.leader_and_isr, bucket.replicas, self.adding_replicas.get(tb, ())
        memo = self._bucket_pb.get(tb)
        if memo is not None and memo[0] is lai and memo[1] is replicas and memo[2] is adding:
            return memo[3]
        pb = convert.leader_and_isr_to_pb(
            tb, lai or LeaderAndIsr(-1, -1, (), -1, -1), replicas, tuple(r for r in adding if r in replicas)
        )
        self._bucket_pb[tb] = (lai, replicas, adding, pb)
        self._table_pb.pop(tb.table_id, None)
        return pb

    def table_metadata_pb(self, table_id: int) -> common_pb2.TableMetadata:
        """The table's message, kept until one of its buckets' messages is rebuilt (``bucket_pb``): a poll of
        unchanged tables builds nothing. Callers must not modify the message."""
        buckets = [self.bucket_pb(tb) for tb, _ in self.table_buckets(table_id)]
        pb = self._table_pb.get(table_id)
        if pb is None or len(pb.buckets) != len(buckets):
            pb = self._table_pb[table_id] = common_pb2.TableMetadata(info=self.table_info_pb(table_id), buckets=buckets)
        return pb
