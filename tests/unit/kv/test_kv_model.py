"""The KV invariants of docs/primary-key-tables.md §1 under random histories: two replicas of one primary-key
bucket (real LogTablets and RocksDB stores in tmp_path) take random upserts, deletes and partial updates,
idempotent retries, replication in random pieces, apply rounds of random sizes (some ending inside a batch),
leader changes, truncations (to the new leader's end, and below the HW as an unclean election or a corrupt
segment does), crashes (close without flush, and a crash in the middle of an apply round), and KV stores
that lose their latest writes (restored from an older checkpoint). After every step:

- each KV equals the KV replayed from its own log up to its applied offset (invariants 1 and 3), and every
  change's old row in the log is the row the replay holds (what the leader merged against was right: the
  pre-write buffer, invariant 7);
- no KV ever applied past the highest HW its replica knew (invariant 2);
- the leader's view (buffer over KV) of every key is the replay of its whole log (invariant 7);
- a duplicate of an acknowledged idempotent batch appends nothing and answers its original offsets.

At the end both replicas apply everything and hold the same rows.
"""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
import rocksdict

from fluss_py.kv.tablet import KvTablet
from fluss_py.log.tablet import LogTablet
from tests.unit.kv.helpers import (
    TB,
    delete,
    key,
    kv_batch,
    kv_contents,
    open_kv,
    open_log,
    partial,
    replay,
    upsert,
)

KEYS = 12


class Crash(Exception):
    """The process died in the middle of something."""


class CrashAfterFirstWrite:
    """Stands for the store's RocksDB handle in one apply round: lets one write through, then the process
    dies at the next one (an apply that wrote rows and applied offset separately would be caught half done)."""

    def __init__(self, db: rocksdict.Rdict) -> None:
        self._db = db
        self._writes = 0

    def write(self, batch: rocksdict.WriteBatch, *options: rocksdict.WriteOptions) -> None:
        self._writes += 1
        if self._writes > 1:
            raise Crash
        self._db.write(batch, *options)

    def __getattr__(self, name: str):
        return getattr(self._db, name)


class Node:
    """One replica: its log, its KV, the highest HW it ever knew, and how many times its KV went backwards
    durably (an undo or a rebuild: a KV checkpoint taken before one no longer matches the log)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.log: LogTablet = open_log(path)
        self.kv: KvTablet = open_kv(self.log)
        self.max_hw = self.log.high_watermark
        self.generation = 0

    def set_hw(self, hw: int) -> None:
        self.log.update_high_watermark(hw)
        self.max_hw = max(self.max_hw, self.log.high_watermark)

    def apply(self, max_bytes: int, max_records: int = 2**62) -> None:
        self.kv.apply_committed(self.log, max_bytes, max_records)
        assert self.kv.applied_offset <= self.log.high_watermark

    def truncate_to(self, offset: int) -> None:
        if offset < self.kv.applied_offset:
            self.generation += 1
        self.kv.before_truncate(self.log, offset)
        self.log.truncate_to(offset)
        self.kv.after_truncate(self.log)

    def _reopen_kv(self, leader: bool) -> None:
        self.kv = open_kv(self.log)
        self.generation += self.kv.rebuilds
        if leader:
            self.kv.become_leader(self.log)

    def crash(self, leader: bool) -> None:
        hw = self.log.high_watermark
        self.kv.close_without_flush()
        self.log.close_without_flush()
        self.log = LogTablet.open(self.path, TB, self.log.config, high_watermark=hw, clean_shutdown=False)
        self.log.holds_changelog = True
        self._reopen_kv(leader)

    def crash_while_applying(self, leader: bool) -> None:
        real = self.kv.store._db
        assert real is not None
        self.kv.store._db = CrashAfterFirstWrite(real)  # type: ignore[assignment]
        try:
            self.kv.apply_committed(self.log, 1 << 20)
        except Crash:
            pass
        self.kv.store._db = real
        del real  # (the last reference: dropping it closes RocksDB)
        self.crash(leader)

    def lose_latest_kv_writes(self, checkpoint: Path, leader: bool) -> None:
        """A power cut took the KV's unsynced WAL: it comes back as it was at ``checkpoint``."""
        self.kv.close_without_flush()
        shutil.rmtree(self.path / "kv")
        shutil.copytree(checkpoint, self.path / "kv")
        self._reopen_kv(leader)

    def check(self, leader: bool) -> None:
        kv, log = self.kv, self.log
        assert kv.applied_offset <= self.max_hw, "applied beyond anything committed"
        assert log.log_start_offset <= kv.applied_offset <= log.log_end_offset
        assert kv_contents(kv) == replay(log, kv.applied_offset), "the KV is not its log replayed"
        if leader and kv.buffer is not None:
            full = replay(log, log.log_end_offset)
            for i in range(KEYS):
                assert kv._old_row(key(i)) == full.get(key(i)), f"leader's view of key {i}"


