"""Consumer-group RPCs for ``FakeCluster`` (no sockets): ConsumerHeartbeat, CommitOffsets, FetchOffsets.

The decisions are the coordinator's own pure ``GroupMembers`` (so the client is tested against the real
protocol rules); offsets live in a dict. ``install(cluster)`` adds the handlers to one FakeCluster;
``expire(member_id)`` removes a member as a session expiry would.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from fluss_py.coordinator.group_members import GroupMembers, Heartbeat, plain_layout
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeCluster, _err


class FakeGroups:
    """Owns the groups' state and offsets of one fake cluster."""

    def __init__(self, cluster: FakeCluster) -> None:
        self._cluster = cluster
        self.groups: dict[str, GroupMembers] = {}
        self.offsets: dict[tuple[str, TableBucket], int] = {}
        self.refused: list[str] = []
        self.unreadable: set[int] = set()  # table ids the caller may not READ: refused per table (per_table.py)
        self._ids = itertools.count(1)
        cluster._h_ConsumerHeartbeat = self.heartbeat  # type: ignore[attr-defined]
        cluster._h_CommitOffsets = self.commit  # type: ignore[attr-defined]
        cluster._h_FetchOffsets = self.fetch  # type: ignore[attr-defined]

    @staticmethod
    def _now() -> int:
        return int(time.monotonic() * 1000)

    def expire(self, group: str, member_id: str) -> None:
        g = self.groups[group]
        g.members[member_id].last_heartbeat_ms = -(10**9)
        g.expire(self._now())

    def _counts(self) -> dict[int, int]:
        return {tid: n for tid, n, _ in self._cluster.tables.values()}

    async def heartbeat(self, address: str, request: Any, timeout: float) -> Any:
        g = self.groups.setdefault(request.group, GroupMembers())
        hb = Heartbeat(
            request.member_id, request.member_epoch, request.instance_id, address, request.session_timeout_ms,
            frozenset(request.subscribed_table_ids),
            frozenset(TableBucket(tb.table_id, tb.bucket) for tb in request.owned),
        )  # fmt: skip
        try:
            answer = g.heartbeat(hb, self._now(), plain_layout(self._counts()), lambda: f"m{next(self._ids)}")
        except FlussError as e:
            return coordinator_pb2.ConsumerHeartbeatResponse(error=common_pb2.ErrorInfo(code=e.code, message=e.message))
        return coordinator_pb2.ConsumerHeartbeatResponse(
            error=common_pb2.ErrorInfo(code=0),
            member_id=answer.member_id,
            member_epoch=answer.member_epoch,
            heartbeat_interval_ms=50,
            assignment=[common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket) for tb in answer.assignment],
        )

    async def commit(self, address: str, request: Any, timeout: float) -> Any:
        offsets = {TableBucket(o.table_bucket.table_id, o.table_bucket.bucket): o.offset for o in request.offsets}
        denied = sorted({tb.table_id for tb in offsets} & self.unreadable)
        refused = [
            coordinator_pb2.TableError(table_id=t, error=common_pb2.ErrorInfo(code=ErrorCode.AUTHORIZATION_FAILED,
                                                                              message=f"may not READ table id {t}"))
            for t in denied
        ]  # fmt: skip
        offsets = {tb: o for tb, o in offsets.items() if tb.table_id not in self.unreadable}
        g = self.groups.get(request.group)
        try:
            live = {tid for tid, _, _ in self._cluster.tables.values()}
            if any(tb.table_id not in live for tb in offsets):
                from fluss_py.errors import TableNotExistError

                raise TableNotExistError()
            if request.member_id:
                if g is None:
                    from fluss_py.errors import UnknownMemberIdError

                    raise UnknownMemberIdError()
                g.check_commit(request.member_id, request.member_epoch, set(offsets), self._now())
        except FlussError as e:
            self.refused.append(f"{request.member_id}:{e.code.name}")
            return coordinator_pb2.CommitOffsetsResponse(error=_err(e.code))
        for tb, offset in offsets.items():
            self.offsets[(request.group, tb)] = offset
        return coordinator_pb2.CommitOffsetsResponse(error=common_pb2.ErrorInfo(code=0), refused=refused)

    async def fetch(self, address: str, request: Any, timeout: float) -> Any:
        rows = [
            coordinator_pb2.BucketOffset(
                table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket), offset=o
            )
            for (group, tb), o in sorted(self.offsets.items(), key=lambda kv: (kv[0][1].table_id, kv[0][1].bucket))
            if group == request.group and (not request.table_id or tb.table_id == request.table_id)
        ]
        return coordinator_pb2.FetchOffsetsResponse(error=common_pb2.ErrorInfo(code=0), offsets=rows)
