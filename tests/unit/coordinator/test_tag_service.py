"""The server-tag RPCs of the coordinator's service (tag_service.py): the wire enum becomes the tag's name, an
unknown value is refused before anything is submitted, the room's answers become messages; and the client's
and the wire's names agree."""

from fluss_py.client.server_tags import TAGS
from fluss_py.coordinator.events import DescribeServerTags, SetServerTag
from fluss_py.coordinator.server_tags import ServerTag
from fluss_py.coordinator.service import CoordinatorServicer
from fluss_py.errors import ErrorCode
from fluss_py.rpc import convert
from fluss_py.rpc.pb import coordinator_pb2

from .fakes import RecordingLeader

REPLACEMENT = {"id": "ab12", "status": "REBALANCING", "replacing": [3], "moves_total": 6, "moves_done": 2,
               "moves_in_flight": 2, "bytes_total": 600, "bytes_moved": 200, "message": ""}  # fmt: skip


def _answer(event):
    """What the tag room answers (tag_room.py)."""
    if isinstance(event, SetServerTag):
        return {"server_id": event.server_id, "tag": event.tag, "message": "m", "replacement": REPLACEMENT}
    return {
        "servers": [{"id": 3, "tag": "permanent-offline", "by": "auto", "since_ms": 5, "reason": "dead",
                     "live": False, "replicas": 4, "leaders": 0}],
        "replacement": REPLACEMENT,
        "to_replace": 4,
    }  # fmt: skip


async def test_alter_converts_the_tag_and_refuses_an_unknown_value_without_submitting():
    leader = RecordingLeader(_answer)
    svc = CoordinatorServicer(leader)
    answer = await svc.AlterServerTag(
        coordinator_pb2.AlterServerTagRequest(server_id=3, tag=coordinator_pb2.SERVER_TAG_PERMANENT_OFFLINE), None
    )
    assert answer.error.code == ErrorCode.NONE and answer.tag == coordinator_pb2.SERVER_TAG_PERMANENT_OFFLINE
    assert leader.events[-1].server_id == 3 and leader.events[-1].tag == "permanent-offline"
    assert answer.replacement.replacing == [3] and answer.replacement.moves_done == 2
    refused = await svc.AlterServerTag(coordinator_pb2.AlterServerTagRequest(server_id=3, tag=7), None)
    assert refused.error.code == ErrorCode.INVALID_REQUEST and len(leader.events) == 1


async def test_describe_fills_every_server_and_the_replacement():
    leader = RecordingLeader(_answer)
    answer = await CoordinatorServicer(leader).DescribeServerTags(coordinator_pb2.DescribeServerTagsRequest(), None)
    assert isinstance(leader.events[-1], DescribeServerTags)
    (s,) = answer.servers
    assert (s.server_id, s.tag, s.by, s.live, s.replicas) == (3, coordinator_pb2.SERVER_TAG_PERMANENT_OFFLINE,
                                                              "auto", False, 4)  # fmt: skip
    assert answer.to_replace == 4 and answer.replacement.status == "REBALANCING"


def test_the_names_agree_everywhere():
    assert set(TAGS) == {t.value for t in ServerTag} | {"none"}
    assert {convert.server_tag_from_pb(convert.server_tag_to_pb(name)) for name in TAGS} == set(TAGS)
