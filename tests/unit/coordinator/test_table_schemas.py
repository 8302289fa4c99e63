"""A table's schema on the coordinator (docs/primary-key-tables.md §2) against the in-memory ZooKeeper: CreateTable
stores it in the table node and tells the servers; AddColumn adds a version there; every refusal writes nothing;
a new leader loads the schema; a schema that does not check in a stored node costs only its table."""

import json

import pytest

from fluss_py.coordinator.channel import NOTIFY, UPDATE
from fluss_py.coordinator.dynamic_config import DynamicConfigManager
from fluss_py.coordinator.events import AddColumn, AlterConfig, AlterTableBuckets, CreateTable
from fluss_py.coordinator.service import CoordinatorServicer
from fluss_py.coordinator.table_alter import TableAlter, plan_add_column
from fluss_py.coordinator.tables import TableRegistration
from fluss_py.errors import ConfigError, ErrorCode, InvalidConfigError, InvalidRequestError, TableNotExistError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.schema.schema import Column, parse_column, parse_schema
from fluss_py.types import TablePath
from fluss_py.zk.paths import DynamicConfigZNode, TableZNode

from . import test_processor
from .fakes import RecordingLeader
from .harness import ROOT, Harness

T = test_processor.T
h = test_processor.h  # a started TableProcessor, three live servers
NODE = TableZNode.path(ROOT, T.database, T.table)
PK = parse_schema("id BIGINT, name STRING, v BIGINT NOT NULL, ts TIMESTAMP(3)", primary_key="id")
VERSIONED = {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "v"}


class ConfigZk:
    """The harness's in-memory ZooKeeper with what DynamicConfigManager also calls (ensure_path)."""

    def __init__(self, zk) -> None:
        self._zk = zk
        self.root = zk.root

    def __getattr__(self, name):
        return getattr(self._zk, name)

    async def ensure_path(self, path: str) -> None:
        self._zk.ensure(path)


def _stored(h) -> dict:
    return json.loads(h.zk.data(NODE))


async def test_create_stores_the_schema_in_the_table_node_and_tells_every_server(h):
    table_id = await h.proc.create_table(CreateTable(T, 2, 3, dict(VERSIONED), schema=PK))
    await h.drain()
    stored = _stored(h)
    assert stored["schema"] == {
        "versions": [{"schema_id": 1, "columns": [
            {"name": "id", "type": "BIGINT", "nullable": False},
            {"name": "name", "type": "STRING", "nullable": True},
            {"name": "v", "type": "BIGINT", "nullable": False},
            {"name": "ts", "type": "TIMESTAMP(3)", "nullable": True},
        ]}],
        "primary_key": ["id"], "bucket_key": [],
    }  # fmt: skip
    assert stored["properties"] == {**VERSIONED, "table.log.ttl": "0", "table.log.retention-bytes": "-1"}
    for s in (1, 2, 3):
        (notify,) = h.gateway.of(NOTIFY, s)
        assert convert.schema_from_pb(notify.tables[0].descriptor.schema) == PK
        update = h.gateway.of(UPDATE, s)[-1]
        assert convert.schema_from_pb(update.metadata.tables[0].info.descriptor.schema) == PK
    assert h.proc.view.tables[table_id].schema == PK


async def test_a_primary_key_table_keeps_its_whole_changelog(h):
    """Its log is the source of truth of every replica's KV: retention is off in its own properties (which
    beat the servers' and the cluster's defaults) and no table-level dynamic entry may turn it on."""
    table_id = await h.proc.create_table(CreateTable(T, 1, 3, {"table.log.ttl": "0"}, schema=PK))
    kept = {"table.log.ttl": "0", "table.log.retention-bytes": "-1"}
    assert _stored(h)["properties"] == kept and h.proc.view.tables[table_id].properties == kept
    await h.proc.create_table(CreateTable(TablePath("fluss", "logs"), 1, 3, schema=parse_schema("a INT")))
    assert "table.log.ttl" not in h.proc.view.tables[h.proc.view.by_path[TablePath("fluss", "logs")]].properties

    zk = ConfigZk(h.zk)
    manager = DynamicConfigManager(zk, h.ctx, h.proc.view, lambda _entries: None)
    for change in ({"table.log.ttl": "1h"}, {"table.log.retention-bytes": "10GB"}):
        with pytest.raises(InvalidConfigError, match="whole changelog"):
            await manager.alter(AlterConfig("table", "fluss.orders", change, []))
    assert await zk.get(DynamicConfigZNode.path(ROOT, "table", str(table_id))) is None
    await manager.alter(AlterConfig("table", "fluss.orders", {"min.insync.replicas": "2"}, []))  # others as before
    await manager.alter(AlterConfig("table", "fluss.logs", {"table.log.ttl": "1h"}, []))  # a log table as before


