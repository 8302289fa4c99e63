"""Every znode of fluss_py, declared once: one small class per node with its path and its codec.

Paths take the cluster root (``zookeeper.root``, default ``/fluss``) as first argument. JSON payloads are
compact UTF-8 JSON carrying ``"version"`` so the format can evolve; ``decode`` tolerates unknown keys.

    <root>/coordinator/servers/server_<seq>              ephemeral-seq  CoordinatorServerZNode
    <root>/coordinator/election/candidate_<seq>          ephemeral-seq  CandidateZNode
    <root>/coordinator/leader                            ephemeral      CoordinatorLeaderZNode
    <root>/coordinator/epoch                             persistent     CoordinatorEpochZNode (plain integer)
    <root>/tabletservers/ids/<id>                        ephemeral      TabletServerZNode
    <root>/metadata/databases/<db>                       persistent     DatabaseZNode
    <root>/metadata/databases/<db>/tables/<table>        persistent     TableZNode
    <root>/metadata/table_seqid                          persistent     TableIdCounterZNode (plain integer)
    <root>/metadata/writer_id                            persistent     WriterIdCounterZNode (plain integer)
    <root>/tabletservers/tables/<table_id>               persistent     TableAssignmentZNode
    <root>/tabletservers/tables/<table_id>/buckets/<b>/leader_isr  persistent  LeaderIsrZNode
    <root>/consumers/<group>/offsets/<table_id>/<bucket> persistent     ConsumerOffsetZNode
    <root>/consumers/<group>/members                     persistent     GroupMembersZNode
    <root>/cluster/rebalance                             persistent     RebalanceZNode
    <root>/cluster/server_tags                           persistent     ServerTagsZNode
    <root>/security/users/<name>                         persistent     UserZNode (salted SCRAM keys)
    <root>/security/acls/<type>:<pattern>:<name>         persistent     AclZNode (the ACLs of one resource)

Who may call: anyone (pure functions, no I/O).
"""

from __future__ import annotations

from typing import Any

from fluss_py.common import dynamic_config
from fluss_py.security_types import (
    MECHANISM,
    Acl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
    ScramCredential,
    checked,
)
from fluss_py.types import CoordinatorLeaderInfo, LeaderAndIsr
from fluss_py.zk.codecs import (
    CoordinatorRegistration,
    TabletServerRegistration,
    dump_json,
    int_decode,
    int_encode,
    load_json,
    versioned_decode,
    versioned_encode,
)


class CoordinatorServerZNode:
    """``<root>/coordinator/servers/server_<seq>``: ephemeral-sequential, one per running coordinator."""

    PREFIX = "server_"

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/coordinator/servers"

    @classmethod
    def prefix_path(cls, root: str) -> str:
        return f"{cls.parent(root)}/{cls.PREFIX}"

    @staticmethod
    def encode(reg: CoordinatorRegistration) -> bytes:
        return dump_json({"version": 1, "server_id": reg.server_id, "host": reg.host, "port": reg.port,
                      "http_port": reg.http_port})  # fmt: skip

    @staticmethod
    def decode(data: bytes) -> CoordinatorRegistration:
        d = load_json(data)
        return CoordinatorRegistration(int(d["server_id"]), str(d["host"]), int(d["port"]), int(d.get("http_port", 0)))


class CandidateZNode:
    """``<root>/coordinator/election/candidate_<seq>``: ephemeral-sequential election candidate.

    Data: the candidate's server id as a plain integer (for operators; the election uses only names).
    """

    PREFIX = "candidate_"

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/coordinator/election"

    @classmethod
    def prefix_path(cls, root: str) -> str:
        return f"{cls.parent(root)}/{cls.PREFIX}"

    encode = staticmethod(int_encode)
    decode = staticmethod(int_decode)


class CoordinatorLeaderZNode:
    """``<root>/coordinator/leader``: ephemeral, the current leader. JSON::

    {"version":1,"server_id":1,"epoch":3,"host":"127.0.0.1","port":9123,"http_port":9124,
     "address":"127.0.0.1:9123","token":"<secret of this term>"}

    ``token`` is drawn by the leader for its term; its requests to tablet servers present it, and it is
    shown nowhere else (docs/peer-trust.md).
    """

    @staticmethod
    def path(root: str) -> str:
        return f"{root}/coordinator/leader"

    @staticmethod
    def encode(info: CoordinatorLeaderInfo) -> bytes:
        return dump_json({"version": 1, "server_id": info.server_id, "epoch": info.epoch, "host": info.host,
                      "port": info.port, "http_port": info.http_port, "address": info.address,
                      "token": info.token})  # fmt: skip

    @staticmethod
    def decode(data: bytes) -> CoordinatorLeaderInfo:
        d = load_json(data)
        return CoordinatorLeaderInfo(
            int(d["server_id"]),
            int(d["epoch"]),
            str(d["host"]),
            int(d["port"]),
            int(d.get("http_port", 0)),
            token=str(d.get("token", "")),
        )


