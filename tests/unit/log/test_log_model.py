"""Property test: random append / flush / roll / truncate / crash-at-a-random-byte / reopen sequences
against a simple in-memory model of the log.

Invariants checked after every step: no flushed batch lost, no torn or corrupt batch served, offsets
contiguous from the log start, every byte of every batch as appended, epoch cache == first offset of each
epoch in the log, writer state == the last 5 idempotent batches in the log (so a retry of any of them is
answered with its original offsets).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fluss_py.log import BatchMetadata, LogConfig, LogTablet
from fluss_py.record import iter_batches
from fluss_py.types import EpochEntry

from .helpers import TB, batch

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=100, max_batch_bytes=1 << 20)

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 3), st.integers(1, 4), st.booleans(), st.booleans()),
        st.tuples(st.just("retry")),
        st.tuples(st.just("flush")),
        st.tuples(st.just("roll")),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("crash"), st.floats(0, 1)),
        st.tuples(st.just("reopen")),
    ),
    min_size=1,
    max_size=25,
)


@dataclass
class Model:
    batches: list[bytes] = field(default_factory=list)  # as stored (offsets and epoch stamped)
    flushed: int = 0  # offset below which everything was fsynced
    epoch: int = 0

    @property
    def leo(self) -> int:
        return _last(self.batches[-1]) + 1 if self.batches else 0


def _base(b: bytes) -> int:
    return int.from_bytes(b[0:8], "big", signed=True)


def _last(b: bytes) -> int:
    return _base(b) + int.from_bytes(b[23:27], "big", signed=True)


def _epoch(b: bytes) -> int:
    return int.from_bytes(b[12:16], "big", signed=True)


def _writer(b: bytes) -> tuple[int, int, int]:
    """(writer id, first seq, last seq) of a stored batch."""
    delta = int.from_bytes(b[23:27], "big", signed=True)
    seq = int.from_bytes(b[53:57], "big", signed=True)
    return int.from_bytes(b[43:51], "big", signed=True), seq, seq + delta


def writer_batches(m: Model) -> list[BatchMetadata]:
    out = [BatchMetadata(_writer(b)[1], _writer(b)[2], _base(b), _last(b)) for b in m.batches if _writer(b)[0] == 1]
    return out[-5:]


def check(t: LogTablet, m: Model) -> None:
    assert t.log_end_offset == m.leo
    got: list[bytes] = []
    offset = t.log_start_offset
    while offset < t.log_end_offset:  # a read serves one segment at most
        data = t.read(offset, 1 << 30, t.log_end_offset).records
        chunk = [b.tobytes() for b in iter_batches(data)]
        assert chunk and sum(len(g) for g in chunk) == len(data)  # whole batches only
        assert all(b.is_valid() for b in iter_batches(data))
        got += chunk
        offset = _last(chunk[-1]) + 1
    assert got == m.batches
    expected_next = 0
    for b in got:
        assert _base(b) == expected_next
        expected_next = _last(b) + 1
    derived: list[EpochEntry] = []
    for b in got:
        if not derived or _epoch(b) > derived[-1].epoch:
            derived.append(EpochEntry(_epoch(b), _base(b)))
    assert t.epoch_cache.entries() == derived
    state = t.writer_state(1)
    expected = writer_batches(m)
    assert (list(state.batches) if state else []) == expected


def crash_at(d: Path, fraction: float, flushed_bytes: int) -> None:
    """Cut the concatenated segment files at a random byte at or after the flushed prefix."""
    files = sorted(d.glob("*.log"))
    sizes = [f.stat().st_size for f in files]
    total = sum(sizes)
    cut = flushed_bytes + int((total - flushed_bytes) * fraction)
    pos = 0
    for f, size in zip(files, sizes, strict=True):
        keep = min(max(cut - pos, 0), size)
        if keep < size:
            os.truncate(f, keep)
        pos += size


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops)
def test_log_against_model(steps: list[tuple]) -> None:
    root = Path(tempfile.mkdtemp(prefix="logmodel-"))
    d = root / "1-0"
    try:
        t = LogTablet.open(d, TB, CONFIG)
        m = Model()
        for step in steps:
            kind = step[0]
            if kind == "append":
                _, nbatches, nrec, bump, idempotent = step
                if bump:
                    m.epoch += 1
                if idempotent:
                    mine = writer_batches(m)
                    seq = mine[-1].last_seq + 1 if mine else 0
                    raw = b"".join(
                        batch(nrec, tag=b"%d-" % m.leo, writer_id=1, writer_epoch=0, seq=seq + i * nrec)
                        for i in range(nbatches)
                    )
                else:
                    raw = b"".join(batch(nrec, tag=b"%d-" % m.leo) for _ in range(nbatches))
                t.append_as_leader(raw, m.epoch)
                data = t.read(m.leo, 1 << 30, t.log_end_offset).records
                m.batches += [b.tobytes() for b in iter_batches(data)]
            elif kind == "retry":
                mine = writer_batches(m)
                if mine:
                    b = mine[0]
                    n = b.last_offset - b.first_offset + 1
                    raw = batch(n, writer_id=1, writer_epoch=0, seq=b.first_seq)
                    info = t.append_as_leader(raw, m.epoch)
                    assert info.duplicate and (info.first_offset, info.last_offset) == (b.first_offset, b.last_offset)
            elif kind == "flush":
                t.flush()
                m.flushed = m.leo
            elif kind == "roll":
                t.roll()
            elif kind == "truncate":
                if m.batches:
                    keep = int(len(m.batches) * step[1])
                    target = _base(m.batches[keep]) if keep < len(m.batches) else m.leo
                    t.truncate_to(target)
                    m.batches = m.batches[:keep]
                    m.flushed = min(m.flushed, m.leo)
            elif kind == "crash":
                rp = t.recovery_point
                t.close_without_flush()
                flushed_bytes = sum(len(b) for b in m.batches if _base(b) < m.flushed)
                crash_at(d, step[1], flushed_bytes)
                t = LogTablet.open(d, TB, CONFIG, recovery_point=rp)
                # the model keeps the batches wholly inside the surviving bytes
                survived, pos = [], 0
                sizes = sum(f.stat().st_size for f in d.glob("*.log"))
                for b in m.batches:
                    if pos + len(b) > sizes:
                        break
                    survived.append(b)
                    pos += len(b)
                assert len(survived) >= sum(1 for b in m.batches if _base(b) < m.flushed)
                m.batches = survived
                m.flushed = min(m.flushed, m.leo)
            elif kind == "reopen":
                t.close()
                t = LogTablet.open(d, TB, CONFIG, recovery_point=t.recovery_point, clean_shutdown=True)
                m.flushed = m.leo
            check(t, m)
            assert t.log_end_offset >= m.flushed
        t.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
