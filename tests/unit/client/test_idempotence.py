"""BucketSequencer: the pure per-bucket ordering / exactly-once rules (idempotence.py docstring)."""

from __future__ import annotations

from dataclasses import dataclass

from fluss_py.client.producer.idempotence import BucketSequencer, Outcome
from fluss_py.errors import (
    DuplicateSequenceError,
    NetworkExceptionError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceError,
    RecordBatchTooLargeError,
    UnknownWriterIdError,
)


@dataclass(eq=False)
class B:
    record_count: int = 2
    base_sequence: int = -1
    writer_id: int = -1
    ambiguous: bool = False


def warm(max_in_flight: int = 5) -> BucketSequencer:
    """A sequencer whose first batch (sequences 0-1) is acknowledged, so it may pipeline."""
    s = BucketSequencer(7, max_in_flight=max_in_flight)
    first = B()
    s.assign(first)
    s.on_success(first)
    return s


def sent(seq: BucketSequencer, n: int) -> list[B]:
    batches = [B() for _ in range(n)]
    for b in batches:
        assert seq.can_send_new()
        seq.assign(b)
    return batches


def test_the_first_batch_goes_alone_then_in_flight_is_bounded() -> None:
    s = BucketSequencer(7, max_in_flight=3)
    (first,) = sent(s, 1)
    assert not s.can_send_new()  # the leader has no state for this writer yet
    s.on_success(first)
    bs = sent(s, 3)
    assert [b.base_sequence for b in bs] == [2, 4, 6]
    assert all(b.writer_id == 7 for b in bs)
    assert not s.can_send_new()
    s.on_success(bs[0])
    assert s.acked_next == 4 and s.can_send_new()


def test_retries_wait_for_in_flight_and_go_one_at_a_time_in_sequence_order() -> None:
    s = warm()
    b0, b1, b2 = sent(s, 3)
    assert s.on_error(b1, OutOfOrderSequenceError(), expired=False) is Outcome.RETRY  # gap: b0 pending
    assert s.on_error(b0, NotLeaderOrFollowerError(), expired=False) is Outcome.RETRY
    assert s.take_retry() is None  # b2 still in flight
    assert not s.can_send_new()
    assert s.on_error(b2, NotLeaderOrFollowerError(), expired=False) is Outcome.RETRY
    assert s.take_retry() is b0
    assert s.take_retry() is None  # one at a time
    s.on_success(b0)
    assert s.take_retry() is b1
    s.on_success(b1)
    assert s.take_retry() is b2
    s.on_success(b2)
    assert s.idle and s.can_send_new()
    assert [b.base_sequence for b in (b0, b1, b2)] == [2, 4, 6]  # never renumbered


def test_out_of_order_below_acked_means_already_in_the_log() -> None:
    s = warm()
    b0, b1 = sent(s, 2)
    assert s.on_error(b0, NetworkExceptionError(), expired=False) is Outcome.RETRY
    s.on_success(b1)  # b1 appended => b0 was appended too
    b0_again = s.take_retry()
    assert b0_again is b0
    assert s.on_error(b0, OutOfOrderSequenceError(), expired=False) is Outcome.DONE_NO_OFFSET
    assert s.idle


def test_duplicate_sequence_completes_without_offset() -> None:
    s = warm()
    (b0,) = sent(s, 1)
    assert s.on_error(b0, DuplicateSequenceError(), expired=False) is Outcome.DONE_NO_OFFSET


def test_a_duplicate_counts_as_acknowledged_for_lost_state_detection() -> None:
    """Rule 5: a duplicate is in the log, so the leader's next expected sequence is past it. Without
    moving ``acked_next`` a later lost-state answer (rule 4) would look like a gap and be retried until
    the delivery timeout instead of failing at once under acks=all."""
    s = BucketSequencer(7, max_in_flight=5, acks_all=True)
    first = B()
    s.assign(first)
    assert s.on_error(first, DuplicateSequenceError(), expired=False) is Outcome.DONE_NO_OFFSET
    assert s.acked_next == 2 and s.can_send_new()  # pipelining resumes as after an acknowledgement
    (b1,) = sent(s, 1)
    assert s.on_error(b1, OutOfOrderSequenceError(), expired=False) is Outcome.FAIL  # b1 == acked_next
    assert s.lost_state == 1


