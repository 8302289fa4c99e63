"""Idempotent writing: writer ids and the per-bucket sequence state machine.

A producer writes as one *writer id* (allocated by the coordinator leader, AllocateWriterId), writer epoch
0. Every batch carries (writer id, writer epoch, base sequence); a bucket's sequences start at 0 and grow
by the batch's record count. The leader appends a batch only if its base sequence is the next expected
one, answers a retried batch it already holds with the original offsets (it remembers a writer's last 5
batches — hence at most 5 in flight per bucket), and refuses a gap with OUT_OF_ORDER_SEQUENCE.

``BucketSequencer`` is the pure per-bucket state (no I/O, unit-tested exhaustively). Rules:

1. Sequences are assigned when a batch is first sent (drained), consecutively, in accumulator order.
2. At most ``max_in_flight`` batches of a bucket are on the wire; they are kept sorted by sequence. Until
   the first batch under a writer id is acknowledged it is the only one: a leader accepts *any* sequence
   from a writer it has no state for, so a later batch overtaking a refused first one would be appended
   ahead of it (and the first then looks like a duplicate below ``acked_next``).
3. A retriable failure moves the batch to ``retry`` (sorted by sequence). While ``retry`` is non-empty no
   new batch is sent; once no batch of the bucket is in flight, the retry batches are re-sent *one at a
   time in sequence order* to the current leader, with their original writer id and sequence — so a retry
   of an already appended batch is recognised as a duplicate, and a later batch never overtakes an
   earlier one (the leader would refuse it anyway).
4. OUT_OF_ORDER_SEQUENCE for a batch whose sequence is above ``acked_next`` means an earlier batch has
   not been appended yet (for example it is being retried after a leader change): retriable, never
   shown to the user. Below ``acked_next``: a later batch was acknowledged, so this one is in the log
   (complete it without an offset, -1). Equal to ``acked_next`` (nothing earlier unresolved): the leader
   holds this writer's state but not its acknowledged batches up to ``acked_next`` — it lost records it
   acknowledged. With acks=1 that is the documented loss on failover: the batch is retried after a reset
   (rule 6). With acks=all it must never happen (only an unclean election or a replication bug can do it):
   the batch fails with OUT_OF_ORDER_SEQUENCE saying so, and the bucket is reset for the batches after it
   (as Kafka's idempotent producer does). Either way ``lost_state`` counts it, for the sender to log.
5. DUPLICATE_SEQUENCE (a duplicate older than the leader remembers): in the log, completed with -1; like
   an acknowledgement it moves ``acked_next`` past the batch (under the same writer id), so rule 4 still
   recognises a later lost-state answer and rule 2's pipelining resumes.
6. A non-retriable failure of a sent batch, UNKNOWN_WRITER_ID, or rule 4's lost state set ``reset_from``
   = that batch's sequence. Batches after it cannot have been appended (they would follow a gap). Once
   nothing is in flight and every retry batch before ``reset_from`` is resolved, the bucket takes a new
   writer id and renumbers the remaining retry batches from 0, in order.
7. A sent batch that exceeds the delivery timeout has an unknown fate: it fails, and so does every
   other sent, unacknowledged batch of the bucket whose fate is unknown (``ambiguous``: it had an error
   after which it may have been appended); the bucket is reset as in rule 6 for the rest.

Sequence wrap-around past 2**31-1 is not handled in comparisons (2 billion records per writer per bucket).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Generic, Protocol, TypeVar

from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.transport import ALLOCATE_WRITER_ID
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.rpc.pb import coordinator_pb2


class SequencedBatch(Protocol):
    """What the sequencer needs of a batch (``ProducerBatch`` implements it)."""

    base_sequence: int
    writer_id: int
    record_count: int
    ambiguous: bool


class Outcome(Enum):
    """What the sender does with a batch after a failed attempt."""

    RETRY = "retry"  # re-send later (rule 3)
    DONE_NO_OFFSET = "done_no_offset"  # in the log, offset unknown (rules 4, 5)
    FAIL = "fail"  # the error goes to the user


# Errors after which the batch is certainly NOT in the log (the leader refused it before appending).
NOT_APPENDED = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TABLE_OR_BUCKET,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.OUT_OF_ORDER_SEQUENCE,
        ErrorCode.UNKNOWN_WRITER_ID,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.INVALID_RECORD_BATCH,
        ErrorCode.INVALID_TIMESTAMP,
        ErrorCode.RECORD_BATCH_TOO_LARGE,
        ErrorCode.UNSUPPORTED_COMPRESSION,
        ErrorCode.INVALID_WRITER_EPOCH,
    }
)


T = TypeVar("T", bound=SequencedBatch)


def end_sequence(batch: SequencedBatch) -> int:
    """The sequence after the batch's last record."""
    return batch.base_sequence + batch.record_count