class CoordinatorEpochZNode:
    """``<root>/coordinator/epoch``: persistent plain integer; its *znode version* is the fencing token.

    Created as ``0`` in a new cluster (re-created from the stored metadata when deleted, ``zk/epoch_node.py``);
    each leader bumps it with a version-conditional set that keeps the version equal to the epoch.
    """

    INITIAL = 0

    @staticmethod
    def path(root: str) -> str:
        return f"{root}/coordinator/epoch"

    encode = staticmethod(int_encode)
    decode = staticmethod(int_decode)


class TabletServerZNode:
    """``<root>/tabletservers/ids/<id>``: ephemeral. JSON
    ``{"version":1,"host","port","http_port","rack","registered_ms","incarnation","replica_token"}``."""

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/tabletservers/ids"

    @classmethod
    def path(cls, root: str, server_id: int) -> str:
        return f"{cls.parent(root)}/{server_id}"

    @staticmethod
    def encode(reg: TabletServerRegistration) -> bytes:
        return dump_json({"version": 1, "host": reg.host, "port": reg.port, "http_port": reg.http_port,
                      "rack": reg.rack, "registered_ms": reg.registered_ms,
                      "incarnation": reg.incarnation, "replica_token": reg.replica_token})  # fmt: skip

    @staticmethod
    def decode(data: bytes) -> TabletServerRegistration:
        d = load_json(data)
        return TabletServerRegistration(
            str(d["host"]), int(d["port"]), int(d.get("http_port", 0)), str(d.get("rack", "")),
            int(d.get("registered_ms", 0)), str(d.get("incarnation", "")), str(d.get("replica_token", "")),
        )  # fmt: skip


# ---------------------------------------------------------------- metadata (databases, tables, counters)
class DatabaseZNode:
    """``<root>/metadata/databases/<db>``: persistent. JSON ``{"version":1,"created_ms":...}``."""

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/metadata/databases"

    @classmethod
    def path(cls, root: str, database: str) -> str:
        return f"{cls.parent(root)}/{database}"

    @staticmethod
    def encode(created_ms: int) -> bytes:
        return dump_json({"version": 1, "created_ms": created_ms})

    @staticmethod
    def decode(data: bytes) -> int:
        return int(load_json(data).get("created_ms", 0)) if data else 0


class TableZNode:
    """``<root>/metadata/databases/<db>/tables/<table>``: persistent table registration. JSON
    ``{"version":1,"table_id","num_buckets","replication_factor","properties":{},"comment","created_ms"}``, and
    ``"schema"`` (every version, ``TableSchema.to_json``) for a table with a schema (docs/primary-key-tables.md §2):
    a column added rewrites this node, so the schema changes with the rest of the table in one write."""

    @staticmethod
    def parent(root: str, database: str) -> str:
        return f"{DatabaseZNode.path(root, database)}/tables"

    @classmethod
    def path(cls, root: str, database: str, table: str) -> str:
        return f"{cls.parent(root, database)}/{table}"

    encode = staticmethod(versioned_encode)
    decode = staticmethod(versioned_decode)


class TableIdCounterZNode:
    """``<root>/metadata/table_seqid``: persistent plain integer, the last table id handed out."""

    @staticmethod
    def path(root: str) -> str:
        return f"{root}/metadata/table_seqid"

    encode = staticmethod(int_encode)
    decode = staticmethod(int_decode)


class WriterIdCounterZNode:
    """``<root>/metadata/writer_id``: persistent plain integer, the last idempotent writer id handed out."""

    @staticmethod
    def path(root: str) -> str:
        return f"{root}/metadata/writer_id"

    encode = staticmethod(int_encode)
    decode = staticmethod(int_decode)


# ---------------------------------------------------------------- assignment and per-bucket state
class TableAssignmentZNode:
    """``<root>/tabletservers/tables/<table_id>``: bucket -> replica list (first = preferred leader). JSON
    ``{"version":1,"buckets":{"0":[1,2,3],"1":[2,3,1]}}``."""

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/tabletservers/tables"

    @classmethod
    def path(cls, root: str, table_id: int) -> str:
        return f"{cls.parent(root)}/{table_id}"

    @staticmethod
    def encode(buckets: dict[int, tuple[int, ...]]) -> bytes:
        return dump_json({"version": 1, "buckets": {str(b): list(r) for b, r in sorted(buckets.items())}})

    @staticmethod
    def decode(data: bytes) -> dict[int, tuple[int, ...]]:
        return {int(b): tuple(int(x) for x in r) for b, r in load_json(data)["buckets"].items()}


