"""Certificates replaced on disk while a secure cluster serves an acks=all idempotent producer.

- a broken certificate file (SIGHUP) is refused with a log line: the servers keep presenting the old one;
- a new certificate (same CA) replaces the files: every server presents it on new connections (SIGHUP on
  some, the file change alone on the others), the connections already open drain on the old one, and the
  producer never fails a send; every acknowledged record is read back exactly once, in order.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest
from cryptography import x509

from fluss_py.client import ProducerOptions
from fluss_py.security.tls import client_ssl_context
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.health import fetch_health
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    SteadyProducer,
    assert_every_ack_read_once,
    bootstrap,
    create_table,
    wait_full_isr,
)

pytestmark = pytest.mark.fault

BROKEN = b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n"
STEADY = ProducerOptions(acks=-1, idempotence=True, request_timeout=10.0, delivery_timeout=60.0)


def presented_serial(cluster: LocalCluster, name: str) -> int:
    """The serial number of the certificate a fresh TLS connection to ``name``'s RPC port is shown."""
    assert cluster.security is not None
    context = client_ssl_context(cluster.security.client_tls())
    context.set_alpn_protocols(["h2"])
    host, port = cluster.get(name).rpc_address.rsplit(":", 1)
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as s,
    ):
        der = s.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def replace(target: Path, data: bytes) -> None:
    tmp = target.with_name(target.name + ".new")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def test_certificate_rotation_under_load_fails_no_send(cluster_factory) -> None:
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES, secure=True)
    assert cluster.security is not None
    files = cluster.security
    table = "rotation"
    tb = TableBucket(create_table(cluster, table), 0)
    servers = cluster.names(COORDINATOR) + cluster.names(TABLET_SERVER)
    old = {n: presented_serial(cluster, n) for n in servers}
    assert len(set(old.values())) == len(servers)  # a certificate of its own per server
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 15)
    producer = SteadyProducer(bootstrap(cluster), f"{DATABASE}.{table}", STEADY, security=cluster.client_identity())
    producer.start()
    try:
        producer.wait_acked_after(time.monotonic(), 25, 15)

        # 1. a broken file: refused, the old certificate stays
        good = {n: (files.directory / f"{n}.pem").read_bytes() for n in servers}
        for n in servers:
            replace(
                files.directory / f"{n}.pem",
                b"-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n",
            )
            cluster.signal(n, signal.SIGHUP)
        for n in servers:
            cluster.wait_for_log(n, "new TLS files not loaded, the previous certificate stays in use", 10)
            assert presented_serial(cluster, n) == old[n]
            replace(files.directory / f"{n}.pem", good[n])

        # 2. new certificates from the same CA
        new: dict[str, int] = {}
        t_rotate = time.monotonic()
        for n in servers:
            rec = cluster.get(n)
            staged = files.issue_server(rec.role, rec.id or 0, name=f"staged-{n}")  # the same server, a new key
            new[n] = x509.load_pem_x509_certificate(staged.cert_file.read_bytes()).serial_number
            replace(files.directory / f"{n}-key.pem", staged.key_file.read_bytes())
            replace(files.directory / f"{n}.pem", staged.cert_file.read_bytes())
        for n in servers[:2]:
            cluster.signal(n, signal.SIGHUP)  # the others notice the changed files at their next handshake
        for n in servers:
            cluster.wait_until(lambda n=n: presented_serial(cluster, n) == new[n], 15, f"{n} presents its new cert")
            cluster.wait_for_log(n, "TLS certificate reloaded", 10)
            assert fetch_health(cluster.get(n).http_url, 2.0, cluster.http_context()) is not None  # HTTPS too
        producer.wait_acked_after(t_rotate, 50, 20)  # traffic went on over the connections opened before
    finally:
        sent = producer.stop()
    assert [s for s in sent if s.error is not None] == []
    assert_every_ack_read_once(cluster, table, sent)
