"""Every RPC of both services is mapped; the mapping names the right operation and resource."""

import pytest

from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.errors import UnknownTableOrBucketError
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2
from fluss_py.security import acl, operations
from fluss_py.security_types import CLUSTER, Acl, Operation, PatternType, Permission, Resource, ResourceType, table
from fluss_py.types import TablePath

pytestmark = pytest.mark.unit

HEARTBEAT = "/fluss.v1.CoordinatorService/ConsumerHeartbeat"
FETCH = "/fluss.v1.TabletService/FetchLog"


def _methods(module, service: str) -> list[str]:
    desc = module.DESCRIPTOR.services_by_name[service]
    return [f"/fluss.v1.{service}/{m.name}" for m in desc.methods]


def test_every_rpc_is_mapped_and_nothing_else() -> None:
    methods = _methods(tablet_pb2, "TabletService") + _methods(coordinator_pb2, "CoordinatorService")
    assert sorted(methods) == sorted(operations.RULES)


def test_data_path_needs_table_operations() -> None:
    names = {7: "db.t"}.get
    produce = tablet_pb2.ProduceLogRequest(
        buckets=[tablet_pb2.ProduceBucket(table_bucket=common_pb2.TableBucket(table_id=7, bucket=b)) for b in (0, 1)]
    )
    assert operations.required("/fluss.v1.TabletService/ProduceLog", produce, names) == [
        (Operation.WRITE, table("db", "t"))
    ]
    fetch = tablet_pb2.FetchLogRequest(
        replica_id=-1, buckets=[tablet_pb2.FetchBucket(table_bucket=common_pb2.TableBucket(table_id=7))]
    )
    assert operations.required("/fluss.v1.TabletService/FetchLog", fetch, names) == [(Operation.READ, table("db", "t"))]
    fetch.replica_id = 3
    assert operations.required("/fluss.v1.TabletService/FetchLog", fetch, names) == operations.INTERNAL
    # a follower's stream is checked once, before its first message: internal principals only
    assert operations.required("/fluss.v1.TabletService/FetchLogStream", None, names) == operations.INTERNAL
    with pytest.raises(UnknownTableOrBucketError):
        operations.required("/fluss.v1.TabletService/ProduceLog", produce, {}.get)


def test_admin_operations() -> None:
    none = {}.get
    req = coordinator_pb2.ListTablesRequest(database="db")
    need = operations.required("/fluss.v1.CoordinatorService/ListTables", req, none)
    assert need == [(Operation.DESCRIBE, Resource(ResourceType.DATABASE, "db"))]
    req = coordinator_pb2.CreateTableRequest(path=common_pb2.TablePath(database="db", table="t"))
    need = operations.required("/fluss.v1.CoordinatorService/CreateTable", req, none)
    assert need == [(Operation.CREATE, table("db", "t"))]
    need = operations.required(
        "/fluss.v1.CoordinatorService/ListDatabases", coordinator_pb2.ListDatabasesRequest(), none
    )
    assert need == [(Operation.DESCRIBE, CLUSTER)]
    assert operations.required("/fluss.v1.CoordinatorService/AdjustIsr", None, none) == operations.INTERNAL
    assert operations.required("/fluss.v1.Nope/Method", None, none) is None


def test_metadata_for_all_tables_is_filtered_to_what_may_be_described() -> None:
    response = common_pb2.MetadataResponse()
    for name in ("a", "b"):
        response.metadata.tables.add().info.path.CopyFrom(common_pb2.TablePath(database="db", table=name))
    operations.filter_metadata(response, lambda r: r == table("db", "b"))
    assert [t.info.path.table for t in response.metadata.tables] == ["b"]


def _heartbeat(*table_ids: int) -> coordinator_pb2.ConsumerHeartbeatRequest:
    return coordinator_pb2.ConsumerHeartbeatRequest(group="g", subscribed_table_ids=table_ids)


def test_a_heartbeat_needs_the_group_and_describe_on_each_subscribed_table() -> None:
    """The coordinator names table ids from its leader's view (``ClusterView.table_name``), partitions too."""
    view = ClusterView()
    view.add_table(TableRegistration(1, TablePath("db", "events"), 1, 1), {0: (1,)})
    view.add_table(TableRegistration(2, TablePath("db", "events$2026120113"), 1, 1), {0: (1,)})
    assert view.table_name(2) == "db.events$2026120113"
    need = operations.required(HEARTBEAT, _heartbeat(1, 2), view.table_name)
    assert need == [
        (Operation.READ, Resource(ResourceType.GROUP, "g")),
        (Operation.DESCRIBE, table("db", "events")),
        (Operation.DESCRIBE, table("db", "events$2026120113")),
    ]


def test_a_heartbeat_naming_a_table_unknown_to_the_coordinator_still_needs_the_group() -> None:
    """An id the leader's view does not hold names no table: nothing to DESCRIBE (the handler refuses a join
    to it as TABLE_NOT_EXIST and assigns no bucket of it later). A standby knows no table: its handler
    answers NOT_COORDINATOR_LEADER, naming the leader, instead of the call failing in the interceptor."""
    need = operations.required(HEARTBEAT, _heartbeat(1, 9), {1: "db.events"}.get)
    assert need == [(Operation.READ, Resource(ResourceType.GROUP, "g")), (Operation.DESCRIBE, table("db", "events"))]
    standby = operations.required(HEARTBEAT, _heartbeat(1), ClusterView().table_name)
    assert standby == [(Operation.READ, Resource(ResourceType.GROUP, "g"))]


def test_a_fetch_of_a_partition_is_refused_by_a_deny_on_its_table() -> None:
    """The tablet server names a partition's id ``db.payroll$20261201`` (its metadata cache): the check that
    follows must still meet a DENY on ``db.payroll``."""
    literal, allow, deny = PatternType.LITERAL, Permission.ALLOW, Permission.DENY
    acls = [
        Acl("alice", ResourceType.DATABASE, literal, "db", Operation.READ, allow),
        Acl("alice", ResourceType.TABLE, literal, "db.payroll", Operation.READ, deny),
    ]
    fetch = tablet_pb2.FetchLogRequest(
        replica_id=-1, buckets=[tablet_pb2.FetchBucket(table_bucket=common_pb2.TableBucket(table_id=9))]
    )
    [(op, resource)] = operations.required(FETCH, fetch, {9: "db.payroll$20261201"}.get)
    assert (op, resource) == (Operation.READ, table("db", "payroll$20261201"))
    assert not acl.decide(acls, "alice", op, resource)
