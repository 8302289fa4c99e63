"""Deprecated (seed) key names on real processes: a server started with them runs with their values and
says so in exactly one warning at start-up (docs/operations.md "Deprecated key names")."""

import pytest

pytestmark = pytest.mark.integration

WARNING = "Deprecated configuration key(s), accepted for now"


def test_seed_key_names_start_servers_with_one_warning(cluster_factory):
    cluster = cluster_factory(
        1,
        1,
        coordinator_overrides={"tablet-server.rebalance.check.interval": "7min"},
        tablet_overrides={"tablet-server.replica.fetch.max.bytes": "5MB"},
    )
    cluster.wait_for_leader(15)
    coordinator, tablet = cluster.names("coordinator")[0], cluster.names("tablet-server")[0]
    for name, renamed in (
        (coordinator, "tablet-server.rebalance.check.interval -> coordinator.rebalance.check-interval"),
        (tablet, "tablet-server.replica.fetch.max.bytes -> replica.fetch.max.bytes"),
    ):
        text = cluster.log_text(name)
        assert text.count(WARNING) == 1, text[-2000:]
        assert renamed in text
    # the value is in force under the canonical name (the start-up line lists the explicit settings)
    assert "coordinator.rebalance.check-interval=420.0" in cluster.log_text(coordinator)
    assert "replica.fetch.max.bytes=5242880" in cluster.log_text(tablet)
