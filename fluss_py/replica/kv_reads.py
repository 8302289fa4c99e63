"""Lookup, PrefixLookup and ScanKv: the committed rows of primary-key buckets, read on their leader only
(docs/primary-key-tables.md §5).

Before a bucket is read, its leader waits (bounded by the request's timeout, else KV_NOT_READY, retriable)
until its ISR confirmed after the read arrived that it still leads (``read_fence.py``: no newer leader can
have acknowledged a write the read would miss) and its KV has applied everything below ``max(HW at arrival,
start offset of its leader epoch)`` (§1 invariant 5): a lookup sees every write acknowledged before it
arrived, a deposed leader that does not know it yet answers nothing, and a new leader, whose HW may lag the
old leader's, serves nothing until everything it inherited is known committed and applied. A request carries
many buckets; each gets its own answer or error.

Keys and prefixes are input: a key that is not exactly one key of the table, or not of the bucket it is sent
to, is INVALID_ROW; a bucket of a log table is TABLE_TYPE_MISMATCH. Answers are bounded in rows and bytes.

Who may call: the tablet service (through the ``ReplicaManager``), on the server's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fluss_py.errors import ApiError, InvalidRequestError, InvalidRowError, KvNotReadyError, TableTypeMismatchError
from fluss_py.kv.tablet import KvTablet
from fluss_py.replica.kv_apply import KvApplier
from fluss_py.replica.messages import as_api_error
from fluss_py.replica.replica import Replica
from fluss_py.schema.row import RowCodec
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.replica.manager import ReplicaManager

MAX_KEYS = 10_000  # keys or prefixes of one bucket in one request
DEFAULT_ROWS = 1_000  # rows per prefix or scan page when the request names no limit
MAX_ROWS = 10_000
MAX_ANSWER_BYTES = 16 * 1024 * 1024  # rows of one answer, all buckets together (the RPC limit is 64 MiB)


@dataclass(frozen=True, slots=True)
class KvReadResult:
    """One bucket's answer: ``values`` (Lookup: a row or None per key), ``groups`` (PrefixLookup: the rows of
    each prefix and whether more matched), ``rows``/``more`` (ScanKv: (key, row) in key order, rows left);
    ``applied_offset``: the KV holds every change below it."""

    error: ApiError | None = None
    values: list[bytes | None] = field(default_factory=list)
    groups: list[tuple[list[bytes], bool]] = field(default_factory=list)
    rows: list[tuple[bytes, bytes]] = field(default_factory=list)
    more: bool = False
    applied_offset: int = -1


Reader = Callable[[TableBucket, KvTablet], KvReadResult]


class KvReads:
    """Answers the three KV reads for the ``ReplicaManager`` that built it; state lives in the replicas and
    the ``KvApplier`` (whose ``wait`` a read parks on). See the module docstring."""

    def __init__(self, manager: ReplicaManager, applier: KvApplier) -> None:
        self._rm = manager
        self._applier = applier

    async def lookup(self, buckets: Mapping[TableBucket, Sequence[bytes]], timeout_s: float) -> dict[TableBucket, Any]:
        """Per bucket: the row of each key (None: absent), in the request's order; a bucket whose rows would
        take the answer past ``MAX_ANSWER_BYTES`` is INVALID_REQUEST (ask for fewer keys at a time)."""
        budget = [MAX_ANSWER_BYTES]

        def checked(tb: TableBucket, kv: KvTablet) -> None:
            _check_each(tb, kv, buckets[tb], "key", lambda codec, key: codec.validate_key(key) is None)

        def read(tb: TableBucket, kv: KvTablet) -> KvReadResult:
            values = kv.lookup(list(buckets[tb]))
            budget[0] -= sum(len(v) for v in values if v is not None)
            if budget[0] < 0:
                raise InvalidRequestError(f"{tb}: the rows asked for pass {MAX_ANSWER_BYTES} bytes; ask fewer keys")
            return KvReadResult(values=values, applied_offset=kv.applied_offset)

        return await self._read(buckets, timeout_s, checked, read)

    async def prefix_lookup(
        self, buckets: Mapping[TableBucket, Sequence[bytes]], timeout_s: float, max_rows: int
    ) -> dict[TableBucket, KvReadResult]:
        """Per bucket: the rows whose key starts with each bucket-key prefix (at most ``max_rows`` each)."""
        limit = _limit(max_rows)
        budget = [MAX_ANSWER_BYTES]

        def checked(tb: TableBucket, kv: KvTablet) -> None:
            _check_each(tb, kv, buckets[tb], "prefix", lambda codec, p: bool(p) and codec.bucket_key_bytes(p) == p)

        def read(tb: TableBucket, kv: KvTablet) -> KvReadResult:
            groups = []
            for prefix in buckets[tb]:
                rows, more = kv.prefix_lookup(prefix, limit)
                rows, cut = _within(rows, budget, len)
                groups.append((rows, more or cut))
            return KvReadResult(groups=groups, applied_offset=kv.applied_offset)

        return await self._read(buckets, timeout_s, checked, read)

    async def scan(self, tb: TableBucket, after_key: bytes | None, max_rows: int, timeout_s: float) -> KvReadResult:
        """One page of a bucket's rows in key order, after ``after_key`` (None: from the first)."""
        limit = _limit(max_rows)

        def read(tb: TableBucket, kv: KvTablet) -> KvReadResult:
            rows, more = kv.scan(after_key, limit)
            rows, cut = _within(rows, [MAX_ANSWER_BYTES], lambda kr: len(kr[0]) + len(kr[1]))
            return KvReadResult(rows=rows, more=more or cut, applied_offset=kv.applied_offset)

        return (await self._read({tb: ()}, timeout_s, lambda tb, kv: None, read))[tb]

    # ------------------------------------------------------------ the wait (invariant 5)
    async def _read(
        self,
        buckets: Mapping[TableBucket, Any],
        timeout_s: float,
        check: Callable[[TableBucket, KvTablet], None],
        read: Reader,
    ) -> dict[TableBucket, KvReadResult]:
        out: dict[TableBucket, KvReadResult] = {}
        waiting: dict[TableBucket, tuple[Replica, int, int]] = {}  # replica, its leader epoch, the target
        fenced: list[TableBucket] = []  # their ISR must confirm the leader after now
        fence = self._rm.reads.fence
        for tb in buckets:
            try:
                replica, kv = self._leader_kv(tb)
                check(tb, kv)
                target = max(replica.high_watermark, replica.leader_epoch_start_offset)
                if fence.needed(replica):
                    fenced.append(tb)
                elif kv.applied_offset >= target:
                    out[tb] = read(tb, kv)
                    continue
                waiting[tb] = (replica, replica.leader_epoch, target)
            except Exception as e:
                out[tb] = KvReadResult(as_api_error(e, f"KV read of {tb}"))
        unconfirmed: set[TableBucket] = set()
        if waiting:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + timeout_s
            unconfirmed = await fence.confirm(fenced, timeout_s)
            behind = {tb: t for tb, (r, _, t) in waiting.items() if tb not in unconfirmed and _applied(r) < t}
            await self._applier.wait(behind, max(0.0, deadline - loop.time()))
        for tb, (replica, epoch, target) in waiting.items():
            try:
                now, kv = self._leader_kv(tb)  # (NOT_LEADER_OR_FOLLOWER when it stopped leading meanwhile)
                if now is not replica or now.leader_epoch != epoch:
                    raise KvNotReadyError(f"{tb}: a new leader epoch began during the wait; retry")
                if tb in unconfirmed:
                    others = [r for r in now.maximal_isr if r != self._rm.server_id]
                    raise KvNotReadyError(
                        f"{tb}: ISR members {others} did not all fetch at leader epoch {epoch} within "
                        f"{timeout_s:.3f}s of the read (a member that stopped fetching holds reads until it "
                        "leaves the ISR); retry"
                    )
                if kv.applied_offset < target:
                    raise KvNotReadyError(
                        f"{tb}: the leader's KV applied up to {kv.applied_offset}, not yet {target} (its HW and "
                        f"the start of its leader epoch) within {timeout_s:.3f}s; retry"
                    )
                out[tb] = read(tb, kv)
            except Exception as e:
                out[tb] = KvReadResult(as_api_error(e, f"KV read of {tb}"))
        return {tb: out[tb] for tb in buckets}

    def _leader_kv(self, tb: TableBucket) -> tuple[Replica, KvTablet]:
        replica = self._rm.leader_replica(tb)
        kv = replica.kv
        if kv is None:
            raise TableTypeMismatchError(f"{tb}: a bucket of a log table has no rows to look up")
        if kv.failed is not None:
            raise KvNotReadyError(f"{tb}: the KV stopped applying ({kv.failed})")
        return replica, kv


