"""Delayed produce and delayed fetch ("purgatories"): asyncio futures keyed per bucket, woken by HW/LEO moves.

No task or timer per bucket: a request waits on its own futures with ONE timeout (``wait_futures``), and the
``ReplicaManager`` calls ``complete_up_to`` / ``notify`` synchronously when a bucket's HW or LEO moves.
Per-bucket cost: a sorted list of pending produce offsets (usually appended at the end) and a set of
waiting fetches.
"""

from __future__ import annotations

import asyncio
import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fluss_py.errors import ApiError
from fluss_py.types import TableBucket


async def wait_futures(futures: Iterable[asyncio.Future[Any]], timeout_s: float) -> None:
    """Wait until every future is done or ``timeout_s`` passed (a future still pending then is cancelled; the
    caller checks ``done()``/``cancelled()``). The task awaits each future itself, so it resumes in the loop
    turn after the one completing the last of them: ``asyncio.wait`` takes one turn more (a done callback, then
    the task), on the acks=all and long-poll paths where every turn is latency (docs/performance.md)."""
    try:
        async with asyncio.timeout(timeout_s):
            for future in futures:
                if not future.done():
                    await future
    except TimeoutError:
        pass


@dataclass(eq=False, slots=True)
class _ProduceWaiter:
    required_hw: int
    future: asyncio.Future[ApiError | None]


class DelayedProduce:
    """acks=all produce waiting for HW > its last offset. Owned by ReplicaManager; event-loop thread only.

    A waiter's future resolves to ``None`` when the HW reached ``required_hw`` or to an ``ApiError``
    (NOT_LEADER_OR_FOLLOWER on leadership loss); the waiting request removes it on timeout.
    """

    def __init__(self) -> None:
        self._by_bucket: dict[TableBucket, list[_ProduceWaiter]] = {}

    def add(self, bucket: TableBucket, required_hw: int) -> asyncio.Future[ApiError | None]:
        fut: asyncio.Future[ApiError | None] = asyncio.get_running_loop().create_future()
        waiters = self._by_bucket.setdefault(bucket, [])
        waiter = _ProduceWaiter(required_hw, fut)
        if not waiters or waiters[-1].required_hw <= required_hw:
            waiters.append(waiter)
        else:
            bisect.insort(waiters, waiter, key=lambda w: w.required_hw)
        return fut

    def complete_up_to(self, bucket: TableBucket, high_watermark: int) -> int:
        """Succeed every waiter of ``bucket`` whose required HW is reached; returns how many."""
        waiters = self._by_bucket.get(bucket)
        if not waiters:
            return 0
        n = 0
        while n < len(waiters) and waiters[n].required_hw <= high_watermark:
            if not waiters[n].future.done():
                waiters[n].future.set_result(None)
            n += 1
        del waiters[:n]
        if not waiters:
            del self._by_bucket[bucket]
        return n

    def fail_bucket(self, bucket: TableBucket, error: ApiError) -> int:
        waiters = self._by_bucket.pop(bucket, [])
        for w in waiters:
            if not w.future.done():
                w.future.set_result(error)
        return len(waiters)

    def fail_all(self, error: ApiError) -> None:
        for bucket in list(self._by_bucket):
            self.fail_bucket(bucket, error)

    def remove(self, bucket: TableBucket, future: asyncio.Future[ApiError | None]) -> None:
        """Forget a waiter whose request gave up (timeout)."""
        waiters = self._by_bucket.get(bucket)
        if not waiters:
            return
        self._by_bucket[bucket] = [w for w in waiters if w.future is not future]
        if not self._by_bucket[bucket]:
            del self._by_bucket[bucket]

    def pending(self, bucket: TableBucket | None = None) -> int:
        if bucket is not None:
            return len(self._by_bucket.get(bucket, ()))
        return sum(len(w) for w in self._by_bucket.values())


class Waker:
    """What a parked long poll waits on: the buckets that changed since it last looked, and a future to wake
    it. ``wake`` marks a bucket and wakes; ``mark`` only marks (read at the next look, e.g. an HW move a
    follower learns with its next answer)."""

    __slots__ = ("dirty", "future")

    def __init__(self) -> None:
        self.dirty: set[TableBucket] = set()
        self.future: asyncio.Future[None] | None = None

    def arm(self) -> asyncio.Future[None]:
        """A fresh future to wait on (resolved at once if something changed meanwhile)."""
        self.future = asyncio.get_running_loop().create_future()
        if self.dirty:
            self.future.set_result(None)
        return self.future

    def take_dirty(self) -> set[TableBucket]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def mark(self, bucket: TableBucket) -> None:
        self.dirty.add(bucket)

    def wake(self, bucket: TableBucket) -> None:
        self.dirty.add(bucket)
        if self.future is not None and not self.future.done():
            self.future.set_result(None)


class FetchWaiter(Waker):
    """One parked sessionless fetch request, registered on its buckets until it answers."""

    __slots__ = ("buckets", "for_follower")

    def __init__(self, buckets: tuple[TableBucket, ...], for_follower: bool) -> None:
        super().__init__()
        self.buckets = buckets
        self.for_follower = for_follower


class DelayedFetch:
    """Parked long-poll fetches. Follower fetches wake on LEO moves, client fetches on HW moves; both on
    leadership changes. Owned by ReplicaManager; event-loop thread only."""

    def __init__(self) -> None:
        self._leo_watchers: dict[TableBucket, set[FetchWaiter]] = {}
        self._hw_watchers: dict[TableBucket, set[FetchWaiter]] = {}

    def park(self, buckets: Iterable[TableBucket], *, for_follower: bool) -> FetchWaiter:
        waiter = FetchWaiter(tuple(buckets), for_follower)
        index = self._leo_watchers if for_follower else self._hw_watchers
        for b in waiter.buckets:
            index.setdefault(b, set()).add(waiter)
        return waiter

    def unpark(self, waiter: FetchWaiter) -> None:
        index = self._leo_watchers if waiter.for_follower else self._hw_watchers
        for b in waiter.buckets:
            watchers = index.get(b)
            if watchers is not None:
                watchers.discard(waiter)
                if not watchers:
                    del index[b]

    def leo_moved(self, bucket: TableBucket) -> None:
        for w in list(self._leo_watchers.get(bucket, ())):
            w.wake(bucket)

    def hw_moved(self, bucket: TableBucket) -> None:
        for w in list(self._hw_watchers.get(bucket, ())):
            w.wake(bucket)

    def role_changed(self, bucket: TableBucket) -> None:
        self.leo_moved(bucket)
        self.hw_moved(bucket)

    def wake_all(self) -> None:
        for index in (self._leo_watchers, self._hw_watchers):
            for bucket, watchers in list(index.items()):
                for w in list(watchers):
                    w.wake(bucket)

    def parked(self, *, for_follower: bool | None = None) -> int:
        """How many fetches are parked (followers', clients' or all)."""
        indexes = [self._leo_watchers, self._hw_watchers]
        if for_follower is not None:
            indexes = [self._leo_watchers if for_follower else self._hw_watchers]
        return len({w for index in indexes for ws in index.values() for w in ws})
