"""Coordinator election and fencing against a real ZooKeeper: the zk/ pieces in-process, then real processes.

In-process tests drive ``ZkClient`` + ``LeaderElection`` with one real ZooKeeper session per candidate (no
mocks) and check the watches on ZooKeeper itself (``wchc``). Process tests start real ``fluss-py
coordinator`` processes through the shared harness and talk gRPC to them.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time

import grpc
import pytest

from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import coordinator_pb2, coordinator_pb2_grpc
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.ports import free_port
from fluss_py.testing.procs import async_wait_until
from fluss_py.testing.zkview import ZkView, parse_wchc
from fluss_py.zk.client import ZkClient
from fluss_py.zk.election import LeaderElection, fence_become_leader
from fluss_py.zk.paths import CandidateZNode, CoordinatorEpochZNode, CoordinatorLeaderZNode, DatabaseZNode
from fluss_py.zk.values import CreateOp, EpochFencedError, NodeExistsError, ZkError

pytestmark = pytest.mark.integration


async def _until(cond, timeout: float, what: str) -> None:
    await async_wait_until(cond, timeout, interval=0.02, message=what)


async def _clients(zookeeper, root: str, n: int) -> list[ZkClient]:
    clients = []
    for _ in range(n):
        c = ZkClient(zookeeper.address, root, session_timeout=SESSION_TIMEOUT_S, connection_timeout=10)
        await c.start()
        clients.append(c)
    await clients[0].ensure_path(CandidateZNode.parent(root))
    return clients


# ---------------------------------------------------------------- in-process, real ZooKeeper
async def test_each_candidate_watches_only_its_predecessor_and_only_the_successor_is_told(zookeeper, zk_root):
    clients = await _clients(zookeeper, zk_root, 4)
    woken: list[int] = []
    elections = [LeaderElection(c, zk_root, i, lambda i=i: woken.append(i)) for i, c in enumerate(clients)]
    try:
        decisions = [await e.check() for e in elections]
        assert [d.leader for d in decisions] == [True, False, False, False]
        assert [d.predecessor for d in decisions[1:]] == [e.candidate for e in elections[:-1]]

        election_dir = CandidateZNode.parent(zk_root)
        watches = parse_wchc(zookeeper.four_letter("wchc"))
        for i, c in enumerate(clients):
            mine = {p for p in watches.get(c.session_id, set()) if p.startswith(election_dir)}
            expected = set() if i == 0 else {f"{election_dir}/{elections[i - 1].candidate}"}
            assert mine == expected, (i, watches)

        await clients[2].close()  # a middle candidate dies: only candidate 3 is told, and re-links to 1
        await _until(lambda: woken == [3], 5, "the successor's predecessor watch")
        await asyncio.sleep(0.2)
        assert woken == [3]
        d3 = await elections[3].check()
        assert d3.predecessor == elections[1].candidate

        await clients[0].close()  # the leader dies: only candidate 1 is told, and wins
        await _until(lambda: woken == [3, 1], 5, "the leader's successor")
        assert (await elections[1].check()).leader
        assert woken == [3, 1]
    finally:
        for c in clients:
            await c.close()


async def test_fence_bumps_the_epoch_and_a_fenced_transaction_writes_nothing(zookeeper, zk_root):
    a, b = await _clients(zookeeper, zk_root, 2)
    ea, eb = LeaderElection(a, zk_root, 1, lambda: None), LeaderElection(b, zk_root, 2, lambda: None)
    try:
        await ea.ensure_candidate()
        await eb.ensure_candidate()
        await a.ensure_path(DatabaseZNode.parent(zk_root))
        first = await fence_become_leader(a, zk_root, ea.candidate_path)
        assert first.epoch == 1
        await a.commit([CreateOp(DatabaseZNode.path(zk_root, "one"))], fence=first)

        second = await fence_become_leader(b, zk_root, eb.candidate_path)
        assert (second.epoch, second.zk_version) == (2, first.zk_version + 1)
        with pytest.raises(EpochFencedError):
            await a.commit([CreateOp(DatabaseZNode.path(zk_root, "two"))], fence=first)
        assert await a.exists(DatabaseZNode.path(zk_root, "two")) is None
        data, _ = await a.get(CoordinatorEpochZNode.path(zk_root))
        assert CoordinatorEpochZNode.decode(data) == 2

        path = ea.candidate_path
        await ea.resign()  # without a candidate, fencing is refused and the epoch stays
        with pytest.raises(EpochFencedError):
            await fence_become_leader(a, zk_root, path)
        data, _ = await a.get(CoordinatorEpochZNode.path(zk_root))
        assert CoordinatorEpochZNode.decode(data) == 2
    finally:
        await a.close()
        await b.close()


async def test_a_fenced_commit_fails_with_its_failing_ops_error_and_only_a_stale_fence_is_fencing(zookeeper, zk_root):
    # ZooKeeper answers RolledBackError for the ops before the failing one, the fence's check included
    (a,) = await _clients(zookeeper, zk_root, 1)
    try:
        await a.ensure_path(DatabaseZNode.parent(zk_root))
        election = LeaderElection(a, zk_root, 1, lambda: None)
        await election.ensure_candidate()
        fence = await fence_become_leader(a, zk_root, election.candidate_path)
        one, two = DatabaseZNode.path(zk_root, "one"), DatabaseZNode.path(zk_root, "two")
        await a.commit([CreateOp(two)], fence=fence)
        with pytest.raises(NodeExistsError, match="two"):
            await a.commit([CreateOp(one), CreateOp(two)], fence=fence)
        with pytest.raises(ZkError, match="BadArguments") as refused:  # a name ZooKeeper cannot store
            await a.commit([CreateOp(one), CreateOp(DatabaseZNode.path(zk_root, "db\n"))], fence=fence)
        assert not isinstance(refused.value, EpochFencedError)
        assert await a.exists(one) is None  # all or nothing
        await a.commit([CreateOp(one)], fence=fence)  # the fence held throughout

        await a.set(CoordinatorEpochZNode.path(zk_root), CoordinatorEpochZNode.encode(fence.epoch + 1))
        with pytest.raises(EpochFencedError):  # really stale, whatever the other ops would do
            await a.commit([CreateOp(two)], fence=fence)
        with pytest.raises(EpochFencedError):
            await a.commit([CreateOp(DatabaseZNode.path(zk_root, "three"))], fence=fence)
        assert await a.exists(DatabaseZNode.path(zk_root, "three")) is None
    finally:
        await a.close()


# ---------------------------------------------------------------- real coordinator processes
SEED_LINES = [
    r"initCoordinatorStandby - Starting coordinator server in standby mode",
    r"CoordinatorLeaderElection - Created candidate node: candidate_\d{10}",
    r"CoordinatorServer - Became coordinator leader with epoch \d+",
    r"initCoordinatorLeader - Starting coordinator leader services",
]


def _stub(cluster, name: str) -> tuple[grpc.Channel, coordinator_pb2_grpc.CoordinatorServiceStub]:
    channel = grpc.insecure_channel(cluster.get(name).rpc_address)
    return channel, coordinator_pb2_grpc.CoordinatorServiceStub(channel)


def test_standby_names_the_leader_and_the_leader_serves_databases(cluster_factory):
    cluster = cluster_factory(coordinators=2, tablet_servers=0)
    leader = cluster.wait_for_leader(15)
    standby = next(n for n in cluster.names("coordinator") if n != leader)
    leader_rec = cluster.get(leader)

    text = cluster.log_text(leader)
    positions = [re.search(p, text) for p in SEED_LINES]
    assert all(positions), text
    assert [m.start() for m in positions] == sorted(m.start() for m in positions)

    channel, stub = _stub(cluster, standby)
    with channel:
        info = stub.GetCoordinatorInfo(coordinator_pb2.GetCoordinatorInfoRequest(), timeout=3)
        assert (info.state, info.leader_id, info.leader_address) == ("Standby", leader_rec.id, leader_rec.rpc_address)
        for call, request in [
            (stub.CreateDatabase, coordinator_pb2.CreateDatabaseRequest(name="x")),
            (stub.ListDatabases, coordinator_pb2.ListDatabasesRequest()),
            (stub.CreateTable, coordinator_pb2.CreateTableRequest()),
            (stub.AllocateWriterId, coordinator_pb2.AllocateWriterIdRequest()),
        ]:
            error = call(request, timeout=3).error
            assert error.code == ErrorCode.NOT_COORDINATOR_LEADER
            assert (error.leader_id, error.leader_address) == (leader_rec.id, leader_rec.rpc_address)

    channel, stub = _stub(cluster, leader)
    with channel:
        assert stub.ListDatabases(coordinator_pb2.ListDatabasesRequest(), timeout=3).databases == ["fluss"]
        assert stub.CreateDatabase(coordinator_pb2.CreateDatabaseRequest(name="db1"), timeout=3).error.code == 0
        again = stub.CreateDatabase(coordinator_pb2.CreateDatabaseRequest(name="db1"), timeout=3)
        assert again.error.code == ErrorCode.DATABASE_ALREADY_EXIST
        assert stub.ListDatabases(coordinator_pb2.ListDatabasesRequest(), timeout=3).databases == ["db1", "fluss"]
        assert stub.DropDatabase(coordinator_pb2.DropDatabaseRequest(name="db1"), timeout=3).error.code == 0
        nameless = stub.CreateTable(coordinator_pb2.CreateTableRequest(), timeout=3).error
        assert nameless.code == ErrorCode.INVALID_DATABASE_NAME  # table DDL is served (docs/control-plane.md)
    with ZkView(cluster.zookeeper_address) as zk:
        assert zk.children(DatabaseZNode.parent(cluster.zk_root)) == ["fluss"]


def test_sigterm_of_the_leader_deletes_its_nodes_at_once_and_hands_over(cluster_factory):
    cluster = cluster_factory(coordinators=2, tablet_servers=0, overrides={"zookeeper.session-timeout": "10s"})
    leader = cluster.wait_for_leader(15)
    epoch = cluster.health(leader)["coordinator_epoch"]
    t0 = time.monotonic()
    assert cluster.stop_process(leader, timeout=10) == "stopped"
    assert cluster.handle(leader).returncode == 0
    successor = cluster.wait_for_leader(8, exclude=[leader])
    assert time.monotonic() - t0 < 8  # far below the 10 s session timeout: the session was closed
    assert cluster.health(successor)["coordinator_epoch"] == epoch + 1
    log = cluster.log_text(leader)
    stops = [m.group(1) for m in re.finditer(r"Stopped leader resource: (\S+)", log)]
    assert stops == [
        "auto-partition-manager",
        "server-tag-check",
        "leader-balancer",
        "rebalance-manager",
        "event-processor",
        "background-managers",
        "channel-manager",
        "rpc-channels",
    ]


def test_a_leader_that_cannot_initialise_releases_leadership(cluster_factory):
    cluster = cluster_factory(coordinators=2, tablet_servers=0, start=False)
    root = cluster.zk_root
    with ZkView(cluster.zookeeper_address) as zk:
        # A foreign session holds the leader node, so registering it fails during leader initialisation.
        zk.client.create(CoordinatorLeaderZNode.path(root), b'{"server_id":99}', ephemeral=True, makepath=True)
        cluster.start(wait=False)
        for name in cluster.names("coordinator"):  # both get their turn: nobody holds on to leadership
            cluster.wait_for_log(name, r"Failed to initialise coordinator leader services.*releasing leadership", 20)
        assert cluster.coordinator_leader() is None
        zk.client.delete(CoordinatorLeaderZNode.path(root))
        leader = cluster.wait_for_leader(15)
        node = zk.get_json(CoordinatorLeaderZNode.path(root))
        assert node["server_id"] == cluster.get(leader).id
        assert node["epoch"] == cluster.health(leader)["coordinator_epoch"] == zk.get_int(f"{root}/coordinator/epoch")
        # the other one is back in the election once its back-off is over
        cluster.wait_until(lambda: len(zk.children(CandidateZNode.parent(root))) == 2, 5)


# ---------------------------------------------------------------- bad input and missing ZooKeeper
def _run_coordinator(*overrides: str, timeout: float = 30) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "fluss_py.cli.main", "coordinator", *[a for o in overrides for a in ("-D", o)]]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def test_config_errors_exit_2_naming_the_key(tmp_path):
    bad_key = _run_coordinator("zookeeper.adress=127.0.0.1:1", f"log.dir={tmp_path}")
    assert bad_key.returncode == 2 and "zookeeper.adress" in bad_key.stderr
    bad_value = _run_coordinator("zookeeper.session-timeout=soon", f"log.dir={tmp_path}")
    assert bad_value.returncode == 2 and "zookeeper.session-timeout" in bad_value.stderr
    wrong_role = _run_coordinator("tablet-server.id=3", f"log.dir={tmp_path}")
    assert wrong_role.returncode == 2 and "tablet-server.id" in wrong_role.stderr


def test_unreachable_zookeeper_is_retried_then_exits_1(tmp_path):
    port = free_port()  # nothing listens here
    t0 = time.monotonic()
    result = _run_coordinator(
        f"zookeeper.address=127.0.0.1:{port}",
        "zookeeper.connection-timeout=3s",
        f"log.dir={tmp_path}",
        f"rpc.port={free_port()}",
        f"http.port={free_port()}",
    )
    elapsed = time.monotonic() - t0
    assert result.returncode == 1, result.stderr
    assert f"could not connect to ZooKeeper at 127.0.0.1:{port} within 3s" in result.stderr
    assert 3 <= elapsed < 15
    log = (tmp_path / "coordinator-server.log").read_text()
    assert len(re.findall(r"is not reachable yet .* retrying", log)) >= 2


def test_leader_steps_down_when_zookeeper_is_silent_past_the_session_timeout(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=0, own_zookeeper=True)
    leader = cluster.wait_for_leader(15)
    epoch = cluster.health(leader)["coordinator_epoch"]
    cluster.pause("zookeeper")
    try:
        cluster.wait_for_log(
            leader, r"Lost coordinator leadership \(ZooKeeper connection suspended", SESSION_TIMEOUT_S + 5
        )
        assert cluster.health(leader)["state"] == "Standby"
    finally:
        cluster.resume("zookeeper")
    cluster.wait_until(lambda: (cluster.health(leader) or {}).get("coordinator_epoch") == epoch + 1, 20)
    assert cluster.wait_for_leader(5) == leader
    with ZkView(cluster.zookeeper_address) as zk:
        assert zk.get_json(CoordinatorLeaderZNode.path(cluster.zk_root))["epoch"] == epoch + 1
        assert len(zk.children(CandidateZNode.parent(cluster.zk_root))) == 1