class LeaderIsrZNode:
    """``<root>/tabletservers/tables/<table_id>/buckets/<bucket>/leader_isr``: persistent. JSON
    ``{"version":1,"leader":1,"leader_epoch":3,"isr":[1,2,3],"coordinator_epoch":5,"bucket_epoch":7}``."""

    @staticmethod
    def path(root: str, table_id: int, bucket: int) -> str:
        return f"{TableAssignmentZNode.path(root, table_id)}/buckets/{bucket}/leader_isr"

    @staticmethod
    def encode(lai: LeaderAndIsr) -> bytes:
        """The bytes ``dump_json`` writes for the record (keys sorted, compact), formatted directly: a death at
        20,000 buckets encodes 20,000 records in the event loop, and ``json.dumps`` costs ~8 us each."""
        isr = ",".join([str(int(r)) for r in lai.isr])
        return (f'{{"bucket_epoch":{int(lai.bucket_epoch)},"coordinator_epoch":{int(lai.coordinator_epoch)},'
                f'"isr":[{isr}],"leader":{int(lai.leader)},"leader_epoch":{int(lai.leader_epoch)},"version":1}}'
                ).encode()  # fmt: skip

    @staticmethod
    def decode(data: bytes) -> LeaderAndIsr:
        d = load_json(data)
        return LeaderAndIsr(
            int(d["leader"]), int(d["leader_epoch"]), tuple(int(x) for x in d["isr"]),
            int(d["coordinator_epoch"]), int(d["bucket_epoch"]),
        )  # fmt: skip


class ConsumerOffsetZNode:
    """``<root>/consumers/<group>/offsets/<table_id>/<bucket>``: persistent committed offset. JSON
    ``{"version":1,"offset":N,"committed_ms":T}``."""

    @staticmethod
    def groups(root: str) -> str:
        return f"{root}/consumers"

    @classmethod
    def group_path(cls, root: str, group: str) -> str:
        return f"{cls.groups(root)}/{group}"

    @classmethod
    def path(cls, root: str, group: str, table_id: int, bucket: int) -> str:
        return f"{cls.group_path(root, group)}/offsets/{table_id}/{bucket}"

    @staticmethod
    def encode(offset: int, committed_ms: int) -> bytes:
        return dump_json({"version": 1, "offset": offset, "committed_ms": committed_ms})

    @staticmethod
    def decode(data: bytes) -> tuple[int, int]:
        d = load_json(data)
        return int(d["offset"]), int(d.get("committed_ms", 0))


class GroupMembersZNode:
    """``<root>/consumers/<group>/members``: persistent, a consumer group's membership, epochs, target and
    ownership (JSON, codec ``GroupMembers.encode/decode`` in coordinator/group_members.py; written only by the
    coordinator leader, fenced; docs/consumer-groups.md)."""

    @staticmethod
    def path(root: str, group: str) -> str:
        return f"{ConsumerOffsetZNode.group_path(root, group)}/members"


class RebalanceZNode:
    """``<root>/cluster/rebalance``: persistent, the current rebalance plan and its progress (JSON object)."""

    @staticmethod
    def path(root: str) -> str:
        return f"{root}/cluster/rebalance"

    encode = staticmethod(versioned_encode)
    decode = staticmethod(versioned_decode)


class ServerTagsZNode:
    """``<root>/cluster/server_tags``: persistent, every tablet server's tag (docs/rebalance.md §12), written only
    by the coordinator leader (fenced, at the version it last read or wrote). JSON ``{"version":1,"tags":{"3":
    {"tag":"permanent-offline","since_ms":...,"by":"operator"|"auto","reason":"..."}}}``; the entries' codec
    (tag names checked) is ``coordinator/server_tags.py``'s ``encode_tags``/``decode_tags``."""

    @staticmethod
    def path(root: str) -> str:
        return f"{root}/cluster/server_tags"

    @staticmethod
    def encode(tags: dict[str, Any]) -> bytes:
        return versioned_encode({"tags": tags})

    @staticmethod
    def decode(data: bytes) -> dict[str, Any]:
        tags = versioned_decode(data).get("tags", {})
        if not isinstance(tags, dict):
            raise ValueError("server tags: expected an object")
        return tags