class BucketSequencer(Generic[T]):
    """Sequence state of one bucket for one producer (rules in the module docstring).

    Owned by the producer's sender task; pure bookkeeping, no I/O.
    """

    def __init__(self, writer_id: int, max_in_flight: int, *, acks_all: bool = False) -> None:
        self.writer_id = writer_id
        self.acks_all = acks_all  # acks=all: a leader that lost acknowledged batches is an error (rule 4)
        self.lost_state = 0  # rule 4's "equal to acked_next" answers seen
        self.writer_epoch = 0
        self.max_in_flight = max_in_flight
        self.next_sequence = 0
        self.acked_next = 0  # the sequence the leader expects next, as far as we know
        self.in_flight: list[T] = []
        self.retry: list[T] = []
        self.reset_from: int | None = None

    # ---------------------------------------------------------------- sending
    def can_send_new(self) -> bool:
        # Rule 2: the first batch under a writer id goes alone (see module docstring).
        limit = self.max_in_flight if self.acked_next > 0 else 1
        return not self.retry and self.reset_from is None and len(self.in_flight) < limit

    def assign(self, batch: T) -> None:
        """Give a never-sent batch the next sequence and mark it in flight."""
        batch.writer_id = self.writer_id
        batch.base_sequence = self.next_sequence
        self.next_sequence = end_sequence(batch)
        self.in_flight.append(batch)

    def needs_reset(self) -> bool:
        """True when rule 6's reset is due now (nothing in flight, earlier retries resolved)."""
        if self.reset_from is None or self.in_flight:
            return False
        return all(b.base_sequence >= self.reset_from for b in self.retry)

    def reset(self, new_writer_id: int) -> list[T]:
        """Apply rule 6 with a fresh writer id; returns the ambiguous retry batches that must fail (rule 7)."""
        assert self.needs_reset()
        doomed = [b for b in self.retry if b.ambiguous]
        keep = [b for b in self.retry if not b.ambiguous]
        self.writer_id = new_writer_id
        self.next_sequence = 0
        self.acked_next = 0
        self.retry = []
        self.reset_from = None
        for b in keep:
            b.writer_id = new_writer_id
            b.base_sequence = self.next_sequence
            self.next_sequence = end_sequence(b)
            self.retry.append(b)
        return doomed

    def take_retry(self) -> T | None:
        """The retry batch to re-send now (rule 3): the lowest sequence, once nothing is in flight.

        Retries go one at a time; pipelining resumes when the retry queue is empty.
        """
        if self.in_flight or not self.retry:
            return None
        head = self.retry[0]
        if self.reset_from is not None and head.base_sequence >= self.reset_from:
            return None  # a reset is due first
        self.retry.pop(0)
        self.in_flight.append(head)
        return head

    # ---------------------------------------------------------------- answers
    def on_success(self, batch: T) -> None:
        self._remove_in_flight(batch)
        self._acknowledged(batch)

    def on_error(self, batch: T, error: FlussError, expired: bool) -> Outcome:
        """Rules 3-7 for a failed attempt of an in-flight batch; ``expired``: its delivery time is up."""
        self._remove_in_flight(batch)
        code = error.code
        if code not in NOT_APPENDED:
            batch.ambiguous = True
        if code == ErrorCode.DUPLICATE_SEQUENCE:
            self._acknowledged(batch)
            return Outcome.DONE_NO_OFFSET
        if code == ErrorCode.OUT_OF_ORDER_SEQUENCE:
            if batch.base_sequence < self.acked_next:
                return Outcome.DONE_NO_OFFSET
            if batch.base_sequence == self.acked_next and not self._earlier_unresolved(batch):
                self.lost_state += 1
                self._mark_reset(batch)
                if self.acks_all:
                    return Outcome.FAIL
            return self._retry_or_expire(batch, expired)
        if code == ErrorCode.UNKNOWN_WRITER_ID:
            self._mark_reset(batch)
            return self._retry_or_expire(batch, expired)
        if error.retriable:
            return self._retry_or_expire(batch, expired)
        self._mark_reset(batch)
        return Outcome.FAIL

    def expire_retries(self, is_expired: Callable[[T], bool]) -> list[T]:
        """Rule 7 for batches waiting in ``retry``: remove and return those to fail."""
        if not any(is_expired(b) for b in self.retry):
            return []
        first = min(b.base_sequence for b in self.retry if is_expired(b))
        doomed = [b for b in self.retry if is_expired(b) or (b.ambiguous and b.base_sequence >= first)]
        for b in doomed:
            self.retry.remove(b)
        self._mark_reset_at(first)
        return doomed

    # ---------------------------------------------------------------- helpers
    def _retry_or_expire(self, batch: T, expired: bool) -> Outcome:
        if expired:
            # Its fate may be unknown and later batches hang on it: renumber the rest under a new writer id.
            self._mark_reset(batch)
            return Outcome.FAIL
        self.retry.append(batch)
        self.retry.sort(key=lambda b: b.base_sequence)
        return Outcome.RETRY

    def _acknowledged(self, batch: SequencedBatch) -> None:
        if batch.writer_id == self.writer_id:
            self.acked_next = max(self.acked_next, end_sequence(batch))

    def _earlier_unresolved(self, batch: SequencedBatch) -> bool:
        return any(b.base_sequence < batch.base_sequence for b in (*self.in_flight, *self.retry))

    def _mark_reset(self, batch: SequencedBatch) -> None:
        self._mark_reset_at(batch.base_sequence)

    def _mark_reset_at(self, sequence: int) -> None:
        self.reset_from = sequence if self.reset_from is None else min(self.reset_from, sequence)

    def _remove_in_flight(self, batch: T) -> None:
        try:
            self.in_flight.remove(batch)
        except ValueError:
            raise AssertionError(f"batch seq {batch.base_sequence} answered but not in flight") from None

    @property
    def idle(self) -> bool:
        return not self.in_flight and not self.retry and self.reset_from is None


class WriterIdSource:
    """Allocates writer ids from the coordinator leader (unique across coordinator failovers)."""

    def __init__(self, gateway: CoordinatorGateway, timeout: float) -> None:
        self._gateway = gateway
        self._timeout = timeout

    async def allocate(self) -> int:
        response = await self._gateway.call(
            ALLOCATE_WRITER_ID, coordinator_pb2.AllocateWriterIdRequest(), self._timeout
        )
        return response.writer_id
