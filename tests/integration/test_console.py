"""The web console on a real cluster (real ZooKeeper, two coordinators, three tablet-server processes):
the leader serves the page, its script and a live snapshot stream; a standby redirects to the leader; bad
input gets a 400 with a message; a kill -9 of a bucket leader shows as a new leader, a shrunk ISR and
timeline events in the snapshot (docs/console.md)."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from fluss_py.client import SyncAdmin, SyncConsumer
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.faults import kill9
from tests.integration.console_support import TABLE, produce_keyed

pytestmark = pytest.mark.integration

GROUP = "console-readers"


def _get(address: str, path: str) -> tuple[int, dict[str, str], bytes]:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _snapshot(address: str) -> dict[str, Any]:
    status, _, body = _get(address, "/console/snapshot")
    assert status == 200, body
    return json.loads(body)


def consume_and_lag(cluster: LocalCluster, at: str, bootstrap: str) -> tuple[SyncConsumer, dict[str, Any]]:
    """A group member that read and committed 40 records, then 40 more arrive: the console shows the group,
    its member with the table's 4 buckets and a lag of 40 in total (HW - committed)."""
    produce_keyed(bootstrap, 0, 40)
    consumer = SyncConsumer(bootstrap, group=GROUP, subscribe=[TABLE])
    seen: list[Any] = []
    cluster.wait_until(lambda: seen.extend(consumer.poll(1.0)) or len(seen) >= 40, 60, "the member read 40 records")
    consumer.commit()
    produce_keyed(bootstrap, 40, 40)

    def lagging() -> dict[str, Any] | None:
        groups = [g for g in _snapshot(at).get("groups", []) if g["name"] == GROUP]
        lags = [row[4] for g in groups for row in g["offsets"]]
        return groups[0] if len(lags) == 4 and None not in lags and sum(lags) == 40 and groups[0]["members"] else None

    return consumer, cluster.wait_until(lagging, 60, "the groups panel shows the member and a lag of 40")


def _first_event(address: str) -> dict[str, Any]:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        conn.request("GET", "/console/events")
        r = conn.getresponse()
        assert (r.status, r.getheader("Content-Type")) == (200, "text/event-stream")
        assert r.readline() == b"event: snapshot\n"
        line = r.readline()
        assert line.startswith(b"data: ")
        return json.loads(line[len(b"data: ") :])
    finally:
        conn.close()


def test_console_pages_redirect_bad_input_and_a_leader_kill(cluster_factory):
    cluster: LocalCluster = cluster_factory(coordinators=2, tablet_servers=3)
    leader = cluster.wait_for_leader(30)
    standby = next(n for n in cluster.names(COORDINATOR) if n != leader)
    at = cluster.get(leader).http_address
    with SyncAdmin(cluster.get(f"{TABLET_SERVER}-1").rpc_address, request_timeout=10.0) as admin:
        admin.create_table(TABLE, num_buckets=4, replication_factor=3)

    status, headers, body = _get(at, "/console")
    assert (status, headers["content-type"].split(";")[0]) == (200, "text/html") and b"Fluss console" in body
    assert _get(at, "/console/static/console.js")[0] == 200
    status, headers, _ = _get(cluster.get(standby).http_address, "/console")
    assert status == 307 and urlsplit(headers["location"]).netloc == at, headers
    for path in ("/console?page=x", "/console/snapshot?table=1", "/console/events?x"):
        status, _, body = _get(at, path)
        assert status == 400 and body.strip(), (path, status, body)
    assert _get(at, "/console/static/..%2Fsnapshot.py")[0] == 404

    def table_ready() -> dict[str, Any] | None:
        snap = _snapshot(at)
        rows = [b for b in snap["buckets"] if b["leader"] >= 0 and len(b["isr"]) == 3]
        return snap if len(rows) == 4 and len(snap["servers"]) == 3 else None

    snap = cluster.wait_until(table_ready, 30, "the snapshot shows 4 buckets with a full ISR on 3 servers")
    assert [t["name"] for t in snap["tables"]] == [TABLE]
    assert [s["alive"] for s in snap["servers"]] == [True, True, True]
    # each tablet server's disk use came on its liveness heartbeat: held bytes and its data directory's space
    assert all(s["total"] > 0 and 0 <= s["free"] <= s["total"] and s["held"] >= 0 and len(s["dirs"]) >= 1
               for s in snap["servers"]), snap["servers"]  # fmt: skip
    assert len(_first_event(at)["buckets"]) == 4

    def both_coordinators() -> list[dict[str, Any]] | None:
        rows = _snapshot(at)["coordinators"]
        return rows if sorted(r["state"] for r in rows) == ["Leader", "Standby"] else None

    rows = cluster.wait_until(both_coordinators, 20, "the coordinators panel shows the leader and the standby")
    (lead,) = [r for r in rows if r["state"] == "Leader"]
    assert (lead["id"], lead["epoch"]) == (snap["coordinator"]["id"], snap["coordinator"]["epoch"])
    assert [r["rank"] for r in rows if r["state"] == "Standby"] == [1]

    consumer, group = consume_and_lag(cluster, at, cluster.get(f"{TABLET_SERVER}-1").rpc_address)
    try:
        (member,) = group["members"]
        assert group["state"] == "STABLE" and sorted(map(tuple, member["b"])) == [(snap["tables"][0]["id"], b)
                                                                                  for b in range(4)], group  # fmt: skip
        assert sum(row[2] for row in group["offsets"]) == 40  # committed: the 40 records read
    finally:
        consumer.close()

    victim = next(b for b in snap["buckets"] if b["bucket"] == 0)["leader"]
    kill9(cluster, f"{TABLET_SERVER}-{victim}")

    def moved() -> dict[str, Any] | None:
        snap = _snapshot(at)
        b0 = next(b for b in snap["buckets"] if b["bucket"] == 0)
        return snap if b0["leader"] not in (victim, -1) and victim not in b0["isr"] else None

    snap = cluster.wait_until(moved, 60, "bucket 0 has a new leader and the dead server left its ISR")
    assert {e["kind"] for e in snap["timeline"] if e["bucket"] == 0} == {"leader", "isr"}
    assert next(s for s in snap["servers"] if s["id"] == victim)["alive"] is False
    assert all(b["under_replicated"] for b in snap["buckets"])  # every bucket had a replica on the victim
