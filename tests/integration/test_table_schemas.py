"""A table's schema end to end (docs/primary-key-tables.md §2): real ZooKeeper, two coordinators and two tablet
servers as real processes, driven by the ``fluss-py`` CLI.

- ``table create --schema ... --primary-key ... --merge-engine versioned --version-column v`` stores the schema
  in the table's znode (schema id 1, the key columns NOT NULL) with the merge-engine properties and retention
  off (a dynamic ``table.log.ttl`` is refused); ``describe --json`` shows it; every tablet server's metadata
  carries it;
- bad input (unknown type, a key naming no column, a bucket key that is not a prefix, a version column of the
  wrong type, a merge engine on a log table, a NOT NULL added column) is one line and exit 2; a schema that
  gets past the CLI (a raw CreateTable) is refused by the coordinator: INVALID_REQUEST; nothing is written;
- ``table alter --add-column 'note STRING'`` adds schema id 2 in the znode and on every tablet server; an
  existing name or growing a primary-key table's buckets is refused with the znode unchanged;
- kill -9 of the coordinator leader: the successor loads the schema from ZooKeeper (describe shows id 2) and
  adds schema id 3, which reaches the tablet servers.
"""

from __future__ import annotations

import json
import subprocess

import grpc
import pytest

from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, coordinator_pb2_grpc, tablet_pb2_grpc
from fluss_py.schema.schema import TableSchema
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.zkview import ZkView
from fluss_py.zk.paths import DynamicConfigZNode, TableIdCounterZNode, TableZNode
from tests.fault.group_support import cli

pytestmark = pytest.mark.integration

TABLE = "fluss.users"
COLUMNS = "id BIGINT, name STRING, v BIGINT NOT NULL, ts TIMESTAMP(3)"


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _tablet_schema_ids(cluster) -> list[list[int]]:
    """Per tablet server: the schema ids its metadata holds for the table (empty: it does not know it)."""
    ids = []
    for name in cluster.names("tablet-server"):
        with grpc.insecure_channel(cluster.get(name).rpc_address) as channel:
            answer = tablet_pb2_grpc.TabletServiceStub(channel).GetMetadata(common_pb2.MetadataRequest(), timeout=3)
        tables = [t for t in answer.metadata.tables if t.info.path.table == "users"]
        ids.append([v.schema_id for t in tables for v in t.info.descriptor.schema.versions])
    return ids


