"""Issue 37 acceptance on real processes (docs/rebalance.md §12): a tablet server of a 4-server cluster killed
for good is replaced — after ``server tag N permanent-offline`` or by ``tablet-server.replace-dead-after`` —
until every bucket has 3 replicas in its ISR on the others (racks respected), with every acknowledged record
read back exactly once; temporary-offline moves leaderships off a live server and keeps a new table off it,
also under the next coordinator leader; refused tags leave every znode as it was.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from fluss_py.client import ProducerOptions, SyncAdmin
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.health import fetch_text
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.zk.paths import LeaderIsrZNode, ServerTagsZNode, TableAssignmentZNode

from .replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    SteadyProducer,
    assert_exactly_once_in_order,
    bootstrap,
    consume,
    create_table,
    leader_isr,
    metric_value,
    produce,
    server_name,
)

pytestmark = pytest.mark.fault

RF = 3
RACKS = {1: "a", 2: "b", 3: "c", 4: "c"}
COORDINATOR = {"coordinator.rebalance.auto": "false"}


def four_servers(
    cluster_factory, racks: dict[int, str] | None = None, coordinators: int = 1, **coordinator: str
) -> LocalCluster:
    cluster = cluster_factory(
        coordinators=coordinators,
        tablet_servers=4,
        start=False,
        coordinator_overrides={**COORDINATOR, **coordinator},
        tablet_overrides=FAULT_OVERRIDES,
    )
    for sid, rack in (racks or {}).items():
        cluster.get(server_name(sid)).argv += ["-D", f"tablet-server.rack={rack}"]
    cluster.start(timeout=60)
    return cluster


def fluss(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fluss_py.cli.main", *args, "--dir", str(cluster.directory)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def assignment(zk: ZkView, cluster: LocalCluster, table_id: int) -> dict[int, tuple[int, ...]]:
    data = zk.get_bytes(TableAssignmentZNode.path(cluster.zk_root, table_id))
    assert data is not None
    return TableAssignmentZNode.decode(data)


def healed(zk: ZkView, cluster: LocalCluster, table_ids: list[int], on: set[int]) -> bool:
    """Every bucket: RF distinct replicas, all on ``on``, all in its ISR, led by one of them."""
    for table_id in table_ids:
        for b, replicas in assignment(zk, cluster, table_id).items():
            lai = leader_isr(zk, cluster, TableBucket(table_id, b))
            if len(set(replicas)) != RF or not set(replicas) <= on or lai is None:
                return False
            if sorted(lai.isr) != sorted(replicas) or lai.leader not in replicas:
                return False
    return True


def out_of_isrs(zk: ZkView, cluster: LocalCluster, table_ids: list[int], server: int) -> bool:
    return all(
        server not in leader_isr(zk, cluster, TableBucket(t, b)).isr
        for t in table_ids
        for b in assignment(zk, cluster, t)
    )


def fewest_serving(zk: ZkView, cluster: LocalCluster, table_ids: list[int], dead: int) -> int:
    """The fewest replicas not on ``dead`` that any bucket's ISR holds (I3: never below RF - 1 here)."""
    fewest = RF
    for table_id in table_ids:
        for b in assignment(zk, cluster, table_id):
            lai = leader_isr(zk, cluster, TableBucket(table_id, b))
            fewest = min(fewest, sum(1 for r in lai.isr if r != dead)) if lai is not None else 0
    return fewest


def tags_node(zk: ZkView, cluster: LocalCluster) -> dict:
    data = zk.get_bytes(ServerTagsZNode.path(cluster.zk_root))
    return ServerTagsZNode.decode(data) if data is not None else {}


def check_bucket(cluster: LocalCluster, table: str, bucket: int, sent) -> None:
    mine = [s for s in sent if s.bucket == bucket]
    end = max((s.offset for s in mine if s.offset is not None), default=-1) + 1
    assert_exactly_once_in_order(mine, consume(cluster, table, bucket, end), bucket=bucket)


def write_each(cluster: LocalCluster, table: str, buckets: int, n: int) -> dict[int, list[bytes]]:
    """``n`` records into each bucket of a fresh table (acks=all, idempotent), one at a time."""
    values = {b: [b"%s-%d-%d" % (table.encode(), b, i) for i in range(n)] for b in range(buckets)}
    for b, vs in values.items():
        assert produce(cluster, table, vs, bucket=b) == list(range(n))
    return values