# ---------------------------------------------------------------- security (docs/security.md)
class UserZNode:
    """``<root>/security/users/<name>``: persistent, one user's salted keys (never a password). JSON
    ``{"version":1,"mechanism":"SCRAM-SHA-256","salt":hex,"iterations":N,"stored_key":hex,"server_key":hex}``."""

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/security/users"

    @classmethod
    def path(cls, root: str, name: str) -> str:
        return f"{cls.parent(root)}/{name}"

    @staticmethod
    def encode(credential: ScramCredential) -> bytes:
        return dump_json(
            {
                "version": 1,
                "mechanism": MECHANISM,
                "salt": credential.salt.hex(),
                "iterations": credential.iterations,
                "stored_key": credential.stored_key.hex(),
                "server_key": credential.server_key.hex(),
            }
        )

    @staticmethod
    def decode(data: bytes) -> ScramCredential:
        d = load_json(data)
        if d.get("mechanism") != MECHANISM:
            raise ValueError(f"unknown mechanism {d.get('mechanism')!r}")
        salt, stored, server = (bytes.fromhex(d[k]) for k in ("salt", "stored_key", "server_key"))
        return checked(ScramCredential(salt, int(d["iterations"]), stored, server))


class AclZNode:
    """``<root>/security/acls/<type>:<pattern>:<name>``: persistent, the ACLs of one resource pattern
    (e.g. ``table:PREFIXED:sales.``). JSON ``{"version":1,"acls":[{"principal","operation","permission"}]}``;
    changed by compare-and-set on the znode version, deleted when its last ACL goes."""

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/security/acls"

    @staticmethod
    def child(resource_type: ResourceType, pattern: PatternType, name: str) -> str:
        return f"{resource_type.value}:{pattern.value}:{name}"

    @classmethod
    def path(cls, root: str, resource_type: ResourceType, pattern: PatternType, name: str) -> str:
        return f"{cls.parent(root)}/{cls.child(resource_type, pattern, name)}"

    @staticmethod
    def parse_child(child: str) -> tuple[ResourceType, PatternType, str]:
        kind, pattern, name = child.split(":", 2)
        return ResourceType(kind), PatternType(pattern), name

    @staticmethod
    def encode(acls: list[Acl]) -> bytes:
        return dump_json(
            {
                "version": 1,
                "acls": [
                    {"principal": a.principal, "operation": a.operation.value, "permission": a.permission.value}
                    for a in acls
                ],
            }
        )

    @classmethod
    def decode(cls, child: str, data: bytes) -> list[Acl]:
        kind, pattern, name = cls.parse_child(child)
        return [
            Acl(e["principal"], kind, pattern, name, Operation(e["operation"]), Permission(e["permission"]))
            for e in load_json(data)["acls"]
        ]


# ---------------------------------------------------------------- dynamic configuration
class DynamicConfigZNode:
    """``<root>/config/cluster``, ``<root>/config/tablet-servers/<id>``, ``<root>/config/tables/<table_id>``:
    persistent, the dynamic overrides of one entity (docs/dynamic-config.md), written by the coordinator
    leader (fenced) after validation. JSON: ``{"version":1,"config":{"replica.lag.time.max.ms":"5s"}}``
    (values as given, already checked against the option registry)."""

    CLUSTER, TABLET_SERVER, TABLE = ENTITY_TYPES = dynamic_config.ENTITY_TYPES  # the rules: common/dynamic_config.py

    @staticmethod
    def parent(root: str) -> str:
        return f"{root}/config"

    @classmethod
    def path(cls, root: str, entity_type: str, name: str = "") -> str:
        if entity_type == cls.CLUSTER:
            return f"{root}/config/cluster"
        if entity_type == cls.TABLET_SERVER:
            return f"{root}/config/tablet-servers/{int(name)}"
        if entity_type == cls.TABLE:
            return f"{root}/config/tables/{int(name)}"
        raise ValueError(f"unknown config entity type {entity_type!r}")

    @staticmethod
    def tables_parent(root: str) -> str:
        return f"{root}/config/tables"

    @staticmethod
    def tablet_servers_parent(root: str) -> str:
        return f"{root}/config/tablet-servers"

    @staticmethod
    def encode(entries: dict[str, str]) -> bytes:
        return dump_json({"version": 1, "config": {str(k): str(v) for k, v in entries.items()}})

    @staticmethod
    def decode(data: bytes) -> dict[str, str]:
        d = load_json(data)
        config = d.get("config", {})
        if not isinstance(config, dict):
            raise ValueError("config must be a JSON object")
        return {str(k): str(v) for k, v in config.items()}


def persistent_parents(root: str) -> list[str]:
    """The persistent container nodes every server ensures at start (creation order)."""
    return [
        CoordinatorServerZNode.parent(root),
        CandidateZNode.parent(root),
        TabletServerZNode.parent(root),
        DatabaseZNode.parent(root),
        TableAssignmentZNode.parent(root),
        UserZNode.parent(root),
        AclZNode.parent(root),
    ]
