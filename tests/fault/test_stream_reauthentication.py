"""A follower whose certificate is no longer valid stops replicating, though its connection stays open.

Every server trusts two CAs (the cluster's CA file holds both) and tablet server 2 presents a certificate
of the second. A table of two buckets on both servers: bucket B is led by server 1 and followed by server 2
on a ``FetchLogStream``. The second CA is then removed from the CA file and server 1 is sent SIGHUP: server
2's open stream is closed with UNAUTHENTICATED at its next message (docs/security.md §2, "Open streams"),
it cannot open another, it leaves B's ISR and its replica of B holds nothing written after. Before open
streams were re-checked, server 2 went on fetching on the connection it had opened while its CA was
trusted: it stayed in the ISR and copied every new record (the test fails before this change).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from fluss_py.client import ProducerOptions, SyncProducer
from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.server_names import server_uri
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.secure import SERVER_HOSTS, SERVER_PRINCIPAL
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    ReplicaFiles,
    create_table,
    leader_isr,
    server_name,
    wait_for_isr,
    wait_full_isr,
)

pytestmark = pytest.mark.fault

LEADER, FOLLOWER = 1, 2


def replace(target: Path, data: bytes) -> None:
    tmp = target.with_name(target.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def reloads(cluster: LocalCluster, name: str) -> int:
    return cluster.log_text(name).count("TLS certificate reloaded")


def produce(cluster: LocalCluster, table: str, bucket: int, values: list[bytes]) -> None:
    """Through the leader only: once the second CA is gone, no client can reach the follower either."""
    options = ProducerOptions(acks=1, request_timeout=10)
    address = cluster.get(server_name(LEADER)).rpc_address
    with SyncProducer(address, options, security=cluster.client_identity()) as producer:
        for f in [producer.send(f"{DATABASE}.{table}", v, bucket=bucket) for v in values]:
            f.result(timeout=30)


def test_a_follower_whose_ca_is_no_longer_trusted_stops_replicating(cluster_factory, tmp_path: Path) -> None:
    cluster = cluster_factory(
        coordinators=1, tablet_servers=2, tablet_overrides=FAULT_OVERRIDES, secure=True, start=False
    )
    assert cluster.security is not None
    files = cluster.security
    own_ca = files.ca.cert_file.read_bytes()
    second = CertificateAuthority.create(tmp_path / "second-ca", name="fluss-py second CA")
    replace(files.ca.cert_file, own_ca + second.cert_file.read_bytes())  # read by every channel made from now on
    follower = server_name(FOLLOWER)
    issued = second.issue(
        tmp_path / follower, SERVER_PRINCIPAL, hosts=SERVER_HOSTS, uris=[server_uri(TABLET_SERVER, FOLLOWER)]
    )
    replace(files.directory / f"{follower}-key.pem", issued.key_file.read_bytes())
    replace(files.directory / f"{follower}.pem", issued.cert_file.read_bytes())
    cluster.start(timeout=60)

    table = "revoked_follower"
    table_id = create_table(cluster, table, buckets=2, rf=2)
    with ZkView(cluster.zookeeper_address) as zk:
        for b in (0, 1):
            wait_full_isr(zk, cluster, TableBucket(table_id, b), (1, 2), 20)
        led = [b for b in (0, 1) if getattr(leader_isr(zk, cluster, TableBucket(table_id, b)), "leader", 0) == LEADER]
    tb = TableBucket(table_id, led[0])  # two buckets on two servers: each leads one
    replica = ReplicaFiles(cluster, follower, tb)
    before = [f"before-{i}".encode() for i in range(20)]
    produce(cluster, table, tb.bucket, before)
    cluster.wait_until(lambda: replica.log_end_offset() == len(before), 20, f"{follower} copied the first records")

    # the second CA is no longer trusted: the leader re-reads its CA file at once
    leader = server_name(LEADER)
    reloaded = reloads(cluster, leader)
    replace(files.ca.cert_file, own_ca)
    cluster.signal(leader, signal.SIGHUP)
    cluster.wait_until(lambda: reloads(cluster, leader) > reloaded, 10, f"{leader} re-read its CA file")
    after = [f"after-{i}".encode() for i in range(20)]
    produce(cluster, table, tb.bucket, after)

    with ZkView(cluster.zookeeper_address) as zk:
        wait_for_isr(zk, cluster, tb, lambda now: list(now.isr) == [LEADER], 30, f"{follower} leaves the ISR")
    held = [v for _, v in sorted(replica.values_by_offset().items())]
    assert held == before  # nothing written after the revocation reached the follower
    assert ReplicaFiles(cluster, leader, tb).log_end_offset() == len(before) + len(after)
    assert "CLOSED stream=FetchLogStream principal=fluss-server" in cluster.log_text(leader)  # audited
    assert "no longer trusts" in cluster.log_text(follower)  # the follower's fetcher was told why
