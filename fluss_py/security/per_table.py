"""Per-table authorization inside the group-offset requests, as Kafka checks OffsetCommit, OffsetFetch and
ConsumerGroupDescribe per topic (docs/security.md, "Group offsets and the tables they name").

The method's own rule (``operations.RULES``: READ or DESCRIBE on the group) is checked first, by the
interceptor, for the whole request. Then, for a principal whose requests the authorizer checks at all::

    CommitOffsets   READ on each table named. The offsets of a table it may not READ are taken out of the
                    request (nothing of them is written) and answered in ``refused`` (AUTHORIZATION_FAILED,
                    one entry per table); the other tables' offsets are committed as usual. When no table
                    is left the request is answered without reaching the handler.
    FetchOffsets    one table named: DESCRIBE on it, else the answer has no offsets and that table in
                    ``refused``, and ZooKeeper is not read. Every table (``table_id`` 0): the offsets of the
                    tables it may not DESCRIBE are left out of the answer, silently (Kafka's fetch of all
                    partitions of a group does the same).
    DescribeGroup   DESCRIBE on every table a member subscribes to, owns or is to own; else the whole answer
                    is AUTHORIZATION_FAILED (Kafka: TOPIC_AUTHORIZATION_FAILED for the group, "the described
                    group uses topics that the client is not authorized to describe").

A refusal names the table when the principal may DESCRIBE it, else only its id (the id came from the
caller; the name would be news). An id the coordinator leader's view does not hold (a dropped table, or a
standby coordinator that holds no view) is left to the handler, as for ConsumerHeartbeat (docs/security.md,
"Naming a table by its id"): TABLE_NOT_EXIST, or NOT_COORDINATOR_LEADER with the leader's address.

Pure (``narrow`` decides from the request, the principal's ``Access`` and the table names); the interceptor
does the calling. Who may call: the security interceptor, in the call's task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.security.operations import TableName
from fluss_py.security_types import Operation, Resource, ResourceType

_C = "/fluss.v1.CoordinatorService/"


@dataclass(frozen=True)
class Access:
    """What one principal may do, as the interceptor's authorizer answers it."""

    principal: str
    allowed: Callable[[Operation, Resource], bool]  # a refusal is counted and audited
    visible: Callable[[Resource], bool]  # DESCRIBE, for filtering an answer: not audited
    names: TableName


def _keep(response: Any) -> Any:
    return response


@dataclass(frozen=True)
class Narrowed:
    """``answer``: answer this and do not call the handler; else call it and answer ``finish(response)``."""

    answer: Any | None = None
    finish: Callable[[Any], Any] = _keep


def _table(name: str) -> Resource:
    return Resource(ResourceType.TABLE, name)


def _refused(op: Operation, table_ids: Iterable[int], access: Access) -> dict[int, str]:
    """table id -> refusal text, for the known tables ``access`` may not ``op``."""
    out = {}
    for table_id in sorted(set(table_ids)):
        name = access.names(table_id)
        if name is None or access.allowed(op, _table(name)):
            continue
        label = f"table {name}" if access.visible(_table(name)) else f"table id {table_id}"
        out[table_id] = f"{access.principal} may not {op.value} {label}"
    return out


def _errors(refused: dict[int, str]) -> list[coordinator_pb2.TableError]:
    code = int(ErrorCode.AUTHORIZATION_FAILED)
    return [
        coordinator_pb2.TableError(table_id=t, error=common_pb2.ErrorInfo(code=code, message=text))
        for t, text in sorted(refused.items())
    ]


def _commit(request: Any, access: Access) -> Narrowed:
    refused = _refused(Operation.READ, (o.table_bucket.table_id for o in request.offsets), access)
    if not refused:
        return Narrowed()
    kept = [o for o in request.offsets if o.table_bucket.table_id not in refused]
    del request.offsets[:]
    request.offsets.extend(kept)

    def finish(response: Any) -> Any:
        response.refused.extend(_errors(refused))
        return response

    if not kept:
        return Narrowed(answer=finish(coordinator_pb2.CommitOffsetsResponse(error=common_pb2.ErrorInfo())))
    return Narrowed(finish=finish)


def _fetch(request: Any, access: Access) -> Narrowed:
    if request.table_id:
        refused = _refused(Operation.DESCRIBE, (request.table_id,), access)
        if refused:
            return Narrowed(answer=coordinator_pb2.FetchOffsetsResponse(refused=_errors(refused)))
        return Narrowed()

    def finish(response: Any) -> Any:
        kept = [
            o
            for o in response.offsets
            if (name := access.names(o.table_bucket.table_id)) is not None and access.visible(_table(name))
        ]
        if len(kept) != len(response.offsets):
            del response.offsets[:]
            response.offsets.extend(kept)
        return response

    return Narrowed(finish=finish)


def _describe(request: Any, access: Access) -> Narrowed:
    def finish(response: Any) -> Any:
        tables: set[int] = set()
        for m in response.members:
            tables.update(m.subscribed_table_ids)
            tables.update(tb.table_id for tb in (*m.assigned, *m.target))
        hidden = _refused(Operation.DESCRIBE, tables, access)
        if not hidden:
            return response
        text = (
            f"{access.principal} may not DESCRIBE {len(hidden)} table(s) that group {request.group} uses: "
            "its members are not shown"
        )
        code = int(ErrorCode.AUTHORIZATION_FAILED)
        return coordinator_pb2.DescribeGroupResponse(error=common_pb2.ErrorInfo(code=code, message=text))

    return Narrowed(finish=finish)


RULES: dict[str, Callable[[Any, Access], Narrowed]] = {
    _C + "CommitOffsets": _commit,
    _C + "FetchOffsets": _fetch,
    _C + "DescribeGroup": _describe,
}


def narrow(method: str, request: Any, access: Access) -> Narrowed | None:
    """The per-table decision for ``method`` (None: the method has none; call the handler as it is)."""
    rule = RULES.get(method)
    return None if rule is None else rule(request, access)
