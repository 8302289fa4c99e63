"""``fluss-py table alter T --buckets N`` on real processes (docs/operations.md "Adding buckets").

A 2-bucket table read by a consumer group of two ``fluss-py consume --group`` processes grows to 4
buckets: the new buckets get leaders on the tablet servers, the group takes them without moving the old
ones, records written to the new buckets are read, a producer started after the change hashes keys over
4 buckets, and a shrink is refused with nothing changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.client import ProducerOptions, SyncAdmin, SyncProducer
from fluss_py.testing.procs import wait_until
from fluss_py.types import TableBucket
from tests.fault.group_support import Members, cli

pytestmark = pytest.mark.integration

TABLE = "fluss.grow"
GROUP = "growing"


def _produce(bootstrap: str, values: list[str], **kwargs: int) -> list[int]:
    """Sends ``values`` (each its own key); returns the bucket each landed in."""
    with SyncProducer(bootstrap, ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)) as p:
        futures = [p.send(TABLE, v.encode(), key=v.encode(), **kwargs) for v in values]
        p.flush()
        return [f.result(timeout=60).bucket.bucket for f in futures]


def test_a_table_grows_and_its_group_takes_the_new_buckets(cluster_factory, tmp_path: Path) -> None:
    cluster = cluster_factory(coordinators=1, tablet_servers=2)
    cluster.wait_for_leader(30)
    bootstrap = cluster.get(cluster.names()[-1]).rpc_address
    group = Members(tmp_path, cluster.directory, TABLE, GROUP)
    try:
        with SyncAdmin(bootstrap, request_timeout=20.0) as admin:
            _grow(cluster, admin, bootstrap, group)
    finally:
        group.close()  # every member process, by PID


def _grow(cluster, admin: SyncAdmin, bootstrap: str, group: Members) -> None:
    table_id = admin.create_table(TABLE, num_buckets=2, replication_factor=2)
    wait_until(lambda: all(b.leader >= 0 for b in admin.get_table_placement(TABLE)[1]), 30, message="leaders")
    a, b = group.start("a", session_timeout=10.0), group.start("b", session_timeout=10.0)

    def owned(n: int) -> dict[str, set[TableBucket]] | None:
        view = admin.describe_group_members(GROUP)
        got = {m.member_id: set(m.assigned) for m in view.members}
        together = sorted(tb for tbs in got.values() for tb in tbs)
        accounts = sorted(sorted(m.owns_table_buckets()) for m in (a, b))
        ok = view.state == "STABLE" and len(got) == 2 and together == [TableBucket(table_id, i) for i in range(n)]
        return got if ok and accounts == sorted(sorted(v) for v in got.values()) else None

    before = wait_until(lambda: owned(2), 60, message="two members, one bucket each")
    produced = [f"old-{i}" for i in range(50)]
    assert set(_produce(bootstrap, produced)) == {0, 1}

    grown = cli(cluster, "table", "alter", TABLE, "--buckets", "4")
    assert grown.returncode == 0, grown.stdout + grown.stderr
    placement = wait_until(
        lambda: (p := admin.get_table_placement(TABLE)) and len(p[1]) == 4 and all(x.leader >= 0 for x in p[1])
        and p, 30, message="the new buckets have leaders",
    )  # fmt: skip
    assert placement[0].num_buckets == 4 and all(len(x.isr) == 2 for x in placement[1])
    after = wait_until(lambda: owned(4), 60, message="the group took the new buckets")
    assert all(before[m] <= after[m] for m in before) and sorted(map(len, after.values())) == [2, 2]

    new = [f"new-{i}" for i in range(20)]
    assert _produce(bootstrap, new[:10], bucket=2) == [2] * 10 and _produce(bootstrap, new[10:], bucket=3) == [3] * 10
    hashed = [f"hashed-{i}" for i in range(100)]
    assert set(_produce(bootstrap, hashed)) == {0, 1, 2, 3}  # a producer started now sees 4 buckets
    everything = set(produced) | set(new) | set(hashed)
    wait_until(lambda: {v for m in (a, b) for _, _, v in m.records()} >= everything, 60, message="all read")

    refused = cli(cluster, "table", "alter", TABLE, "--buckets", "3")
    assert refused.returncode == 1 and "INVALID_REQUEST" in refused.stderr, refused.stdout + refused.stderr
    assert admin.get_table_info(TABLE).num_buckets == 4