def read_back(cluster: LocalCluster, table: str, values: dict[int, list[bytes]]) -> None:
    """Every record written, once, in order, at its offset."""
    for b, vs in values.items():
        assert consume(cluster, table, b, len(vs)) == list(enumerate(vs)), f"{table} bucket {b}"


def test_a_killed_server_tagged_permanent_offline_is_replaced_under_load(cluster_factory):
    cluster = four_servers(cluster_factory, RACKS)
    big = create_table(cluster, "heal_big", buckets=8, rf=RF)
    small = create_table(cluster, "heal_small", buckets=4, rf=RF)
    before = write_each(cluster, "heal_small", 4, 10)
    options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
    producer = SteadyProducer(
        bootstrap(cluster), f"{DATABASE}.heal_big", options, interval=0.005, bucket_of=lambda seq: seq % 8
    ).start()
    with ZkView(cluster.zookeeper_address) as zk:
        held = sum(1 for t in (big, small) for r in assignment(zk, cluster, t).values() if 3 in r)
        assert held > 0  # server 3 holds replicas of both tables (rack c: one of 3, 4 per bucket)
        producer.wait_acked_after(time.monotonic(), 200, 30)
        cluster.kill(server_name(3))  # kill -9: gone for good
        cluster.wait_until(lambda: out_of_isrs(zk, cluster, [big, small], 3), 30, "server 3 out of every ISR")
        tagged = fluss(cluster, "server", "tag", "3", "permanent-offline")
        assert tagged.returncode == 0, tagged.stderr
        assert "none -> permanent-offline" in tagged.stdout and f"{held} replica(s) to move" in tagged.stdout, tagged
        entry = tags_node(zk, cluster)["3"]
        assert (entry["tag"], entry["by"]) == ("permanent-offline", "operator")
        fewest = RF - 1

        def done() -> bool:
            nonlocal fewest
            fewest = min(fewest, fewest_serving(zk, cluster, [big, small], 3))
            return healed(zk, cluster, [big, small], {1, 2, 4})

        cluster.wait_until(done, 120, lambda: fluss(cluster, "cluster", "servers").stdout)
        assert fewest == RF - 1  # I3: no bucket ever lost a serving replica during the replacement
        for t in (big, small):  # racks: a, b and c (4 took 3's place) for every bucket
            assert all({RACKS[s] for s in r} == {"a", "b", "c"} for r in assignment(zk, cluster, t).values())
        producer.wait_acked_after(time.monotonic(), 100, 30)
        sent = producer.stop()
    assert not [s for s in sent if s.error], [s.error for s in sent if s.error][:3]
    for b in range(8):
        check_bucket(cluster, "heal_big", b, sent)
    read_back(cluster, "heal_small", before)
    servers = json.loads(fluss(cluster, "cluster", "servers", "--json").stdout)
    assert [t["id"] for t in servers["tablet_servers"]] == [1, 2, 4]
    assert servers["down_tablet_servers"] == [{"id": 3, "tag": "permanent-offline", "by": "operator", "replicas": 0}]
    assert servers["replacement"]["status"] == "COMPLETED" and servers["replacement"]["replacing"] == [3]
    assert servers["to_replace"] == 0
    metrics = fetch_text(f"{cluster.get(cluster.wait_for_leader(5)).http_url}/metrics")
    assert metric_value(metrics, "fluss_server_tag", server="3", tag="permanent-offline") == 1.0
    assert "fluss_server_tag_replicas_to_replace 0.0" in metrics
    assert metric_value(metrics, "fluss_tablet_distribution", kind="replicas", server="3") == 0.0


