"""Per-table authorization of the group-offset requests (security/per_table.py): what is taken out of a
commit, what a fetch answers or leaves out, when a group description is refused; unknown ids go on."""

from __future__ import annotations

from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.security.per_table import Access, narrow
from fluss_py.security_types import Operation, Resource

_C = "/fluss.v1.CoordinatorService/"
NAMES = {1: "db.open", 2: "db.secret", 3: "db.listed"}  # 9: an id the leader's view does not hold


def access(grants: dict[str, set[Operation]]) -> tuple[Access, list[tuple[Operation, str]]]:
    """May do ``grants[name]`` (any grant implies DESCRIBE); the second value records the audited checks."""
    audited: list[tuple[Operation, str]] = []

    def allowed(op: Operation, resource: Resource) -> bool:
        audited.append((op, resource.name))
        ops = grants.get(resource.name, set())
        return op in ops or (op is Operation.DESCRIBE and bool(ops))

    def visible(resource: Resource) -> bool:
        return bool(grants.get(resource.name))

    return Access("alice", allowed, visible, NAMES.get), audited


def _offset(table_id: int, bucket: int, offset: int) -> coordinator_pb2.BucketOffset:
    return coordinator_pb2.BucketOffset(table_bucket=common_pb2.TableBucket(table_id=table_id, bucket=bucket),
                                        offset=offset)  # fmt: skip


def _commit(*table_ids: int) -> coordinator_pb2.CommitOffsetsRequest:
    offsets = [_offset(t, b, 5) for t in table_ids for b in (0, 1)]
    return coordinator_pb2.CommitOffsetsRequest(group="g", offsets=offsets)


def test_a_commit_loses_the_tables_it_may_not_read_and_answers_them_refused() -> None:
    a, _ = access({"db.open": {Operation.READ}, "db.listed": {Operation.DESCRIBE}})
    request = _commit(1, 2, 3, 9)
    scope = narrow(_C + "CommitOffsets", request, a)
    assert scope is not None and scope.answer is None
    assert sorted({o.table_bucket.table_id for o in request.offsets}) == [1, 9]  # 9: the handler says
    response = scope.finish(coordinator_pb2.CommitOffsetsResponse())
    refused = {r.table_id: (r.error.code, r.error.message) for r in response.refused}
    assert refused == {
        2: (ErrorCode.AUTHORIZATION_FAILED, "alice may not READ table id 2"),  # not even DESCRIBE: no name
        3: (ErrorCode.AUTHORIZATION_FAILED, "alice may not READ table db.listed"),
    }


def test_a_commit_of_only_refused_tables_is_answered_without_the_handler() -> None:
    a, _ = access({})
    request = _commit(2)
    scope = narrow(_C + "CommitOffsets", request, a)
    assert scope is not None and scope.answer is not None and not request.offsets
    assert scope.answer.error.code == 0 and [r.table_id for r in scope.answer.refused] == [2]


def test_a_commit_of_readable_tables_is_left_as_it_is() -> None:
    a, audited = access({"db.open": {Operation.READ}})
    request = _commit(1)
    scope = narrow(_C + "CommitOffsets", request, a)
    assert scope is not None and scope.answer is None and len(request.offsets) == 2
    assert not scope.finish(coordinator_pb2.CommitOffsetsResponse()).refused
    assert audited == [(Operation.READ, "db.open")]


def test_a_fetch_of_one_hidden_table_reads_nothing_and_names_it_refused() -> None:
    a, _ = access({"db.open": {Operation.READ}})
    scope = narrow(_C + "FetchOffsets", coordinator_pb2.FetchOffsetsRequest(group="g", table_id=2), a)
    assert scope is not None and scope.answer is not None
    assert not scope.answer.offsets and scope.answer.error.code == 0
    [refused] = scope.answer.refused
    assert (refused.table_id, refused.error.code) == (2, ErrorCode.AUTHORIZATION_FAILED)
    for table_id in (1, 9):  # may DESCRIBE; unknown to the view: the handler answers
        scope = narrow(_C + "FetchOffsets", coordinator_pb2.FetchOffsetsRequest(group="g", table_id=table_id), a)
        assert scope is not None and scope.answer is None


def test_a_fetch_of_every_table_leaves_out_the_hidden_ones_without_an_audit_line() -> None:
    a, audited = access({"db.open": {Operation.READ}, "db.listed": {Operation.DESCRIBE}})
    scope = narrow(_C + "FetchOffsets", coordinator_pb2.FetchOffsetsRequest(group="g"), a)
    assert scope is not None and scope.answer is None
    answer = coordinator_pb2.FetchOffsetsResponse(offsets=[_offset(t, 0, 7) for t in (1, 2, 3, 9)])
    answer = scope.finish(answer)
    assert [o.table_bucket.table_id for o in answer.offsets] == [1, 3] and not answer.refused
    assert audited == []  # filtering, not refusing


def _member(subscribed: list[int], assigned: list[int], target: list[int]) -> coordinator_pb2.GroupMemberInfo:
    def tbs(ids: list[int]) -> list[common_pb2.TableBucket]:
        return [common_pb2.TableBucket(table_id=t, bucket=0) for t in ids]

    return coordinator_pb2.GroupMemberInfo(member_id="m", subscribed_table_ids=subscribed, assigned=tbs(assigned),
                                           target=tbs(target))  # fmt: skip


def test_a_group_description_is_refused_when_a_member_uses_a_hidden_table() -> None:
    a, _ = access({"db.open": {Operation.READ}, "db.listed": {Operation.DESCRIBE}})
    request = coordinator_pb2.DescribeGroupRequest(group="g")
    for member in (_member([2], [], []), _member([1], [2], []), _member([1], [], [2])):
        scope = narrow(_C + "DescribeGroup", request, a)
        assert scope is not None
        response = scope.finish(coordinator_pb2.DescribeGroupResponse(state="STABLE", members=[member]))
        assert response.error.code == ErrorCode.AUTHORIZATION_FAILED and not response.members
        assert "db.secret" not in response.error.message and "group g" in response.error.message
    scope = narrow(_C + "DescribeGroup", request, a)
    assert scope is not None
    shown = coordinator_pb2.DescribeGroupResponse(state="STABLE", members=[_member([1, 3, 9], [1, 9], [3])])
    assert scope.finish(shown) == shown


def test_other_methods_are_not_narrowed() -> None:
    a, _ = access({})
    assert narrow(_C + "ListGroups", coordinator_pb2.ListGroupsRequest(), a) is None
