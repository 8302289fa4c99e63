"""Checkpointed state against the log it describes (docs/storage.md "Bad checkpoints"): pure decisions.

A checkpoint that parses may still be wrong (a bad byte that is still a digit, a file from another
directory, a bug). The log's batches are the evidence; what contradicts them is rebuilt from them by the
caller (``LogLoader``), with one warning. Nothing here does I/O: the loader passes what it read.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass

from fluss_py.types import EpochEntry


def epoch_cache_contradiction(
    entries: list[EpochEntry],
    log_start: int,
    log_end: int,
    batch_at: Callable[[int], tuple | None],
    last_batch: tuple | None,
    clean: bool,
) -> str | None:
    """Why ``entries`` (a leader-epoch checkpoint as loaded) cannot describe the log ``[log_start, log_end)``,
    or None. ``batch_at(offset)`` is the header of the batch holding ``offset`` (None: none); ``last_batch``
    the last batch's header. Checked (two header reads per entry):

    - every entry starting inside the log starts exactly at a batch whose leader epoch is the entry's, and
      the batch before it has the previous entry's epoch;
    - the last batch's epoch is the one the entries give for its offset (no entry missing at the end);
    - after a clean shutdown, no entry starts past the log end (after a crash, entries past the end are the
      expected remains of a lost tail: the loader drops them quietly, as Kafka does).

    An entry starting exactly at the log end is a new leader's epoch, assigned before its first write.
    """
    starts = [e.start_offset for e in entries]
    for i, e in enumerate(entries):
        if e.start_offset > log_end:
            if clean:
                return f"entry {e} starts past the log end {log_end}"
            continue
        if e.start_offset < log_start or e.start_offset == log_end:
            continue
        h = batch_at(e.start_offset)
        if h is None or h[0] != e.start_offset:
            where = "no batch" if h is None else f"the batch at {h[0]}..{h[0] + h[6]}"
            return f"entry {e} does not start at a batch boundary ({where} holds offset {e.start_offset})"
        if h[2] != e.epoch:
            return f"entry {e}: the batch at offset {e.start_offset} has leader epoch {h[2]}"
        if e.start_offset > log_start and (reason := _epoch_before(entries, starts, i, batch_at)) is not None:
            return reason
    if last_batch is not None and last_batch[0] >= log_start:
        epoch = _epoch_of(entries, starts, last_batch[0])
        if epoch != last_batch[2]:
            return (
                f"the last batch (offset {last_batch[0]}) has leader epoch {last_batch[2]}, the checkpoint says "
                f"{'none' if epoch is None else epoch}"
            )
    return None


def _epoch_of(entries: list[EpochEntry], starts: list[int], offset: int, upto: int | None = None) -> int | None:
    """The epoch the first ``upto`` entries (all by default) give ``offset`` (``starts``: their start offsets)."""
    i = bisect.bisect_right(starts, offset, 0, len(starts) if upto is None else upto)
    return entries[i - 1].epoch if i else None


def _epoch_before(
    entries: list[EpochEntry], starts: list[int], i: int, batch_at: Callable[[int], tuple | None]
) -> str | None:
    """The batch just before entry i's start belongs to the previous entry's epoch (or, with no previous
    entry, to a lower epoch): otherwise entry i starts later than its epoch did."""
    e = entries[i]
    h = batch_at(e.start_offset - 1)
    if h is None:
        return None
    expected = _epoch_of(entries, starts, h[0], upto=i)
    if (expected is not None and h[2] != expected) or (expected is None and h[2] >= e.epoch):
        return f"entry {e}: the batch before it (offset {h[0]}) has leader epoch {h[2]}"
    return None


@dataclass(frozen=True, slots=True)
class Offsets:
    """A log's offsets after reconciliation, and what was wrong with the checkpointed ones (empty: nothing)."""

    log_start: int
    high_watermark: int
    recovery_point: int
    problems: tuple[str, ...] = ()


def reconcile_offsets(
    first_base: int, log_end: int, log_start: int | None, hw: int, recovery_point: int, clean: bool
) -> Offsets:
    """Checkpointed log start, HW and recovery point against a non-empty log ``[first_base, log_end)``.

    - log start: below the first segment it is raised to it (retention deleted segments after the last
      checkpoint); past the log end it contradicts the log, which is kept: the log start becomes the first
      segment's base (replication moves it up again if the leader's is higher).
    - HW and recovery point: clamped into ``[log start, log end]``; one past the log end after a clean
      shutdown is a contradiction (reported), after a crash the remains of a lost unflushed tail.
    - after a clean shutdown the recovery point is the log end (everything was flushed).
    """
    problems: list[str] = []
    start = first_base if log_start is None else max(log_start, first_base)
    if start > log_end:
        problems.append(f"log start offset {start} is past the log end {log_end}; using {first_base}")
        start = first_base
    if clean and hw > log_end:
        problems.append(f"high watermark {hw} is past the log end {log_end}")
    if clean and recovery_point > log_end:
        problems.append(f"recovery point {recovery_point} is past the log end {log_end}")
    return Offsets(
        log_start=start,
        high_watermark=min(max(hw, start), log_end),
        recovery_point=log_end if clean else min(max(recovery_point, start), log_end),
        problems=tuple(problems),
    )
