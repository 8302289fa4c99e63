"""The HTTP ports of a real secure cluster show each principal what gRPC shows it, and no more.

Two tables, ``vis.shown`` and ``vis.hidden``; principals: the harness's client certificate alone (CN
``fluss-client``, no ACL), ``reader`` (READ on ``vis.shown``), ``scraper`` (DESCRIBE_CONFIGS on the cluster,
the Prometheus user of docs/observability.md) and the admin (everything). Checked on the data, not the
status only: which table names and ids appear in ``/console/snapshot``, the first ``/console/events``
sample, a tablet server's and the coordinator's ``/metrics`` and a tablet server's ``/health``, for whom;
and that GetMetadata agrees. Before this change every one of them, with nothing but a CA-signed client
certificate, got every table's name, id, bytes, HW and LEO.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from fluss_py.client import SyncAdmin, SyncProducer
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.security.identity import PeerIdentity
from fluss_py.security.scram import make_credential
from fluss_py.security.store import add_acls, put_user
from fluss_py.security_types import CLUSTER_NAME, Acl, Operation, PatternType, Permission, ResourceType
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.fixtures import TEST_OVERRIDES
from fluss_py.testing.secure import with_zookeeper

pytestmark = pytest.mark.integration

SHOWN, HIDDEN = "vis.shown", "vis.hidden"
READER, SCRAPER = ("reader", "reader-secret-7"), ("scraper", "scraper-secret-7")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("visibility"), 1, 1, zookeeper=zookeeper.address,
                           zk_root="/fluss-visibility", overrides=TEST_OVERRIDES, die_with_parent=True,
                           secure=True)  # fmt: skip
    try:
        cluster.start(timeout=90)
        assert cluster.security is not None
        acls = [
            Acl(READER[0], ResourceType.TABLE, PatternType.LITERAL, SHOWN, Operation.READ, Permission.ALLOW),
            Acl(SCRAPER[0], ResourceType.CLUSTER, PatternType.LITERAL, CLUSTER_NAME, Operation.DESCRIBE_CONFIGS,
                Permission.ALLOW),
        ]  # fmt: skip

        async def users(zk, root) -> None:
            for user, password in (READER, SCRAPER):
                await put_user(zk, root, user, make_credential(password))
            await add_acls(zk, root, acls)

        with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, users)
        admin = PeerIdentity.from_settings(cluster.client_config())
        address = cluster.get(cluster.names(COORDINATOR)[0]).rpc_address
        with SyncAdmin(address, security=admin) as a:
            a.create_database("vis")
            for name in (SHOWN, HIDDEN):
                a.create_table(name, num_buckets=2, replication_factor=1)
        for name in (SHOWN, HIDDEN):  # records, so HW and LEO move
            with SyncProducer(cluster.get(cluster.names(TABLET_SERVER)[0]).rpc_address, security=admin) as p:
                sent = [p.send(name, f"{name}-{i}".encode(), bucket=i % 2) for i in range(4)]
                assert [f.result(timeout=30).offset for f in sent] == [0, 0, 1, 1]
        yield cluster
    finally:
        cluster.close(grace=3.0)


def basic(user: tuple[str, str]) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user[0]}:{user[1]}".encode()).decode()}


def get(
    cluster: LocalCluster, name: str, path: str, headers: dict[str, str], *, stream: bool = False
) -> tuple[int, str]:
    request = urllib.request.Request(cluster.get(name).http_url + path, headers=headers)
    context: ssl.SSLContext = cluster.http_context()
    try:
        with urllib.request.urlopen(request, timeout=15, context=context) as r:
            if not stream:
                return r.status, r.read().decode()
            lines = []
            for raw in r:  # the first event: "event: snapshot", "data: {...}"
                lines.append(raw.decode())
                if raw.startswith(b"data: "):
                    break
            return r.status, "".join(lines)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode() + json.dumps(dict(e.headers))


def table_ids(cluster: LocalCluster) -> dict[str, int]:
    admin = PeerIdentity.from_settings(cluster.client_config())
    with SyncAdmin(cluster.get(cluster.names(COORDINATOR)[0]).rpc_address, security=admin) as a:
        return {name: a.describe_table(name).info.table_id for name in (SHOWN, HIDDEN)}


def snapshot_tables(cluster: LocalCluster, headers: dict[str, str]) -> dict[str, set]:
    """The names in the tables panel and the table ids of the buckets panel, once a sample shows buckets."""
    seen: dict[str, set] = {}

    def sampled() -> bool:
        status, body = get(cluster, cluster.names(COORDINATOR)[0], "/console/snapshot", headers)
        assert status == 200, body
        doc = json.loads(body)
        seen["names"] = {t["name"] for t in doc.get("tables", [])}
        seen["ids"] = {b["table_id"] for b in doc.get("buckets", [])} | {t["id"] for t in doc.get("tables", [])}
        seen["leaders"] = {s["leaders"] for s in doc.get("servers", [])}
        return "tables" in doc

    cluster.wait_until(sampled, 30, "a console sample")
    return seen


def test_the_console_shows_each_principal_what_it_may_describe(cluster: LocalCluster) -> None:
    assert cluster.security is not None
    ids = table_ids(cluster)
    coordinator = cluster.names(COORDINATOR)[0]
    assert snapshot_tables(cluster, cluster.security.admin_authorization())["names"] == {SHOWN, HIDDEN}
    reader = snapshot_tables(cluster, basic(READER))
    assert reader["names"] == {SHOWN} and reader["ids"] == {ids[SHOWN]}
    assert reader["leaders"] == {2}  # the one server leads the 2 buckets of the shown table, as far as it sees
    nobody = snapshot_tables(cluster, {})  # the client certificate alone: CN fluss-client, no ACL
    assert nobody["names"] == set() and nobody["ids"] == set()
    scraper = snapshot_tables(cluster, basic(SCRAPER))  # DESCRIBE_CONFIGS implies no DESCRIBE of tables
    assert scraper["names"] == set()
    status, event = get(cluster, coordinator, "/console/events", basic(READER), stream=True)
    assert status == 200 and event.startswith("event: snapshot")
    assert SHOWN in event and HIDDEN not in event and f'"table_id":{ids[HIDDEN]}' not in event
    # a wrong password is no principal: 401 with the Basic challenge a browser answers with a prompt
    for path in ("/console", "/console/snapshot", "/console/events"):
        status, body = get(cluster, coordinator, path, basic((READER[0], "wrong")))
        assert status == 401 and "WWW-Authenticate" in body and HIDDEN not in body, (path, body)
    # GetMetadata agrees: the reader sees the shown table only
    identity = PeerIdentity(PeerIdentity.from_settings(cluster.client_config()).tls, *READER)
    with SyncAdmin(cluster.get(coordinator).rpc_address, security=identity) as a:
        assert a.describe_table(SHOWN).info.table_id == ids[SHOWN]
        with pytest.raises(FlussError) as info:
            a.describe_table(HIDDEN)
        assert info.value.code is ErrorCode.AUTHORIZATION_FAILED


@pytest.mark.parametrize("role", [COORDINATOR, TABLET_SERVER])
def test_metrics_need_describe_configs_on_the_cluster(cluster: LocalCluster, role: str) -> None:
    assert cluster.security is not None
    ids = table_ids(cluster)
    name = cluster.names(role)[0]
    for headers in ({}, basic(READER)):  # the certificate alone, a principal without DESCRIBE_CONFIGS
        status, body = get(cluster, name, "/metrics", headers)
        assert status == 403 and "DESCRIBE_CONFIGS" in body, body
        assert not re.search(rf'table_id="({ids[SHOWN]}|{ids[HIDDEN]})"', body)
    status, body = get(cluster, name, "/metrics", basic((SCRAPER[0], "wrong")))
    assert status == 401
    for headers in (basic(SCRAPER), cluster.security.admin_authorization()):
        status, body = get(cluster, name, "/metrics", headers)
        assert status == 200, body
        if role == TABLET_SERVER:  # the per-bucket families name both tables
            for table_id in ids.values():
                assert re.search(rf'fluss_log_end_offset\{{bucket="\d",table_id="{table_id}"\}} [1-9]', body), body


def test_health_is_open_but_names_no_table_without_describe_configs(cluster: LocalCluster) -> None:
    name = cluster.names(TABLET_SERVER)[0]
    status, body = get(cluster, name, "/health", {})
    health = json.loads(body)
    assert status == 200 and health["registered"] and health["server_id"] == 1
    assert "offline_replicas" not in health and health["offline_replica_count"] == 0
    assert "kv_replicas" not in health and health["kv_states"] == {"applying": 0, "rebuilding": 0, "stopped": 0}
    status, body = get(cluster, name, "/health", basic(SCRAPER))
    assert status == 200 and json.loads(body)["offline_replicas"] == [] and json.loads(body)["kv_replicas"] == {}
