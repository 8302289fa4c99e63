"""Finding 5 of issue 13 on real processes: a follower restarted with a bad checkpoint file.

The follower is stopped, one of its checkpoint files is replaced, and it is started again. Whatever the file
holds it must start, say once in its log which file it rebuilt, rewrite the file from its log, rejoin the
ISR and take part in acks=all writes again, with no error repeating in its log:

- a leader-epoch-checkpoint with non-UTF-8 bytes (crashed the whole tablet server at start);
- a leader-epoch-checkpoint whose lines parse but name an epoch above the log's over data it holds (the
  follower refused every fetched batch and logged an error every backoff, forever; acks=all writes stalled
  until the ISR shrank);
- the data directory's three offset checkpoints with non-UTF-8 bytes.
"""

from __future__ import annotations

import pytest

from fluss_py.log.checkpoint import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from fluss_py.testing.zkview import ZkView
from tests.fault.replication_support import (
    epochs_of_batches,
    leader_isr,
    one_bucket_on_three_servers,
    produce,
    server_name,
    wait_for_isr,
    wait_full_isr,
    wait_replicas_identical,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)
NON_UTF8 = b"0\n2\n\xff\xfe\xfd 0\n\xc3\x28 10\n"


def _epoch_above_the_logs(epoch: int) -> bytes:
    return b"0\n2\n%d 0\n%d 10\n" % (epoch, epoch + 7)


CASES = {
    "non-utf8-epoch-checkpoint": ("bucket", lambda epoch: {LEADER_EPOCH_CHECKPOINT: NON_UTF8}),
    "epoch-above-the-logs": ("bucket", lambda epoch: {LEADER_EPOCH_CHECKPOINT: _epoch_above_the_logs(epoch)}),
    "non-utf8-data-dir-checkpoints": (
        "data",
        lambda epoch: {
            name: NON_UTF8
            for name in (HIGH_WATERMARK_CHECKPOINT, RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT)
        },
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_follower_restarted_with_a_bad_checkpoint_rebuilds_it_once_and_rejoins(cluster_factory, case: str):
    where, contents = CASES[case]
    table = f"checkpoint_{case.replace('-', '_')}"
    cluster, tb, files = one_bucket_on_three_servers(cluster_factory, table)
    with ZkView(cluster.zookeeper_address) as zk:
        lai = leader_isr(zk, cluster, tb)
        wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        first = [b"first-%02d" % i for i in range(20)]
        assert produce(cluster, table, first) == list(range(20))
        wait_replicas_identical(cluster, files, 20, 15)
        follower_id = next(s for s in REPLICAS if s != lai.leader)
        follower = server_name(follower_id)
        epoch = files[follower].batches()[-1].leader_epoch

        assert cluster.stop_process(follower, timeout=30) == "stopped"
        wait_for_isr(zk, cluster, tb, lambda now: follower_id not in now.isr, 30, f"{follower} out of the ISR")
        directory = files[follower].dir if where == "bucket" else files[follower].dir.parent
        for name, data in contents(epoch).items():
            (directory / name).write_bytes(data)
        log_before = cluster.log_text(follower)
        cluster.start_process(follower)
        cluster.wait_ready([follower], timeout=60)  # (fails at once if the process exits)

        wait_full_isr(zk, cluster, tb, REPLICAS, 30)
        second = [b"second-%02d" % i for i in range(10)]
        assert produce(cluster, table, second) == list(range(20, 30))
        wait_replicas_identical(cluster, files, 30, 15)

    log_text = cluster.log_text(follower)[len(log_before) :]
    warnings = [line for line in log_text.splitlines() if " WARN" in line]
    errors = [line for line in log_text.splitlines() if " ERROR" in line]
    assert not errors, errors[:5]
    for name in contents(epoch):
        about = [line for line in warnings if name in line]
        assert len(about) == 1, (name, warnings)
    assert all("rebuilding it from the log" in line for line in warnings if LEADER_EPOCH_CHECKPOINT in line)

    def rewritten() -> bool:
        return all((directory / name).read_bytes().isascii() for name in contents(epoch))

    cluster.wait_until(rewritten, 30, "the server to rewrite the checkpoint files")
    if where == "bucket":
        assert files[follower].epochs() == epochs_of_batches(files[follower].batches())