async def test_a_log_table_without_a_schema_keeps_its_node_as_before(h):
    await h.proc.create_table(CreateTable(T, 1, 3))
    await h.drain()
    assert "schema" not in _stored(h)
    assert not h.gateway.of(NOTIFY, 1)[0].tables[0].descriptor.HasField("schema")


@pytest.mark.parametrize(
    "properties, schema, error",
    [
        ({"table.merge-engine": "first_row"}, None, ConfigError),  # no schema: no merge engine
        ({"table.merge-engine": "first_row"}, parse_schema("a INT, b STRING"), ConfigError),  # no primary key
        ({"table.merge-engine": "versioned"}, PK, ConfigError),  # versioned without its column
        ({**VERSIONED, "table.merge-engine.versioned.ver-column": "name"}, PK, ConfigError),  # a STRING
        ({**VERSIONED, "table.merge-engine.versioned.ver-column": "nope"}, PK, ConfigError),  # no such column
        ({"table.merge-engine": "sideways"}, PK, ConfigError),
        ({"table.partition.key": "dt", "table.auto-partition.time-unit": "day"}, PK, InvalidRequestError),
        ({}, PK.add_column(parse_column("c STRING")), InvalidRequestError),  # a create has schema id 1 only
        ({"table.log.ttl": "7d"}, PK, InvalidConfigError),  # a primary-key table keeps its whole changelog
        ({"table.log.retention-bytes": "1GB"}, PK, InvalidConfigError),
    ],
)
async def test_a_refused_create_writes_nothing(h, properties, schema, error):
    before = h.zk.snapshot()
    with pytest.raises(error):
        await h.proc.create_table(CreateTable(T, 2, 3, properties, schema=schema))
    assert h.zk.snapshot() == before and T not in h.proc.view.by_path


async def test_add_column_writes_a_new_version_and_tells_every_server(h):
    table_id = await h.proc.create_table(CreateTable(T, 2, 3, schema=PK))
    await h.drain()
    h.gateway.calls.clear()
    alter = TableAlter(h.proc)
    await alter.add_column(AddColumn(T, parse_column("note STRING")))
    await h.drain()
    schema = h.proc.view.tables[table_id].schema
    assert schema.current.schema_id == 2 and schema.current.names[-1] == "note"
    assert schema.versions[0] == PK.versions[0]  # every version is kept
    stored = _stored(h)["schema"]
    assert [v["schema_id"] for v in stored["versions"]] == [1, 2]
    assert stored["versions"][1]["columns"][-1] == {"name": "note", "type": "STRING", "nullable": True}
    for s in (1, 2, 3):  # the new version reaches every server in UpdateMetadata; no role changes
        update = h.gateway.of(UPDATE, s)[-1]
        assert convert.schema_from_pb(update.metadata.tables[0].info.descriptor.schema) == schema
        assert not h.gateway.of(NOTIFY, s)
    version = h.zk.nodes[NODE][1]
    await alter.add_column(AddColumn(T, parse_column("note STRING")))  # a retry: nothing changes
    assert h.zk.nodes[NODE][1] == version

    # a new leader loads every version
    await h.channel.close()
    h2 = Harness(h.zk, {1: "", 2: "", 3: ""}, h.zk.fence(2))
    await h2.start()
    assert h2.proc.view.tables[table_id].schema == schema
    await TableAlter(h2.proc).add_column(AddColumn(T, parse_column("more INT")))
    assert [v["schema_id"] for v in json.loads(h.zk.data(NODE))["schema"]["versions"]] == [1, 2, 3]
    await h2.channel.close()


async def test_refused_alters_write_nothing(h):
    await h.proc.create_table(CreateTable(T, 2, 3, schema=PK))
    plain = TablePath("fluss", "plain")
    await h.proc.create_table(CreateTable(plain, 2, 3))
    await h.drain()
    alter = TableAlter(h.proc)
    before = h.zk.snapshot()
    int_type = parse_column("x INT").type
    for event, error in (
        (AddColumn(T, Column("more", int_type, nullable=False)), InvalidRequestError),
        (AddColumn(T, parse_column("name INT")), InvalidRequestError),  # the name is taken (another type)
        (AddColumn(T, Column("bad-name", int_type)), InvalidRequestError),  # as the wire may carry it
        (AddColumn(plain, parse_column("c INT")), InvalidRequestError),  # no schema to add to
        (AddColumn(TablePath("fluss", "nope"), parse_column("c INT")), TableNotExistError),
        (AlterTableBuckets(T, 3), InvalidRequestError),  # a primary-key table never grows
    ):
        with pytest.raises(error):
            await (alter.add_column(event) if isinstance(event, AddColumn) else alter.alter(event))
    assert h.zk.snapshot() == before
    await alter.alter(AlterTableBuckets(T, 2))  # the same count is no change: allowed
    await alter.alter(AlterTableBuckets(plain, 3))  # a log table grows as before
    assert h.proc.view.tables[h.proc.view.by_path[plain]].num_buckets == 3


