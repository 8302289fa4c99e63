"""Consumer-group offsets on the coordinator leader: commit, fetch and list (used by Consumer and Admin).

A group is a name under which committed offsets are kept per bucket (``offset`` = the next record to read).
The coordinator stores them in ZooKeeper (``<root>/consumers/<group>/offsets/<table_id>/<bucket>``), so
they survive the death of any one server and coordinator failovers. The calls go through
``CoordinatorGateway`` (retried across coordinator failovers until the request timeout).
"""

from __future__ import annotations

from collections.abc import Mapping

from fluss_py.client import transport as rpcs
from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.errors import InvalidRequestError
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.types import TableBucket

MAX_GROUP_NAME = 200


def validate_group(group: str) -> str:
    """Group names: 1-200 printable characters, no '/' (they are znode names)."""
    if not group or len(group) > MAX_GROUP_NAME or "/" in group or not group.isprintable() or group in (".", ".."):
        raise InvalidRequestError(f"group name {group!r} must be 1-{MAX_GROUP_NAME} printable characters, no '/'")
    return group


async def commit_offsets(gateway: CoordinatorGateway, group: str, offsets: Mapping[TableBucket, int]) -> None:
    """Durably record ``offsets`` (next offset to read per bucket) for ``group``; all or nothing."""
    request = coordinator_pb2.CommitOffsetsRequest(
        group=validate_group(group),
        offsets=[
            coordinator_pb2.BucketOffset(
                table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket), offset=offset
            )
            for tb, offset in sorted(offsets.items())
        ],
    )
    await gateway.call(rpcs.COMMIT_OFFSETS, request)


async def fetch_offsets(gateway: CoordinatorGateway, group: str, table_id: int = 0) -> dict[TableBucket, int]:
    """``group``'s committed offsets (of one table, or of every table with ``table_id`` 0); {} if none."""
    request = coordinator_pb2.FetchOffsetsRequest(group=validate_group(group), table_id=table_id)
    response = await gateway.call(rpcs.FETCH_OFFSETS, request)
    return {TableBucket(o.table_bucket.table_id, o.table_bucket.bucket): o.offset for o in response.offsets}


async def list_groups(gateway: CoordinatorGateway) -> list[str]:
    response = await gateway.call(rpcs.LIST_GROUPS, coordinator_pb2.ListGroupsRequest())
    return sorted(response.groups)
