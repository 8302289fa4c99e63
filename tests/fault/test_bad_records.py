"""Finding 3 of issue 13 on real processes: batches with a valid CRC and lying records.

A producer (here: raw ProduceLog calls) sends, between good acks=all batches, each bad input the issue
names: a record whose value length says 2^31-1, a header claiming more records than present, a 16 KiB zstd
batch expanding to 512 MiB (with and without the size in its frame header) and a 64 MiB lz4 bomb. The leader
must refuse each with CORRUPT_MESSAGE, say so in its log, and write nothing: every replica's files hold
exactly the good batches, the leader's memory did not grow by the bomb, ``dump-log --verify`` passes on every
replica and a consumer reading from the start gets every good record. Before the record check, every one of
them was acknowledged and replicated.

Then the consumer side: a bad batch that is on disk anyway (written into every replica's segment while the
servers were down: what a log written before the check may hold) is met by a consumer reading from the
start, which must hand out every record before it and then raise an error naming its offset.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fluss_py.client import SyncConsumer
from fluss_py.errors import CorruptMessageError, ErrorCode
from fluss_py.record.batch import set_base_offset_and_epoch
from fluss_py.testing import bad_batches
from fluss_py.testing.zkview import ZkView
from tests.fault.replication_support import (
    DATABASE,
    bootstrap,
    consume,
    leader_isr,
    one_bucket_on_three_servers,
    produce,
    raw_produce_batch,
    server_name,
    wait_full_isr,
    wait_replicas_identical,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)
MiB = 1024 * 1024
BAD_INPUTS = {
    "value length 2^31-1": bad_batches.lying_value_length,
    "record count larger than the records": bad_batches.count_larger_than_records,
    "zstd bomb 512 MiB (size declared)": lambda: bad_batches.zstd_bomb(512 * MiB),
    "zstd bomb 512 MiB (streamed)": lambda: bad_batches.zstd_bomb(512 * MiB, declare_size=False),
    "lz4 bomb 64 MiB": lambda: bad_batches.lz4_bomb(64 * MiB),
}


def _peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM in /proc/{pid}/status")


def _dump_log_verify(directory: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fluss_py.cli.main", "dump-log", str(directory), "--verify"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_leader_refuses_every_lying_batch_and_nothing_is_written_or_replicated(cluster_factory):
    table = "bad_records"
    cluster, tb, files = one_bucket_on_three_servers(cluster_factory, table)
    with ZkView(cluster.zookeeper_address) as zk:
        leader = server_name(leader_isr(zk, cluster, tb).leader)
        wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        good_before = [b"before-%02d" % i for i in range(10)]
        assert produce(cluster, table, good_before) == list(range(10))
        wait_replicas_identical(cluster, files, 10, 15)
        on_disk = {n: f.batches() for n, f in files.items()}
        address = cluster.get(leader).rpc_address
        peak_before = _peak_rss_bytes(cluster.pid(leader))

        answers = {
            name: raw_produce_batch(address, tb, make(), acks=-1, timeout_s=10.0) for name, make in BAD_INPUTS.items()
        }

        refused = {name: (r.code, r.message) for name, r in answers.items() if r.code == ErrorCode.CORRUPT_MESSAGE}
        assert set(refused) == set(BAD_INPUTS), f"not refused with CORRUPT_MESSAGE: {answers}"
        assert "value length 2147483647" in refused["value length 2^31-1"][1]
        assert "record 3 of 10 is missing" in refused["record count larger than the records"][1]
        assert "536870912 bytes (declared" in refused["zstd bomb 512 MiB (size declared)"][1]
        for name in ("zstd bomb 512 MiB (streamed)", "lz4 bomb 64 MiB"):
            assert "over the limit of 8388608 bytes" in refused[name][1], refused[name]
        # Nothing written on any replica (the leader's files are the proof nothing could be replicated).
        assert {n: f.batches() for n, f in files.items()} == on_disk
        # The leader decompressed at most the bound, not the 512 MiB.
        assert _peak_rss_bytes(cluster.pid(leader)) - peak_before < 200 * MiB
        log_text = cluster.log_text(leader)
        assert f"bucket {tb}: refused 1 malformed batch(es) from producers, nothing written" in log_text

        good_after = [b"after-%02d" % i for i in range(10)]
        assert produce(cluster, table, good_after) == list(range(10, 20))
        wait_replicas_identical(cluster, files, 20, 15)
    assert consume(cluster, table, 0, 20) == list(enumerate(good_before + good_after))
    for name, f in files.items():
        result = _dump_log_verify(f.dir)
        assert result.returncode == 0 and "verify: OK" in result.stdout, (name, result.stdout[-2000:])


def test_a_consumer_hands_out_every_record_before_a_bad_batch_on_disk_then_names_it(cluster_factory):
    table = "bad_on_disk"
    cluster, tb, files = one_bucket_on_three_servers(cluster_factory, table)
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        good = [b"good-%02d" % i for i in range(10)]
        assert produce(cluster, table, good) == list(range(10))
        wait_replicas_identical(cluster, files, 10, 15)
        epoch = files[server_name(REPLICAS[0])].batches()[-1].leader_epoch
    # The servers down, the same bad batch (offset 10, 4 records, the 4th lying) goes into every replica.
    servers = [server_name(s) for s in REPLICAS]
    assert set(cluster.stop_many(servers, 30).values()) == {"stopped"}
    bad = bytearray(bad_batches.lying_value_length(3))
    set_base_offset_and_epoch(bad, 0, 10, epoch)
    for f in files.values():
        segment = sorted(f.dir.glob("*.log"))[-1]
        with segment.open("ab") as out:
            out.write(bad)
        result = _dump_log_verify(f.dir)
        assert result.returncode == 1 and "value length 2147483647" in result.stdout, result.stdout[-2000:]
    for name in servers:
        cluster.start_process(name)
    cluster.wait_ready(servers, timeout=60)

    consumer = SyncConsumer(bootstrap(cluster))
    try:
        consumer.assign(f"{DATABASE}.{table}", [0])
        consumer.seek_to_beginning()
        got: list[tuple[int, bytes | None]] = []
        error: CorruptMessageError | None = None

        def read_until_error() -> bool:
            nonlocal error
            try:
                got.extend((r.offset, r.value) for r in consumer.poll(0.5))
            except CorruptMessageError as e:
                error = e
            return error is not None

        cluster.wait_until(read_until_error, 60, "the consumer to meet the bad batch")
    finally:
        consumer.close()
    assert got == list(enumerate(good))
    assert "offset 10" in str(error) and "value length 2147483647" in str(error) and "seek past" in str(error)