def _applied(replica: Replica) -> int:
    """The applied offset of the replica's KV (-1: it has none any more; the read fails when it looks again)."""
    return -1 if replica.kv is None else replica.kv.applied_offset


def _limit(asked: int) -> int:
    return DEFAULT_ROWS if asked <= 0 else min(asked, MAX_ROWS)


def _check_each(
    tb: TableBucket, kv: KvTablet, items: Sequence[bytes], what: str, whole: Callable[[RowCodec, bytes], bool]
) -> None:
    """INVALID_ROW unless every key (prefix) is ``whole`` (exactly one key, bucket key) of the table and of
    bucket ``tb``; INVALID_REQUEST for too many."""
    if len(items) > MAX_KEYS:
        raise InvalidRequestError(f"{tb}: {len(items)} keys or prefixes; at most {MAX_KEYS} per bucket")
    codec, n = kv.codec, kv.table.num_buckets
    for i, item in enumerate(items):
        try:
            ok = whole(codec, item)
        except ApiError as e:
            raise InvalidRowError(f"{tb}: {what} {i}: {e.message}") from None
        if not ok:
            raise InvalidRowError(f"{tb}: {what} {i} is not an encoded {what} of the table")
        if n and (bucket := codec.bucket_of(item, n)) != tb.bucket:
            raise InvalidRowError(f"{tb}: {what} {i} belongs to bucket {bucket}, not {tb.bucket}")


def _within(rows: list[Any], budget: list[int], size: Callable[[Any], int]) -> tuple[list[Any], bool]:
    """The first rows that fit the answer's remaining byte budget (at least one), and whether some were cut."""
    for i, row in enumerate(rows):
        budget[0] -= size(row)
        if budget[0] < 0 and i > 0:
            return rows[:i], True
    return rows, False
