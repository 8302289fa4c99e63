"""The 2000-bucket scenario (issue 7 item 4) as behaviour, opt-in (``--run-slow``): 2000 buckets RF 3 on 3
tablet servers; a SIGTERM (controlled shutdown) of the server leading the most buckets, its restart, then a
kill -9 of the server leading the most buckets. Asserts that every bucket has a live leader after each, and
that an idempotent acks=all producer on buckets 0-2 running throughout loses nothing it had acknowledged and
duplicates nothing. The times are figures, reported by tests/bench/bench_scale.py, not asserted here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.client import ProducerOptions
from fluss_py.testing.cluster import LocalCluster
from tests.bench.scale import TABLE, run_scenario, tablet_bootstrap
from tests.fault.replication_support import SteadyProducer, assert_exactly_once_in_order, consume

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

BUCKETS = 2000
PRODUCED_BUCKETS = 3


def test_2000_buckets_survive_controlled_shutdown_and_kill9(tmp_path: Path) -> None:
    options = ProducerOptions(acks=-1, idempotence=True, request_timeout=30.0, delivery_timeout=120.0)
    producers: list[SteadyProducer] = []

    def start_producer(cluster: LocalCluster) -> None:
        producer = SteadyProducer(
            tablet_bootstrap(cluster), TABLE, options, bucket_of=lambda seq: seq % PRODUCED_BUCKETS
        )
        producers.append(producer.start(60))

    def check(cluster: LocalCluster) -> None:
        sent = producers.pop().stop()
        assert not [s for s in sent if s.error], "failed sends"
        for b in range(PRODUCED_BUCKETS):
            mine = [s for s in sent if s.bucket == b]
            end = max(s.offset for s in mine if s.offset is not None) + 1
            assert_exactly_once_in_order(mine, consume(cluster, TABLE.split(".", 1)[1], b, end), bucket=b)

    try:
        result = run_scenario(tmp_path, BUCKETS, idle_seconds=2.0, cluster_ready=start_producer, after=check)
    finally:
        for p in producers:  # still running only when the scenario failed before check()
            p.stop()
    assert result.shutdown_leaders > 0 and all(leaders > 0 for leaders, _ in result.kills)
    assert result.shutdown_all_led, "a bucket without a live leader after the controlled shutdown"
    assert len(result.kills) == 2  # run_scenario waited (bounded) until every bucket had a live leader