async def test_an_added_column_that_would_overflow_the_znode_is_refused(h):
    wide = parse_schema(", ".join(f"c{i}_{'x' * 120} STRING" for i in range(1000)))  # ~170 KB a version
    await h.proc.create_table(CreateTable(T, 1, 3, schema=wide))
    alter = TableAlter(h.proc)
    await alter.add_column(AddColumn(T, parse_column("more1 INT")))
    await alter.add_column(AddColumn(T, parse_column("more2 INT")))  # three versions: ~507 KB
    before = h.zk.snapshot()
    with pytest.raises(InvalidRequestError, match="bytes in ZooKeeper"):
        await alter.add_column(AddColumn(T, parse_column("more3 INT")))
    assert h.zk.snapshot() == before and len(_stored(h)["schema"]["versions"]) == 3


def test_plan_add_column_is_pure_and_keeps_the_old_versions():
    info = TableRegistration(7, T, 1, 1, schema=PK)
    grown = plan_add_column(info, parse_column("c DECIMAL(10,2)"))
    assert grown.schema.versions[:1] == PK.versions and str(grown.schema.current.columns[-1].type) == "DECIMAL(10,2)"
    assert plan_add_column(grown, parse_column("c DECIMAL(10,2)")) is grown
    assert info.schema == PK  # untouched


@pytest.mark.parametrize(
    "schema",
    [
        {"versions": []},
        {"versions": [{"schema_id": 1, "columns": [{"name": "a", "type": "WHAT", "nullable": True}]}]},
        {"versions": [{"schema_id": 2, "columns": [{"name": "a", "type": "INT", "nullable": True}]}]},
        {  # a nullable key
            "versions": [{"schema_id": 1, "columns": [{"name": "a", "type": "INT", "nullable": True}]}],
            "primary_key": ["a"],
        },
        "not an object",
        [1, 2],
    ],
)
async def test_a_stored_schema_that_does_not_check_costs_only_its_table(h, schema):
    table_id = await h.proc.create_table(CreateTable(T, 1, 3, schema=PK))
    other = await h.proc.create_table(CreateTable(TablePath("fluss", "other"), 1, 3))
    stored = _stored(h)
    stored["schema"] = schema
    h.zk.nodes[NODE] = (json.dumps(stored).encode(), h.zk.nodes[NODE][1])
    await h.channel.close()
    h2 = Harness(h.zk, {1: "", 2: "", 3: ""}, h.zk.fence(2))
    try:
        assert await h2.proc.load_tables() == 1
        assert other in h2.proc.view.tables and table_id not in h2.proc.view.tables
        assert list(h2.proc.store.unreadable) == [NODE]
    finally:
        await h2.channel.close()


async def test_the_service_converts_the_schema_and_refuses_what_does_not_parse():
    leader = RecordingLeader(lambda event: 7)
    svc = CoordinatorServicer(leader)
    path = convert.table_path_to_pb(T)
    good = common_pb2.TableDescriptor(num_buckets=2, schema=convert.schema_to_pb(PK))
    created = await svc.CreateTable(coordinator_pb2.CreateTableRequest(path=path, descriptor=good), None)
    assert created.table_id == 7 and leader.events[-1].schema == PK
    column = common_pb2.SchemaColumn(name="c", type="WHAT", nullable=True)
    bad = common_pb2.TableDescriptor(schema=common_pb2.TableSchema(versions=[common_pb2.SchemaVersion(
        schema_id=1, columns=[column])]))  # fmt: skip
    refused = await svc.CreateTable(coordinator_pb2.CreateTableRequest(path=path, descriptor=bad), None)
    assert refused.error.code == ErrorCode.INVALID_REQUEST and "WHAT" in refused.error.message
    added = convert.column_to_pb(parse_column("note STRING"))
    await svc.AlterTable(coordinator_pb2.AlterTableRequest(path=path, add_column=added), None)
    assert isinstance(leader.events[-1], AddColumn) and leader.events[-1].column == parse_column("note STRING")
    for request in (
        coordinator_pb2.AlterTableRequest(path=path, num_buckets=4, add_column=added),  # one change per alter
        coordinator_pb2.AlterTableRequest(path=path, add_column=column),
    ):
        assert (await svc.AlterTable(request, None)).error.code == ErrorCode.INVALID_REQUEST
    await svc.AlterTable(coordinator_pb2.AlterTableRequest(path=path, num_buckets=4), None)
    assert isinstance(leader.events[-1], AlterTableBuckets) and len(leader.events) == 3  # nothing else submitted