def random_records(rng: random.Random) -> list[tuple[bytes, bytes]]:
    out = []
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(KEYS)
        r = rng.random()
        if r < 0.55:
            out.append(upsert(i, rng.choice(["a", "b", None, "x" * rng.randint(0, 40)]), rng.randint(0, 9)))
        elif r < 0.8:
            out.append(delete(i))
        else:
            out.append(partial(i, rng.randint(0, 9)))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_every_kv_is_its_log_replayed_through_random_histories(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    nodes = [Node(tmp_path / "a" / "7-0"), Node(tmp_path / "b" / "7-0")]
    leader, epoch = 0, 0
    nodes[0].kv.become_leader(nodes[0].log)
    writer_epoch, writer_seq, last_idempotent = 0, 0, None  # (batch bytes, its LogAppendInfo)
    checkpoints: list[tuple[int, int, Path]] = []  # (node, its generation then, the copy)
    isr_both = True

    for step in range(300):
        lead, follow = nodes[leader], nodes[1 - leader]
        r = rng.random()
        if r < 0.35:  # a client write, idempotent half of the time
            if rng.random() < 0.5:
                records = kv_batch(random_records(rng), 1, writer_epoch, writer_seq)
                info = lead.kv.append_as_leader(lead.log, records, epoch)
                writer_seq += info.last_offset - info.first_offset + 1
                last_idempotent = (records, info)
            else:
                lead.kv.append_as_leader(lead.log, kv_batch(random_records(rng)), epoch)
        elif r < 0.40 and last_idempotent is not None:  # its retry: the original offsets, nothing written
            records, original = last_idempotent
            leo = lead.log.log_end_offset
            if original.last_offset < leo and lead.log.writer_state(1) is not None:
                again = lead.kv.append_as_leader(lead.log, records, epoch)
                if again.duplicate:
                    assert (again.first_offset, again.last_offset) == (original.first_offset, original.last_offset)
                    assert lead.log.log_end_offset == leo
        elif r < 0.58:  # the follower fetches a piece; the HW follows
            data = lead.log.read(follow.log.log_end_offset, rng.randint(1, 3000), lead.log.log_end_offset).records
            if data:
                follow.log.append_as_follower(data)
            isr_both = isr_both or follow.log.log_end_offset == lead.log.log_end_offset
            hw = min(lead.log.log_end_offset, follow.log.log_end_offset) if isr_both else lead.log.log_end_offset
            lead.set_hw(max(hw, lead.log.high_watermark))
            follow.set_hw(min(lead.log.high_watermark, follow.log.log_end_offset))
        elif r < 0.75:
            rng.choice(nodes).apply(rng.randint(1, 4000), rng.choice([1, 3, 2**62]))  # rounds may cut a batch
        elif r < 0.80:  # leader change: the old leader truncates to the new one's end (KIP-101)
            epoch += 1
            leader = 1 - leader
            lead, follow = nodes[leader], nodes[1 - leader]
            follow.kv.become_follower()
            lead.kv.become_leader(lead.log)
            if follow.log.log_end_offset > lead.log.log_end_offset:
                follow.truncate_to(lead.log.log_end_offset)
            isr_both = False  # until the new follower catches up
            # the writer's latest batches may be gone with the old leader's tail: it starts a new epoch
            writer_epoch, writer_seq, last_idempotent = writer_epoch + 1, 0, None
        elif r < 0.84:  # the follower truncates anywhere, even below its HW (unclean election, corrupt segment)
            follow.truncate_to(rng.randint(follow.log.log_start_offset, follow.log.log_end_offset))
            isr_both = False
            writer_epoch, writer_seq, last_idempotent = writer_epoch + 1, 0, None
        elif r < 0.88:
            n = rng.choice(nodes)
            n.crash(n is lead)
        elif r < 0.91:
            n = rng.choice(nodes)
            n.crash_while_applying(n is lead)
        elif r < 0.95:  # a consistent copy of a KV, to come back after a later power cut
            n = rng.randrange(2)
            target = tmp_path / f"checkpoint-{step}"
            rocksdict.Checkpoint(nodes[n].kv.store.db).create_checkpoint(str(target))
            checkpoints.append((n, nodes[n].generation, target))
        elif checkpoints:
            n, generation, target = checkpoints.pop(rng.randrange(len(checkpoints)))
            if nodes[n].generation == generation:  # (older ones a synced undo or rebuild made impossible)
                nodes[n].lose_latest_kv_writes(target, nodes[n] is lead)
        for n in nodes:
            n.check(n is nodes[leader])

    # everything replicated, committed and applied: both replicas hold the same rows
    lead, follow = nodes[leader], nodes[1 - leader]
    if follow.log.log_end_offset > lead.log.log_end_offset:
        follow.truncate_to(lead.log.log_end_offset)
    while follow.log.log_end_offset < lead.log.log_end_offset:
        data = lead.log.read(follow.log.log_end_offset, 1 << 20, lead.log.log_end_offset).records
        follow.log.append_as_follower(data)
    for n in nodes:
        n.set_hw(lead.log.log_end_offset)
        while n.kv.applied_offset < n.log.high_watermark:
            n.apply(1 << 16)
        n.check(n is lead)
    assert kv_contents(nodes[0].kv) == kv_contents(nodes[1].kv) == replay(lead.log, lead.log.log_end_offset)
    assert lead.log.log_end_offset > 20  # the history wrote something
