"""A consumer's membership in a group: the heartbeat task and the assignment it hands to ``Consumer.poll``.

    heartbeat task (owned here)                    Consumer.poll (the application's task)
    ─────────────────────────────                  ───────────────────────────────────────
    join (epoch 0), then every interval:           polling(True) ... polling(False): the poll timer
      ConsumerHeartbeat(owned = what poll reads)   pending() -> (revoke, add, lost)
      answer.assignment -> target; wake poll         on_revoked(revoke); commit them; stop reading
    FENCED / UNKNOWN_MEMBER_ID -> lost:              apply(): owned changes; kick -> ack at once
      wait until poll dropped the buckets,         lost: drop everything, no commit (it would be
      then join again                                refused); the task then joins again
    no poll for max_poll_interval -> leave (-1),
      lost: the next poll drops and rejoins
    UNRELEASED_INSTANCE_ID -> fatal: raised by every later poll

The task never changes what the consumer reads; only ``poll`` does (so revocation callbacks and commits run
between two polls, when the records handed out before count as processed). ``owned`` is reported as the
acknowledgement of revocations (docs/consumer-groups.md).

The member id is made here, once per consumer (KIP-1082), and sent with every join: a join sent again
after a lost answer, or after the member was fenced, is the same member on the coordinator, never a second
one (which, for a static member, would be refused as UNRELEASED_INSTANCE_ID by its own first join).

**The poll timer** (Kafka's ``max.poll.interval.ms``): when the application has not been inside ``poll``
for ``max_poll_interval`` seconds (stuck in its processing), the task leaves the group with epoch -1 (a
static member too: its buckets must go to the others now, not at the end of its session), so a stuck
application cannot hold buckets; its next ``poll`` drops them (lost) and joins again.

A failure of the task other than the group errors above (UNRELEASED_INSTANCE_ID included: another consumer
holds the instance id) is kept and raised by the next ``poll`` (``check()``), never swallowed.

Who calls it: ``Consumer`` (created with ``subscribe=``), on its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Awaitable, Callable

from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.groups import heartbeat
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
_REJOIN = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH)
_FATAL = (ErrorCode.UNRELEASED_INSTANCE_ID,)  # raised by the next poll, which says it: no log line of its own


class GroupMembership:
    """Owns the member id, epoch, the latest assignment and the heartbeat task (module docstring)."""

    def __init__(
        self,
        gateway: CoordinatorGateway,
        group: str,
        resolve_tables: Callable[[], Awaitable[set[int]]],
        *,
        session_timeout_ms: int = 10_000,
        instance_id: str = "",
        max_poll_interval: float = 300.0,
        wakeup: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._gateway = gateway
        self.group = group
        self._resolve_tables = resolve_tables
        self.session_timeout_ms = session_timeout_ms
        self.instance_id = instance_id
        self.max_poll_interval = max_poll_interval
        self._wakeup = wakeup
        self._clock = clock
        self._own_id = uuid.uuid4().hex  # sent with every join (module docstring)
        self.member_id = ""  # "" while not a member (joining, fenced, left)
        self.member_epoch = 0
        self.owned: set[TableBucket] = set()  # what poll reads now (changed only by apply())
        self.target: frozenset[TableBucket] = frozenset()  # the latest assignment answered
        self.lost = False  # fenced: poll must drop everything before the task joins again
        self.interval = 0.5
        self.heartbeats = 0
        self._kick = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task | None = None
        self._tables: set[int] = set()
        self._in_poll = 0
        self._last_poll = clock()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"group-{self.group}-heartbeat")

    def check(self) -> None:
        """Raise the heartbeat task's failure, if it failed."""
        if self._error is not None:
            raise self._error

    # ---------------------------------------------------------------- what poll does
    def polling(self, inside: bool) -> None:
        """``poll`` starts (True) or returns (False): the poll timer runs only between two polls."""
        self._in_poll += 1 if inside else -1
        self._last_poll = self._clock()

    def poll_overdue(self) -> bool:
        """The application has been outside ``poll`` for longer than ``max_poll_interval``."""
        return not self._in_poll and self._clock() - self._last_poll > self.max_poll_interval

    def pending(self) -> tuple[set[TableBucket], set[TableBucket], bool]:
        """(buckets to revoke, buckets to add, lost) for ``poll`` to apply."""
        if self.lost:
            return set(self.owned), set(), True
        return self.owned - self.target, set(self.target - self.owned), False

    def apply(self, revoked: set[TableBucket], added: set[TableBucket], lost: bool) -> None:
        self.owned = (self.owned - revoked) | added
        if lost:
            self.lost = False
        if revoked or lost:
            self._kick.set()  # acknowledge the revocation (or join again) now, not after the interval

    # ---------------------------------------------------------------- the task
    async def _run(self) -> None:
        try:
            self._tables = await self._resolve_tables()
            while True:
                await self._beat()
                self._kick.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.interval):
                        await self._kick.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            fatal = isinstance(e, FlussError) and e.code in _FATAL
            log.log(logging.INFO if fatal else logging.ERROR, "Group %s: heartbeat task failed: %s", self.group, e)
            self._error = e
            self._wakeup()

    async def _beat(self) -> None:
        if self.lost:
            return  # poll has not dropped the buckets yet: joining now could race them
        if self.poll_overdue():  # a stuck application: no buckets for it (not even by joining)
            if self.member_id:
                await self._leave_overdue()
            return
        try:
            answer = await heartbeat(
                self._gateway, self.group, self.member_id or self._own_id, self.member_epoch,
                instance_id=self.instance_id, session_timeout_ms=self.session_timeout_ms, subscribed=self._tables,
                owned=self.owned,
            )  # fmt: skip
        except FlussError as e:
            if e.code in _REJOIN:
                log.warning("Group %s: member %s fenced (%s); rejoining", self.group, self.member_id, e)
                self.member_id, self.member_epoch, self.target = "", 0, frozenset()
                self.lost = True
                self._wakeup()
                return
            if e.retriable:
                log.info("Group %s: heartbeat failed, retrying: %s", self.group, e)
                return
            raise
        self.heartbeats += 1
        if answer.member_id != self.member_id:
            log.info("Group %s: joined as member %s (epoch %d)", self.group, answer.member_id, answer.member_epoch)
        self.member_id, self.member_epoch = answer.member_id, answer.member_epoch
        self.interval = max(0.05, answer.heartbeat_interval_ms / 1000.0)
        if answer.assignment != self.target:
            self.target = answer.assignment
            self._wakeup()

    async def _leave_overdue(self) -> None:
        """The application stopped polling: leave (-1, static or not) so the others take the buckets; the
        next poll drops them and the task joins again (Kafka: the poll timer expired)."""
        log.warning(
            "Group %s: poll() was not called for more than max_poll_interval (%g s): member %s leaves the group "
            "and its buckets go to the others; the next poll() joins again", self.group, self.max_poll_interval,
            self.member_id,
        )  # fmt: skip
        member_id, self.member_id, self.member_epoch, self.target = self.member_id, "", 0, frozenset()
        self.lost = True
        await self._send_leave(member_id, LEAVE_EPOCH)

    async def _send_leave(self, member_id: str, epoch: int) -> None:
        try:
            async with asyncio.timeout(5.0):
                await heartbeat(
                    self._gateway, self.group, member_id, epoch, instance_id=self.instance_id,
                    session_timeout_ms=self.session_timeout_ms, subscribed=self._tables, owned=(),
                )  # fmt: skip
        except (FlussError, TimeoutError) as e:
            log.info("Group %s: leave not acknowledged (the session will expire): %s", self.group, e)

    async def close(self, leave: bool = True) -> None:
        """Stop heartbeating; with ``leave`` tell the coordinator (a static member keeps its buckets)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if leave and self.member_id:
            await self._send_leave(self.member_id, STATIC_LEAVE_EPOCH if self.instance_id else LEAVE_EPOCH)
