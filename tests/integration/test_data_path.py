"""The data path end to end: real ZooKeeper, a real coordinator, three real tablet-server processes, the
Python client over gRPC.

- a table with 3 buckets and replication factor 3 created through ``Admin``; every bucket gets a leader
  and a full ISR;
- 1000 keyed records produced with acks=all (idempotent) and consumed back: every acknowledged record
  exactly once, in send order per bucket, at the offset its send reported;
- kill -9 of a tablet server while records keep coming: the producer does not fail; the restarted server
  loads its logs, truncates/catches up and rejoins every ISR within a deadline;
- afterwards the three replicas of every bucket hold byte-identical batches up to the high watermark
  (read from the segment files on disk);
- any tablet server answers GetMetadata with the table; /metrics shows leader count, ISR sizes and
  under-replicated buckets; SIGTERM of a leader is a controlled shutdown (its leadership moves before it
  stops, it exits cleanly with the clean-shutdown marker, restarts and rejoins) and producing goes on;
  dropping the table deletes the replicas' files.
"""

from __future__ import annotations

import concurrent.futures
import re
from collections import defaultdict
from pathlib import Path

import grpc
import pytest

from fluss_py.client import ConsumerOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.log.checkpoint import CLEAN_SHUTDOWN_MARKER
from fluss_py.log.manager import bucket_dir_name
from fluss_py.record.batch import iter_batches
from fluss_py.rpc.pb import common_pb2, tablet_pb2_grpc
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.health import fetch_text
from fluss_py.types import TableBucket

pytestmark = pytest.mark.integration

TABLE = "fluss.data_path"
BUCKETS = 3
TABLET_OVERRIDES = {"replica.lag.time.max.ms": "3s", "log.flush.interval": "500ms"}


def _placement(admin: SyncAdmin) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    """bucket -> (leader, replicas, isr) as the coordinator leader has it."""
    _, buckets = admin.get_table_placement(TABLE)
    return {b.table_bucket.bucket: (b.leader, tuple(b.replicas), tuple(sorted(b.isr))) for b in buckets}


def _fully_replicated(admin: SyncAdmin) -> bool:
    placement = _placement(admin)
    return len(placement) == BUCKETS and all(
        leader >= 0 and len(isr) == 3 and set(isr) == set(replicas) for leader, replicas, isr in placement.values()
    )


def _produce(producer: SyncProducer, start: int, count: int) -> list[tuple[int, int, bytes]]:
    """Send ``count`` keyed records and wait for all; returns (bucket, offset, value) per record."""
    futures: list[tuple[bytes, concurrent.futures.Future]] = []
    for i in range(start, start + count):
        value = f"value-{i:05d}".encode()
        futures.append((value, producer.send(TABLE, value, key=f"key-{i}".encode())))
    producer.flush()
    out = []
    for value, fut in futures:
        md = fut.result(timeout=60)
        out.append((md.bucket.bucket, md.offset, value))
    return out


def _consume_all(consumer: SyncConsumer, expected: int, timeout: float) -> list:
    import time

    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < expected and time.monotonic() < deadline:
        records.extend(consumer.poll(0.5))
    return records


def _batches_below(directory: Path, hw: int) -> bytes:
    """The bytes of every whole batch below ``hw`` in the bucket's segment files, in offset order."""
    out = bytearray()
    for seg in sorted(directory.glob("*.log"), key=lambda p: int(p.stem)):
        data = seg.read_bytes()
        pos = 0
        for batch in iter_batches(data):
            size = batch.batch_length
            if batch.last_offset < hw:
                out += data[pos : pos + size]
            pos += size
    return bytes(out)