def test_schema_create_describe_alter_and_a_coordinator_failover(cluster_factory):
    cluster = cluster_factory(coordinators=2, tablet_servers=2)
    leader = cluster.wait_for_leader(30)
    root, node = cluster.zk_root, TableZNode.path(cluster.zk_root, "fluss", "users")
    with ZkView(cluster.zookeeper_address) as zk:
        cluster.wait_until(lambda: cli(cluster, "table", "list").returncode == 0, 30, "the cluster answers")

        def tables_state():
            return zk.children(TableZNode.parent(root, "fluss")), zk.get_bytes(TableIdCounterZNode.path(root))

        before = tables_state()
        for argv, words in (
            (["--schema", "id BIGINT, name VARCHAR"], "VARCHAR"),
            (["--schema", COLUMNS, "--primary-key", "nope"], "'nope'"),
            (["--schema", COLUMNS, "--primary-key", "id,v", "--bucket-key", "v"], "prefix"),
            (
                ["--schema", COLUMNS, "--primary-key", "id", "--merge-engine", "versioned", "--version-column", "name"],
                "INT, BIGINT or TIMESTAMP",
            ),
            (["--schema", COLUMNS, "--merge-engine", "first_row"], "primary-key"),
            (["--primary-key", "id"], "--schema"),
        ):
            refused = cli(cluster, "table", "create", TABLE, *argv)
            assert refused.returncode == 2, (argv, refused.stdout, refused.stderr)
            assert words in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        # past the CLI's own checks, the coordinator refuses a bad schema itself
        column = common_pb2.SchemaColumn(name="id", type="BIGINT", nullable=True)
        twice = common_pb2.TableSchema(versions=[common_pb2.SchemaVersion(schema_id=1, columns=[column])],
                                       primary_key=["id", "id"])  # fmt: skip
        bad = common_pb2.TableDescriptor(num_buckets=1, replication_factor=1, schema=twice)
        request = coordinator_pb2.CreateTableRequest(path=common_pb2.TablePath(database="fluss", table="users"),
                                                     descriptor=bad)  # fmt: skip
        with grpc.insecure_channel(cluster.get(leader).rpc_address) as channel:
            answer = coordinator_pb2_grpc.CoordinatorServiceStub(channel).CreateTable(request, timeout=10)
        assert answer.error.code == ErrorCode.INVALID_REQUEST and "twice" in answer.error.message
        assert tables_state() == before and not zk.exists(node)

        created = json.loads(_ok(cli(
            cluster, "table", "create", TABLE, "--schema", COLUMNS, "--primary-key", "id", "--merge-engine",
            "versioned", "--version-column", "v", "--buckets", "2", "--replication-factor", "2", "--json",
        )))  # fmt: skip
        assert created["created"] and created["primary_key"] == ["id"] and created["schema_id"] == 1
        stored = zk.get_json(node)
        assert stored["schema"]["primary_key"] == ["id"] and [v["schema_id"] for v in stored["schema"]["versions"]] == [
            1
        ]
        assert stored["schema"]["versions"][0]["columns"][0] == {"name": "id", "type": "BIGINT", "nullable": False}
        assert stored["properties"] == {"table.merge-engine": "versioned", "table.log.ttl": "0",
                                        "table.merge-engine.versioned.ver-column": "v",
                                        "table.log.retention-bytes": "-1"}  # fmt: skip
        ttl = cli(cluster, "config", "alter", "--entity", "table", "--name", TABLE, "--set", "table.log.ttl=1h")
        assert ttl.returncode != 0 and "whole changelog" in ttl.stderr, ttl.stdout + ttl.stderr
        assert not zk.exists(DynamicConfigZNode.path(root, "table", str(created["table_id"])))
        described = json.loads(_ok(cli(cluster, "table", "describe", TABLE, "--json")))
        assert (described["schema_id"], described["primary_key"], described["bucket_key"]) == (1, ["id"], ["id"])
        assert (described["merge_engine"], described["version_column"]) == ("versioned", "v")
        assert [c["name"] for c in described["columns"]] == ["id", "name", "v", "ts"]
        assert described["columns"][3]["type"] == "TIMESTAMP(3)"
        people = _ok(cli(cluster, "table", "describe", TABLE))
        assert "schema (id 1): id BIGINT NOT NULL, name STRING, v BIGINT NOT NULL, ts TIMESTAMP(3)" in people
        assert "primary key: id; bucket key: id; merge engine: versioned (version column v)" in people
        cluster.wait_until(lambda: _tablet_schema_ids(cluster) == [[1], [1]], 30, "the tablets know schema 1")

        assert "schema id 2" in _ok(cli(cluster, "table", "alter", TABLE, "--add-column", "note STRING"))
        stored = zk.get_json(node)
        assert [v["schema_id"] for v in stored["schema"]["versions"]] == [1, 2]
        assert stored["schema"]["versions"][1]["columns"][-1] == {"name": "note", "type": "STRING", "nullable": True}
        cluster.wait_until(lambda: _tablet_schema_ids(cluster) == [[1, 2], [1, 2]], 30, "the tablets know schema 2")

        version = zk.get_bytes(node)
        not_null = cli(cluster, "table", "alter", TABLE, "--add-column", "x INT NOT NULL")
        assert not_null.returncode == 2 and "nullable" in not_null.stderr
        taken = cli(cluster, "table", "alter", TABLE, "--add-column", "name INT")
        assert taken.returncode == 1 and "already exists" in taken.stderr, taken.stderr
        grow = cli(cluster, "table", "alter", TABLE, "--buckets", "4")
        assert grow.returncode == 1 and "primary-key table" in grow.stderr, grow.stderr
        assert zk.get_bytes(node) == version

        cluster.kill(leader)  # kill -9
        cluster.wait_for_leader(SESSION_TIMEOUT_S + 30, exclude=[leader])

        def described_id() -> int | None:
            done = cli(cluster, "table", "describe", TABLE, "--json")
            return json.loads(done.stdout)["schema_id"] if done.returncode == 0 else None

        cluster.wait_until(lambda: described_id() == 2, 60, "the new leader serves schema 2")
        cluster.wait_until(lambda: cli(cluster, "table", "alter", TABLE, "--add-column", "more INT").returncode == 0,
                           60, "the new leader adds a column")  # fmt: skip
        assert [v["schema_id"] for v in zk.get_json(node)["schema"]["versions"]] == [1, 2, 3]
        cluster.wait_until(lambda: _tablet_schema_ids(cluster) == [[1, 2, 3]] * 2, 30, "the tablets know schema 3")
        schema = TableSchema.from_json(zk.get_json(node)["schema"])
        assert schema.current.names == ("id", "name", "v", "ts", "note", "more")
