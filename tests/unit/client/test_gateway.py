"""CoordinatorGateway: calls reach the coordinator leader, and leave one that stops answering
(docs/client.md "Admin")."""

from __future__ import annotations

import pytest

from fluss_py.client.admin import Admin
from fluss_py.client.options import RetryOptions
from fluss_py.errors import RequestTimedOutError
from tests.unit.client.fake_cluster import FakeCluster

pytestmark = pytest.mark.timeout(30)

FAST = RetryOptions(backoff=0.005, backoff_max=0.05)
NEW_LEADER = "127.0.0.1:9101"


async def test_a_call_leaves_a_coordinator_that_stops_answering_for_the_new_leader() -> None:
    cluster = FakeCluster()
    async with Admin(cluster.servers[0], transport=cluster, request_timeout=2.0, retry=FAST) as admin:
        assert await admin.list_databases() == ["fluss"]
        old = cluster.coordinator_address
        cluster.paused.add(old)  # the leader is cut off; the standby takes over and every server names it
        cluster.coordinator_address = NEW_LEADER
        assert await admin.list_databases() == ["fluss"]  # within the same 2 s request timeout
        assert admin.metadata.coordinator.address == NEW_LEADER
        assert await admin.list_databases() == ["fluss"]
    to_old = [a for a, n, _ in cluster.calls if n == "ListDatabases" and a == old]
    assert len(to_old) == 2  # the first answer, then one abandoned attempt: the next call went to the new leader


async def test_with_no_other_leader_the_call_times_out() -> None:
    cluster = FakeCluster()
    async with Admin(cluster.servers[0], transport=cluster, request_timeout=1.5, retry=FAST) as admin:
        await admin.list_databases()
        cluster.paused.add(cluster.coordinator_address)  # paused, and nobody took over
        with pytest.raises(RequestTimedOutError):
            await admin.list_databases()
