"""Server-tag RPCs on the coordinator leader (docs/rebalance.md §12), used by Admin.

A tag says a tablet server is gone for good (``permanent-offline``: its replicas are moved to other servers)
or down for a while (``temporary-offline``: its leaderships are moved away); ``none`` removes it. The calls
go through ``CoordinatorGateway`` (retried across coordinator failovers until the request timeout).
"""

from __future__ import annotations

from dataclasses import dataclass

from fluss_py.client import transport as rpcs
from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.rpc.convert import server_tag_from_pb, server_tag_to_pb
from fluss_py.rpc.pb import coordinator_pb2

TAGS = ("permanent-offline", "temporary-offline", "none")


@dataclass(frozen=True, slots=True)
class ServerTagInfo:
    """One tablet server as the coordinator leader sees it: its tag (``none``), who set it and when, whether it
    is live, the replicas assigned to it and the buckets it leads."""

    server_id: int
    tag: str
    by: str
    since_ms: int
    reason: str
    live: bool
    replicas: int
    leaders: int


@dataclass(frozen=True, slots=True)
class Replacement:
    """The running or last replacement of permanent-offline servers' replicas."""

    id: str
    status: str
    replacing: tuple[int, ...]
    moves_total: int
    moves_done: int
    moves_in_flight: int
    bytes_total: int
    bytes_moved: int
    message: str


@dataclass(frozen=True, slots=True)
class ServerTags:
    servers: tuple[ServerTagInfo, ...]
    replacement: Replacement | None
    to_replace: int  # replicas still on permanent-offline servers


@dataclass(frozen=True, slots=True)
class TagChange:
    server_id: int
    tag: str
    message: str  # what changed and what follows
    replacement: Replacement | None


def _replacement(has: bool, pb: coordinator_pb2.ReplacementProgress) -> Replacement | None:
    if not has:
        return None
    return Replacement(pb.id, pb.status, tuple(pb.replacing), pb.moves_total, pb.moves_done, pb.moves_in_flight,
                       pb.bytes_total, pb.bytes_moved, pb.message)  # fmt: skip


async def alter_server_tag(gateway: CoordinatorGateway, server_id: int, tag: str) -> TagChange:
    """Set ``server_id``'s tag (``none`` removes it); TABLET_SERVER_NOT_EXIST / INVALID_SERVER_TAG when refused
    (nothing is written then), INVALID_REQUEST for a tag name not in ``TAGS``."""
    request = coordinator_pb2.AlterServerTagRequest(server_id=server_id, tag=server_tag_to_pb(tag))
    response = await gateway.call(rpcs.ALTER_SERVER_TAG, request)
    replacement = _replacement(response.HasField("replacement"), response.replacement)
    return TagChange(server_id, server_tag_from_pb(response.tag), response.message, replacement)


async def describe_server_tags(gateway: CoordinatorGateway) -> ServerTags:
    """Every tablet server the coordinator leader knows (registered, holding replicas or tagged)."""
    response = await gateway.call(rpcs.DESCRIBE_SERVER_TAGS, coordinator_pb2.DescribeServerTagsRequest())
    servers = tuple(
        ServerTagInfo(s.server_id, server_tag_from_pb(s.tag), s.by, s.since_ms, s.reason, s.live, s.replicas, s.leaders)
        for s in response.servers
    )
    return ServerTags(servers, _replacement(response.HasField("replacement"), response.replacement),
                      response.to_replace)  # fmt: skip