def test_replace_dead_after_restores_the_replication_factor_without_a_tag(cluster_factory):
    cluster = four_servers(cluster_factory, **{"tablet-server.replace-dead-after": "3s"})
    table_id = create_table(cluster, "auto_heal", buckets=6, rf=RF)
    written = write_each(cluster, "auto_heal", 6, 10)
    with ZkView(cluster.zookeeper_address) as zk:
        assert any(4 in r for r in assignment(zk, cluster, table_id).values())
        cluster.kill(server_name(4))
        cluster.wait_until(
            lambda: healed(zk, cluster, [table_id], {1, 2, 3}), 120, lambda: f"healed; tags {tags_node(zk, cluster)}"
        )
        entry = tags_node(zk, cluster)["4"]
        assert entry["tag"] == "permanent-offline" and entry["by"] == "auto", entry
        assert "replace-dead-after" in entry["reason"]
    metrics = fetch_text(f"{cluster.get(cluster.wait_for_leader(5)).http_url}/metrics")
    assert metric_value(metrics, "fluss_server_tags_auto_total") == 1.0
    read_back(cluster, "auto_heal", written)


def znodes(zk: ZkView, cluster: LocalCluster, table_ids: list[int]) -> dict[str, bytes | None]:
    """The nodes a tag could change: the tags node, the tables' assignments and every leader_isr."""
    root = cluster.zk_root
    out = {ServerTagsZNode.path(root): zk.get_bytes(ServerTagsZNode.path(root))}
    for t in table_ids:
        out[TableAssignmentZNode.path(root, t)] = zk.get_bytes(TableAssignmentZNode.path(root, t))
        for b in assignment(zk, cluster, t):
            out[LeaderIsrZNode.path(root, t, b)] = zk.get_bytes(LeaderIsrZNode.path(root, t, b))
    return out


def test_temporary_offline_moves_leaderships_and_refusals_change_nothing(cluster_factory):
    cluster = four_servers(cluster_factory, coordinators=2)
    table_id = create_table(cluster, "maint", buckets=8, rf=RF)
    with ZkView(cluster.zookeeper_address) as zk:

        def led(s: int) -> list[int]:
            return [b for b in range(8) if leader_isr(zk, cluster, TableBucket(table_id, b)).leader == s]

        assert led(2), "server 2 leads buckets before its tag"
        tagged = fluss(cluster, "server", "tag", "2", "temporary-offline")
        assert tagged.returncode == 0 and "none -> temporary-offline" in tagged.stdout, tagged
        cluster.wait_until(lambda: not led(2), 30, "server 2 leads nothing")
        for b, replicas in assignment(zk, cluster, table_id).items():  # still a follower, in every ISR
            assert sorted(leader_isr(zk, cluster, TableBucket(table_id, b)).isr) == sorted(replicas)
        old_leader = cluster.wait_for_leader(15)
        cluster.kill(old_leader)  # the tag is in ZooKeeper: the next coordinator leader reads it
        cluster.wait_for_leader(30, exclude=[old_leader])
        fresh = create_table(cluster, "maint_new", buckets=8, rf=RF)
        assert all(2 not in r for r in assignment(zk, cluster, fresh).values())
        servers = json.loads(fluss(cluster, "cluster", "servers", "--json").stdout)
        assert {t["id"]: t["tag"] for t in servers["tablet_servers"]} == {
            1: "none",
            2: "temporary-offline",
            3: "none",
            4: "none",
        }

        # refusals: an unknown server; a tag leaving a bucket under min ISR (4 dead, 2 tagged: 1 and 3 serve)
        cluster.kill(server_name(4))
        cluster.wait_until(lambda: out_of_isrs(zk, cluster, [table_id, fresh], 4), 30, "4 out of every ISR")
        before = znodes(zk, cluster, [table_id, fresh])
        unknown = fluss(cluster, "server", "tag", "9", "permanent-offline")
        assert unknown.returncode == 1 and "TABLET_SERVER_NOT_EXIST" in unknown.stderr, unknown
        short = fluss(cluster, "server", "tag", "1", "temporary-offline")
        assert short.returncode == 1 and "INVALID_SERVER_TAG" in short.stderr and "min ISR" in short.stderr, short
        bad = fluss(cluster, "server", "tag", "1", "offline")
        assert bad.returncode == 2, bad  # argparse: not one of the tags, nothing sent
        assert znodes(zk, cluster, [table_id, fresh]) == before
        untagged = fluss(cluster, "server", "tag", "2", "none")
        assert untagged.returncode == 0 and tags_node(zk, cluster) == {}, untagged
    with SyncAdmin(bootstrap(cluster), request_timeout=15.0) as admin:
        assert {s.server_id: s.tag for s in admin.describe_server_tags().servers}[2] == "none"