def test_produce_consume_restart_and_identical_replicas(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=TABLET_OVERRIDES)
    cluster.wait_for_leader(15)
    servers = cluster.names(TABLET_SERVER)
    bootstrap = ",".join(cluster.get(n).rpc_address for n in servers)

    with SyncAdmin(bootstrap, request_timeout=10.0) as admin:
        # small segments: replicas span several segment files, and the restarted server's logs (loaded
        # with server defaults) must take the table's segment size again
        properties = {"log.segment.file-size": "16KB"}
        table_id = admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3, properties=properties)
        cluster.wait_until(lambda: _fully_replicated(admin), 20, "every bucket has a leader and an ISR of 3")

        options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
        with SyncProducer(bootstrap, options) as producer:
            sent = _produce(producer, 0, 1000)
            assert len({b for b, _, _ in sent}) == BUCKETS  # keys spread over every bucket

            with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2)) as consumer:
                consumer.assign(TABLE)
                got = _consume_all(consumer, len(sent), 30)
                # its fetches run in one fetch session per leader server (docs/replication.md "Fetch
                # sessions"; a look inside the client, read only)...
                leaders = {leader for leader, _, _ in _placement(admin).values()}
                sessions = consumer._client._fetcher._sessions
                assert {server for server, s in sessions.items() if s.id} == leaders
                # ...that wake when the HW moves: records produced while its polls name no bucket arrive
                extra = _produce(producer, 5000, 30)
                got += _consume_all(consumer, len(extra), 30)
                sent += extra
            _check_exactly_once_in_order(sent, got)
            assert _fully_replicated(admin)

            # kill -9 a tablet server that leads something, keep producing, restart it
            placement = _placement(admin)
            victim_id = placement[0][0]
            victim = f"{TABLET_SERVER}-{victim_id}"
            cluster.kill(victim)
            more = _produce(producer, 1000, 2000)
            cluster.wait_until(
                lambda: all(victim_id not in isr for _, _, isr in _placement(admin).values()),
                20,
                f"tablet server {victim_id} left every ISR",
            )
            more += _produce(producer, 3000, 500)
            cluster.start_process(victim, wait=True, timeout=30)
            cluster.wait_until(lambda: _fully_replicated(admin), 30, f"tablet server {victim_id} rejoined every ISR")
            sent += more

        with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2)) as consumer:
            consumer.assign(TABLE)
            got = _consume_all(consumer, len(sent), 30)
        _check_exactly_once_in_order(sent, got)

        description = admin.describe_table(TABLE)
        hws = {d.location.table_bucket.bucket: d.high_watermark for d in description.buckets}
        assert sum(hws.values()) == len(sent)  # one record per batch offset; nothing lost, nothing doubled

    data_dirs = [Path(cluster.get(n).data_dir) for n in servers]

    def identical() -> bool:
        for bucket, hw in hws.items():
            name = bucket_dir_name(TableBucket(table_id, bucket))
            copies = {_batches_below(d / name, hw) for d in data_dirs}
            if len(copies) != 1:
                return False
        return True

    cluster.wait_until(identical, 15, "all three replicas hold byte-identical batches up to the HW")
    victim_dir = Path(cluster.get(victim).data_dir) / bucket_dir_name(TableBucket(table_id, 0))
    assert len(list(victim_dir.glob("*.log"))) > 2  # ~25 KB of records per bucket in 16 KB segments
    for bucket, hw in hws.items():  # and those bytes really are the whole log below the HW
        name = bucket_dir_name(TableBucket(table_id, bucket))
        last = [b.last_offset for b in iter_batches(_batches_below(data_dirs[0] / name, hw))]
        assert last and last[-1] == hw - 1


def _check_exactly_once_in_order(sent: list[tuple[int, int, bytes]], got: list) -> None:
    want: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for bucket, offset, value in sent:
        want[bucket].append((offset, value))
    have: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    for r in got:
        have[r.bucket.bucket].append((r.offset, r.value))
    assert sorted(have) == sorted(want)
    for bucket in want:
        assert have[bucket] == want[bucket], f"bucket {bucket}: consumed records differ from the sent ones"
        offsets = [o for o, _ in have[bucket]]
        assert offsets == list(range(len(offsets)))


