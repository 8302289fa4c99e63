"""The server-tag RPCs of ``CoordinatorService`` (docs/rebalance.md §12): convert and delegate, never decide.

- ``AlterServerTag`` (ALTER on the cluster, security/operations.py): the wire enum becomes the tag's name
  (an unknown value is INVALID_REQUEST, nothing submitted); ``SetServerTag`` on the leader's event loop
  decides, writes and answers.
- ``DescribeServerTags`` (DESCRIBE on the cluster): every known server with its tag, and the replacement.

A mixin of ``CoordinatorServicer`` (service.py): ``_on_leader`` answers NOT_COORDINATOR_LEADER off the leader.
Who may call: grpc.aio, on the process's loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc.aio

from fluss_py.coordinator.events import DescribeServerTags, SetServerTag
from fluss_py.errors import FlussError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import coordinator_pb2


def replacement_pb(view: Mapping[str, Any]) -> coordinator_pb2.ReplacementProgress:
    """A replacement's progress view (``RebalanceProgress.view``) as its message."""
    return coordinator_pb2.ReplacementProgress(
        id=str(view["id"]),
        status=str(view["status"]),
        replacing=[int(s) for s in view.get("replacing", ())],
        moves_total=int(view["moves_total"]),
        moves_done=int(view["moves_done"]),
        moves_in_flight=int(view["moves_in_flight"]),
        bytes_total=int(view["bytes_total"]),
        bytes_moved=int(view["bytes_moved"]),
        message=str(view.get("message", "")),
    )


class ServerTagRpcs:
    """``AlterServerTag`` and ``DescribeServerTags`` of ``CoordinatorServicer`` (see the module docstring)."""

    _on_leader: Any  # CoordinatorServicer._on_leader

    async def AlterServerTag(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            tag = convert.server_tag_from_pb(request.tag)
        except FlussError as e:
            return coordinator_pb2.AlterServerTagResponse(error=convert.error_info(e))

        def fill(response: Any, answer: Mapping[str, Any]) -> None:
            response.tag = convert.server_tag_to_pb(answer["tag"])
            response.message = answer["message"]
            if answer.get("replacement"):
                response.replacement.CopyFrom(replacement_pb(answer["replacement"]))

        event = SetServerTag(request.server_id, tag)
        return await self._on_leader(coordinator_pb2.AlterServerTagResponse, event, fill)

    async def DescribeServerTags(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, answer: Mapping[str, Any]) -> None:
            for s in answer["servers"]:
                response.servers.append(
                    coordinator_pb2.ServerTagInfo(
                        server_id=s["id"], tag=convert.server_tag_to_pb(s["tag"]), by=s["by"], since_ms=s["since_ms"],
                        reason=s["reason"], live=s["live"], replicas=s["replicas"], leaders=s["leaders"],
                    )
                )  # fmt: skip
            if answer.get("replacement"):
                response.replacement.CopyFrom(replacement_pb(answer["replacement"]))
            response.to_replace = answer["to_replace"]

        return await self._on_leader(coordinator_pb2.DescribeServerTagsResponse, DescribeServerTags(), fill)
