"""Is this control request from the current coordinator leader? (docs/peer-trust.md)

``CoordinatorFence`` keeps the highest coordinator epoch ZooKeeper confirmed and the last leader node read
from ZooKeeper (``coordinator/leader``: id, epoch, the term's token). A NotifyLeaderAndIsr, StopReplica or
UpdateMetadata with epoch E and token T is accepted only when::

    E == highest confirmed epoch  and  the leader node of epoch E names the caller's id  and  T is its token

``E < highest`` is stale (INVALID_COORDINATOR_EPOCH). ``E > highest`` costs one read of the epoch node and
the leader node (``CoordinatorRecords``), shared by concurrent requests and at most one per
``min_read_interval_s``; a higher epoch is adopted only from ZooKeeper, never from a request. Anything
else is COORDINATOR_NOT_AUTHENTICATED. The leader watch feeds ``observe_leader``; a vanished leader node
forgets the token (a zombie leader is refused before its successor bumps the epoch).

Who may call: the tablet service (``check``) and the tablet server's leader watch (``observe_leader``),
both on the server's loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Protocol

from fluss_py.errors import CoordinatorNotAuthenticatedError, InvalidCoordinatorEpochError
from fluss_py.rpc.peer import same_token
from fluss_py.types import CoordinatorLeaderInfo
from fluss_py.zk.client import ZkClient
from fluss_py.zk.paths import CoordinatorEpochZNode, CoordinatorLeaderZNode

log = logging.getLogger(__name__)

MIN_READ_INTERVAL_S = 0.2

STALE = "coordinator_epoch_stale"
UNCONFIRMED = "coordinator_epoch_unconfirmed"
NOT_LEADER = "coordinator_not_leader"


class CoordinatorRecords(Protocol):
    """Reads of the two znodes that say who the coordinator leader is (ZooKeeper; a fake in unit tests)."""

    async def epoch(self) -> int: ...

    async def leader(self) -> CoordinatorLeaderInfo | None: ...


class ZkCoordinatorRecords:
    """``CoordinatorRecords`` over the tablet server's ZooKeeper session."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk

    async def epoch(self) -> int:
        got = await self._zk.get(CoordinatorEpochZNode.path(self._zk.root))
        return CoordinatorEpochZNode.decode(got[0]) if got is not None else 0

    async def leader(self) -> CoordinatorLeaderInfo | None:
        got = await self._zk.get(CoordinatorLeaderZNode.path(self._zk.root))
        return CoordinatorLeaderZNode.decode(got[0]) if got is not None else None


class CoordinatorRefused(Exception):
    """Raised by ``CoordinatorFence.check``: ``error`` is the wire error, ``kind`` the refusal counter."""

    def __init__(self, kind: str, error: Exception) -> None:
        super().__init__(str(error))
        self.kind = kind
        self.error = error


class CoordinatorFence:
    """The highest confirmed coordinator epoch and the current leader's token. Owned by the tablet server."""

    def __init__(
        self,
        records: CoordinatorRecords,
        min_read_interval_s: float = MIN_READ_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._records = records
        self._min_interval = min_read_interval_s
        self._clock = clock
        self.highest = 0
        self.leader: CoordinatorLeaderInfo | None = None
        self._read: asyncio.Future[None] | None = None
        self._read_at: float | None = None
        self.reads = 0  # ZooKeeper reads made (tests: one per change)

    # ---------------------------------------------------------------- what ZooKeeper says
    def observe_leader(self, info: CoordinatorLeaderInfo | None) -> None:
        """The leader node as read from ZooKeeper (None: gone). Its epoch is ZooKeeper's word: adopted."""
        if info is None:
            self.leader = None
            return
        if self.leader is None or info.epoch >= self.leader.epoch:
            self.leader = info
        self._adopt(info.epoch, f"the leader node of coordinator {info.server_id}")

    def _adopt(self, epoch: int, source: str) -> None:
        if epoch > self.highest:
            log.info("Coordinator epoch %d -> %d (confirmed by %s)", self.highest, epoch, source)
            self.highest = epoch

    async def _refresh(self) -> None:
        """Read the epoch node and the leader node: shared by concurrent callers, at most one per interval.
        A failed read confirms nothing (logged): the request is refused and the coordinator sends it again."""
        try:
            await self._read_records()
        except Exception as e:
            log.warning("Could not read the coordinator epoch and leader nodes from ZooKeeper: %s", e)

    async def _read_records(self) -> None:
        if self._read is not None:
            await asyncio.shield(self._read)
            return
        if self._read_at is not None and self._clock() - self._read_at < self._min_interval:
            return
        self._read = asyncio.get_running_loop().create_future()
        try:
            self.reads += 1
            epoch = await self._records.epoch()
            leader = await self._records.leader()
            self._adopt(epoch, "ZooKeeper's epoch node")
            if leader is not None and leader.epoch == epoch:
                self.observe_leader(leader)
        finally:
            self._read_at = self._clock()
            self._read.set_result(None)
            self._read = None

    # ---------------------------------------------------------------- the check
    async def check(self, epoch: int, coordinator_id: int, token: str, what: str) -> None:
        """Accept a control request or raise ``CoordinatorRefused`` (never adopts an epoch on a request's word)."""
        if epoch > self.highest:
            await self._refresh()
            if epoch > self.highest:
                raise CoordinatorRefused(UNCONFIRMED, CoordinatorNotAuthenticatedError(
                    f"{what} from coordinator {coordinator_id} carries coordinator epoch {epoch}, which ZooKeeper "
                    f"does not confirm (its epoch is {self.highest})"
                ))  # fmt: skip
        if epoch < self.highest:
            raise CoordinatorRefused(STALE, InvalidCoordinatorEpochError(
                f"{what} from coordinator {coordinator_id} carries coordinator epoch {epoch}, "
                f"older than the current epoch {self.highest}"
            ))  # fmt: skip
        if self.leader is None or self.leader.epoch != epoch:
            await self._refresh()
        leader = self.leader
        if leader is None or leader.epoch != epoch:
            raise CoordinatorRefused(NOT_LEADER, CoordinatorNotAuthenticatedError(
                f"{what} from coordinator {coordinator_id} at epoch {epoch}: ZooKeeper names no leader of that "
                f"epoch (yet), so it is not the current coordinator leader"
            ))  # fmt: skip
        if leader.server_id != coordinator_id or not same_token(token, leader.token):
            why = "another coordinator id" if leader.server_id != coordinator_id else "no or a wrong leader token"
            raise CoordinatorRefused(NOT_LEADER, CoordinatorNotAuthenticatedError(
                f"{what} claiming coordinator {coordinator_id} at epoch {epoch} is not from the current "
                f"coordinator leader ({why})"
            ))  # fmt: skip