def _metric(text: str, name: str, labels: str = "") -> float | None:
    m = re.search(rf"^{name}{re.escape(labels)} (\S+)$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def test_metadata_metrics_controlled_shutdown_and_drop(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=TABLET_OVERRIDES)
    cluster.wait_for_leader(15)
    servers = cluster.names(TABLET_SERVER)
    bootstrap = ",".join(cluster.get(n).rpc_address for n in servers)
    with SyncAdmin(bootstrap, request_timeout=10.0) as admin:
        table_id = admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3)
        cluster.wait_until(lambda: _fully_replicated(admin), 20, "every bucket has a leader and an ISR of 3")

        # any tablet server answers GetMetadata from its UpdateMetadata view (which reaches each server on its
        # own: a server may answer before the coordinator's UpdateMetadata for the new table has arrived)
        def view(name: str):
            with grpc.insecure_channel(cluster.get(name).rpc_address) as channel:
                md = tablet_pb2_grpc.TabletServiceStub(channel).GetMetadata(common_pb2.MetadataRequest(), timeout=3)
            assert md.error.code == 0, md.error.message
            return md

        for name in servers:
            cluster.wait_until(
                lambda n=name: table_id in {t.info.table_id for t in view(n).metadata.tables},
                10,
                f"{name} knows the table",
            )
            md = view(name)
            tables = {t.info.table_id: t for t in md.metadata.tables}
            assert len(tables[table_id].buckets) == BUCKETS
            assert sorted(s.id for s in md.metadata.tablet_servers) == [1, 2, 3]
            assert md.metadata.coordinator.port > 0

        placement = _placement(admin)
        victim_id = placement[0][0]
        victim = f"{TABLET_SERVER}-{victim_id}"
        led = sum(1 for leader, _, _ in placement.values() if leader == victim_id)
        text = fetch_text(f"http://{cluster.get(victim).http_address}/metrics")
        assert _metric(text, "fluss_replica_leader_count") == led
        assert _metric(text, "fluss_replica_under_replicated_buckets") == 0
        assert _metric(text, "fluss_replica_isr_count", f'{{bucket="0",table_id="{table_id}"}}') == 3

        options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
        with SyncProducer(bootstrap, options) as producer:
            sent = _produce(producer, 0, 300)
            assert cluster.stop_process(victim, timeout=10) == "stopped"
            cluster.wait_for_log(victim, r"Controlled shutdown of tablet server \d+ complete", 1)
            assert (Path(cluster.get(victim).data_dir) / CLEAN_SHUTDOWN_MARKER).exists()
            assert all(leader != victim_id for leader, _, _ in _placement(admin).values())
            sent += _produce(producer, 300, 300)
            cluster.start_process(victim, wait=True, timeout=30)
            cluster.wait_for_log(victim, r"3 logs loaded from .* \(clean shutdown before\)", 10)
            cluster.wait_until(lambda: _fully_replicated(admin), 30, f"tablet server {victim_id} rejoined every ISR")
        with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2)) as consumer:
            consumer.assign(TABLE)
            _check_exactly_once_in_order(sent, _consume_all(consumer, len(sent), 30))

        admin.drop_table(TABLE)
        live_dirs = [Path(cluster.get(n).data_dir) for n in servers]
        cluster.wait_until(
            lambda: (
                not any((d / bucket_dir_name(TableBucket(table_id, b))).exists() for d in live_dirs for b in range(3))
            ),
            15,
            "the dropped table's bucket directories are deleted on every server",
        )


def test_restarted_server_rejoins_through_a_new_coordinator_leader(cluster_factory):
    """AdjustIsr follows the coordinator leader: after a coordinator kill -9 the ISR expansion of a restarted
    tablet server goes to the new leader (found through the leader znode the tablet servers watch)."""
    cluster = cluster_factory(coordinators=2, tablet_servers=3, tablet_overrides=TABLET_OVERRIDES)
    first = cluster.wait_for_leader(15)
    servers = cluster.names(TABLET_SERVER)
    bootstrap = ",".join(cluster.get(n).rpc_address for n in servers)
    with SyncAdmin(bootstrap, request_timeout=10.0) as admin:
        admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3)
        cluster.wait_until(lambda: _fully_replicated(admin), 20, "every bucket has a leader and an ISR of 3")
        options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
        with SyncProducer(bootstrap, options) as producer:
            sent = _produce(producer, 0, 200)
            cluster.kill(first)
            cluster.wait_for_leader(15, exclude=[first])
            victim_id = _placement(admin)[1][0]
            victim = f"{TABLET_SERVER}-{victim_id}"
            cluster.kill(victim)
            cluster.wait_until(
                lambda: all(victim_id not in isr for _, _, isr in _placement(admin).values()),
                20,
                f"tablet server {victim_id} left every ISR",
            )
            sent += _produce(producer, 200, 300)
            cluster.start_process(victim, wait=True, timeout=30)
            cluster.wait_until(lambda: _fully_replicated(admin), 30, f"tablet server {victim_id} rejoined every ISR")
            sent += _produce(producer, 500, 100)
        with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2)) as consumer:
            consumer.assign(TABLE)
            _check_exactly_once_in_order(sent, _consume_all(consumer, len(sent), 30))
