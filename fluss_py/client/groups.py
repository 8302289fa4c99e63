"""Consumer-group RPCs on the coordinator leader: offsets (commit, fetch, list) and membership (heartbeat,
describe, delete), used by Consumer, GroupMembership and Admin (docs/consumer-groups.md).

A group is a name under which committed offsets are kept per bucket (``offset`` = the next record to read).
The coordinator stores them in ZooKeeper (``<root>/consumers/<group>/offsets/<table_id>/<bucket>``), so
they survive the death of any one server and coordinator failovers. The calls go through
``CoordinatorGateway`` (retried across coordinator failovers until the request timeout).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fluss_py.client import transport as rpcs
from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.errors import ApiError, AuthorizationFailedError, InvalidRequestError
from fluss_py.rpc.convert import to_client_exception
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.types import TableBucket, znode_name_problem

MAX_GROUP_NAME = 200


def validate_group(group: str) -> str:
    """Group names: 1-200 printable characters ZooKeeper can store in a node name, no '/', not "." or ".."
    (they are znode names; the coordinator checks the same rule: docs/consumer-groups.md, "Names")."""
    problem = znode_name_problem(group) if isinstance(group, str) and 1 <= len(group) <= MAX_GROUP_NAME else "length"
    if problem is not None or not group.isprintable():
        raise InvalidRequestError(
            f"group name {group[:64]!r} must be 1-{MAX_GROUP_NAME} printable characters ZooKeeper can store, no '/'"
        )
    return group


async def commit_offsets(
    gateway: CoordinatorGateway,
    group: str,
    offsets: Mapping[TableBucket, int],
    member_id: str = "",
    member_epoch: int = 0,
) -> dict[int, ApiError]:
    """Durably record ``offsets`` (next offset to read per bucket) for ``group``; all or nothing per table.

    With ``member_id`` the commit is fenced: refused unless that member, at that epoch, owns every bucket.
    Returns the tables whose offsets the coordinator refused on their own (on a secure cluster: the
    principal may not READ them; nothing of them was written, the other tables' offsets were), {} when
    every offset was written. ``raise_refused`` turns it into an error.
    """
    request = coordinator_pb2.CommitOffsetsRequest(
        group=validate_group(group),
        member_id=member_id,
        member_epoch=member_epoch,
        offsets=[
            coordinator_pb2.BucketOffset(
                table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket), offset=offset
            )
            for tb, offset in sorted(offsets.items())
        ],
    )
    response = await gateway.call(rpcs.COMMIT_OFFSETS, request)
    return _refused(response)


def _refused(response: Any) -> dict[int, ApiError]:
    return {r.table_id: to_client_exception(r.error) for r in response.refused}


def raise_refused(group: str, refused: Mapping[int, ApiError]) -> None:
    """Raise AUTHORIZATION_FAILED naming the tables whose offsets ``group`` did not get, if any."""
    if refused:
        why = "; ".join(e.message for _, e in sorted(refused.items()))
        raise AuthorizationFailedError(f"group {group}: offsets not committed for {len(refused)} table(s): {why}")


async def fetch_offsets(gateway: CoordinatorGateway, group: str, table_id: int = 0) -> dict[TableBucket, int]:
    """``group``'s committed offsets (of one table, or of every table with ``table_id`` 0); {} if none.

    On a secure cluster the answer for every table leaves out the tables the principal may not DESCRIBE;
    a table named that it may not DESCRIBE raises AUTHORIZATION_FAILED."""
    request = coordinator_pb2.FetchOffsetsRequest(group=validate_group(group), table_id=table_id)
    response = await gateway.call(rpcs.FETCH_OFFSETS, request)
    for refused in response.refused:
        raise to_client_exception(refused.error)
    return {TableBucket(o.table_bucket.table_id, o.table_bucket.bucket): o.offset for o in response.offsets}


@dataclass(frozen=True)
class GroupSummary:
    group: str
    state: str  # EMPTY | RECONCILING | STABLE
    members: int


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    instance_id: str
    client_host: str
    member_epoch: int
    session_timeout_ms: int
    since_heartbeat_ms: int
    assigned: tuple[TableBucket, ...]
    target: tuple[TableBucket, ...]
    leaving: bool
    subscribed: tuple[int, ...] = ()  # table ids


@dataclass(frozen=True)
class GroupMembers:
    group: str
    state: str
    group_epoch: int
    members: tuple[GroupMember, ...]


def _member(m: Any) -> GroupMember:
    return GroupMember(
        m.member_id,
        m.instance_id,
        m.client_host,
        m.member_epoch,
        m.session_timeout_ms,
        m.since_heartbeat_ms,
        tuple(_tb(tb) for tb in m.assigned),
        tuple(_tb(tb) for tb in m.target),
        m.leaving,
        tuple(m.subscribed_table_ids),
    )


def _tb(pb: Any) -> TableBucket:
    return TableBucket(pb.table_id, pb.bucket)


def _tb_pb(tb: TableBucket) -> common_pb2.TableBucket:
    return common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket)


async def list_groups(gateway: CoordinatorGateway) -> list[GroupSummary]:
    response = await gateway.call(rpcs.LIST_GROUPS, coordinator_pb2.ListGroupsRequest())
    if len(response.summaries) == len(response.groups):
        return [GroupSummary(s.group, s.state, s.members) for s in response.summaries]
    return [GroupSummary(name, "EMPTY", 0) for name in sorted(response.groups)]  # an older coordinator


async def describe_members(gateway: CoordinatorGateway, group: str) -> GroupMembers:
    """``group``'s state, epoch and members; GROUP_NOT_EXIST for a group without offsets or members."""
    request = coordinator_pb2.DescribeGroupRequest(group=validate_group(group))
    response = await gateway.call(rpcs.DESCRIBE_GROUP, request)
    members = tuple(_member(m) for m in response.members)
    return GroupMembers(group, response.state, response.group_epoch, members)


async def delete_group(gateway: CoordinatorGateway, group: str) -> None:
    """Delete ``group``'s offsets and membership; GROUP_NOT_EMPTY while it has live members."""
    await gateway.call(rpcs.DELETE_GROUP, coordinator_pb2.DeleteGroupRequest(group=validate_group(group)))


@dataclass(frozen=True)
class HeartbeatResult:
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: frozenset[TableBucket]


async def heartbeat(
    gateway: CoordinatorGateway,
    group: str,
    member_id: str,
    member_epoch: int,
    *,
    instance_id: str,
    session_timeout_ms: int,
    subscribed: Iterable[int],
    owned: Iterable[TableBucket],
) -> HeartbeatResult:
    request = coordinator_pb2.ConsumerHeartbeatRequest(
        group=group,
        member_id=member_id,
        member_epoch=member_epoch,
        instance_id=instance_id,
        session_timeout_ms=session_timeout_ms,
        subscribed_table_ids=sorted(subscribed),
        owned=[_tb_pb(tb) for tb in sorted(owned, key=lambda tb: (tb.table_id, tb.bucket))],
    )
    r = await gateway.call(rpcs.CONSUMER_HEARTBEAT, request)
    return HeartbeatResult(r.member_id, r.member_epoch, r.heartbeat_interval_ms, frozenset(map(_tb, r.assignment)))