def test_lost_writer_state_resets_to_a_new_writer_id() -> None:
    s = warm()
    b0, b1 = sent(s, 2)
    s.on_success(b0)
    assert s.on_error(b1, OutOfOrderSequenceError(), expired=False) is Outcome.RETRY  # b1 == acked_next
    assert s.lost_state == 1  # acks=1 (the default here): retried after the reset, counted for the log
    assert s.needs_reset() and s.take_retry() is None
    assert s.reset(8) == []
    assert (b1.writer_id, b1.base_sequence, s.next_sequence) == (8, 0, 2)
    assert s.take_retry() is b1


def test_lost_acknowledged_batches_fail_the_batch_with_acks_all() -> None:
    """Rule 4 under acks=all: the leader lacks batches it acknowledged, which acks=all forbids: the batch
    fails (visible) instead of being retried, and the batches behind it restart under a new writer id."""
    s = BucketSequencer(7, max_in_flight=5, acks_all=True)
    first = B()
    s.assign(first)
    s.on_success(first)
    b0, b1 = sent(s, 2)
    s.on_success(b0)
    assert s.on_error(b1, OutOfOrderSequenceError(), expired=False) is Outcome.FAIL  # b1 == acked_next
    assert s.lost_state == 1
    assert s.needs_reset() and s.reset(8) == []
    (b2,) = sent(s, 1)
    assert (b2.writer_id, b2.base_sequence) == (8, 0)


def test_out_of_order_above_acked_is_not_lost_state_even_with_acks_all() -> None:
    s = BucketSequencer(7, max_in_flight=5, acks_all=True)
    first = B()
    s.assign(first)
    s.on_success(first)
    _b0, b1 = sent(s, 2)
    assert s.on_error(b1, OutOfOrderSequenceError(), expired=False) is Outcome.RETRY  # b0 is still unresolved
    assert s.lost_state == 0 and s.reset_from is None


def test_unknown_writer_id_also_resets() -> None:
    s = warm()
    (b0,) = sent(s, 1)
    assert s.on_error(b0, UnknownWriterIdError(), expired=False) is Outcome.RETRY
    assert s.needs_reset()


def test_fatal_error_renumbers_the_batches_behind_it() -> None:
    s = warm()
    b0, b1, b2 = sent(s, 3)
    assert s.on_error(b0, RecordBatchTooLargeError(), expired=False) is Outcome.FAIL
    assert s.on_error(b1, OutOfOrderSequenceError(), expired=False) is Outcome.RETRY
    assert s.on_error(b2, OutOfOrderSequenceError(), expired=False) is Outcome.RETRY
    assert s.needs_reset()
    assert s.reset(9) == []
    assert [(b.writer_id, b.base_sequence) for b in (b1, b2)] == [(9, 0), (9, 2)]


def test_earlier_retries_finish_under_the_old_writer_before_a_reset() -> None:
    s = warm()
    b0, b1, b2 = sent(s, 3)
    assert s.on_error(b0, NetworkExceptionError(), expired=False) is Outcome.RETRY
    assert s.on_error(b1, RecordBatchTooLargeError(), expired=False) is Outcome.FAIL
    assert s.on_error(b2, OutOfOrderSequenceError(), expired=False) is Outcome.RETRY
    assert not s.needs_reset()  # b0 (before the failed batch) is still unresolved
    assert s.take_retry() is b0 and b0.writer_id == 7
    s.on_success(b0)
    assert s.needs_reset()
    s.reset(8)
    assert (b2.writer_id, b2.base_sequence) == (8, 0)


def test_expired_ambiguous_batches_fail_and_the_rest_restart() -> None:
    s = warm()
    b0, b1, b2 = sent(s, 3)
    assert s.on_error(b0, NetworkExceptionError(), expired=False) is Outcome.RETRY
    assert s.on_error(b1, NetworkExceptionError(), expired=False) is Outcome.RETRY
    assert s.on_error(b2, NotLeaderOrFollowerError(), expired=False) is Outcome.RETRY
    doomed = s.expire_retries(lambda b: b is b0)
    assert doomed == [b0, b1]  # b1 may have been appended after b0: its fate is unknown too
    assert s.needs_reset()
    s.reset(8)
    assert (b2.writer_id, b2.base_sequence) == (8, 0)
