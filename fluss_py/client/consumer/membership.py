"""A consumer's membership in a group: the heartbeat task and the assignment it hands to ``Consumer.poll``.

    heartbeat task (owned here)                    Consumer.poll (the application's task)
    ─────────────────────────────                  ───────────────────────────────────────
    join (epoch 0), then every interval:           pending() -> (revoke, add, lost)
      ConsumerHeartbeat(owned = what poll reads)     on_revoked(revoke); commit them; stop reading
      answer.assignment -> target; wake poll         apply(): owned changes; kick -> ack at once
    FENCED / UNKNOWN_MEMBER_ID -> lost:              lost: drop everything, no commit (it would be
      wait until poll dropped the buckets,             refused); the task then joins again
      then join again as a new member

The task never changes what the consumer reads; only ``poll`` does (so revocation callbacks and commits run
between two polls, when the records handed out before count as processed). ``owned`` is reported as the
acknowledgement of revocations (docs/consumer-groups.md). A failure of the task other than the group
errors above is kept and raised by the next ``poll`` (``check()``), never swallowed.

Who calls it: ``Consumer`` (created with ``subscribe=``), on its event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.groups import heartbeat
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
_REJOIN = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH)


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
        wakeup: Callable[[], None] = lambda: None,
    ) -> None:
        self._gateway = gateway
        self.group = group
        self._resolve_tables = resolve_tables
        self.session_timeout_ms = session_timeout_ms
        self.instance_id = instance_id
        self._wakeup = wakeup
        self.member_id = ""
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

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"group-{self.group}-heartbeat")

    def check(self) -> None:
        """Raise the heartbeat task's failure, if it failed."""
        if self._error is not None:
            raise self._error

    # ---------------------------------------------------------------- what poll does
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
            log.error("Group %s: heartbeat task failed: %s", self.group, e)
            self._error = e
            self._wakeup()

    async def _beat(self) -> None:
        if self.lost:
            return  # poll has not dropped the buckets yet: joining now could race them
        try:
            answer = await heartbeat(
                self._gateway, self.group, self.member_id, self.member_epoch, instance_id=self.instance_id,
                session_timeout_ms=self.session_timeout_ms, subscribed=self._tables, owned=self.owned,
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

    async def close(self, leave: bool = True) -> None:
        """Stop heartbeating; with ``leave`` tell the coordinator (a static member keeps its buckets)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if leave and self.member_id:
            epoch = STATIC_LEAVE_EPOCH if self.instance_id else LEAVE_EPOCH
            try:
                async with asyncio.timeout(5.0):
                    await heartbeat(
                        self._gateway, self.group, self.member_id, epoch, instance_id=self.instance_id,
                        session_timeout_ms=self.session_timeout_ms, subscribed=self._tables, owned=(),
                    )  # fmt: skip
            except (FlussError, TimeoutError) as e:
                log.info("Group %s: leave not acknowledged (the session will expire): %s", self.group, e)
