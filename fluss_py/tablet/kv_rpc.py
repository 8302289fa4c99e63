"""Lookup, PrefixLookup and ScanKv: protobuf in, ``KvReads`` (replica/kv_reads.py), protobuf out.

A request naming a bucket twice is refused whole (INVALID_REQUEST, as ProduceLog); its wait (``timeout_ms``)
is cut to ``request.max-hold`` like any wait a caller asks for. Per-bucket errors travel in each bucket's
``ErrorInfo``; a whole-request failure in the response's ``error``.

Who may call: ``ManagerReplicaLayer`` (the tablet service's handlers), on the server's loop.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from fluss_py.errors import ErrorCode, FlussError
from fluss_py.replica.kv_reads import KvReadResult, KvReads
from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)


def _failed(what: str, e: Exception) -> Any:
    if not isinstance(e, FlussError):
        log.error("%s failed unexpectedly", what, exc_info=e)
    return convert.error_info(e)


def _twice(buckets: Iterable[Any]) -> str | None:
    names = Counter(str(convert.table_bucket_from_pb(b.table_bucket)) for b in buckets)
    twice = sorted(name for name, n in names.items() if n > 1)
    return f"bucket(s) {', '.join(twice)} named twice in one request" if twice else None


async def _per_bucket(
    request: Any,
    response_type: type,
    what: str,
    field: str,
    call: Callable[[dict[TableBucket, list[bytes]]], Any],
    fill: Callable[[Any, KvReadResult], None],
) -> Any:
    twice = _twice(request.buckets)
    if twice is not None:
        return response_type(error=convert.error_code(ErrorCode.INVALID_REQUEST, twice))
    asked = {convert.table_bucket_from_pb(b.table_bucket): list(getattr(b, field)) for b in request.buckets}
    try:
        results = await call(asked)
    except Exception as e:
        return response_type(error=_failed(what, e))
    response = response_type(error=convert.ok())
    for tb, r in results.items():
        pb = response.buckets.add(table_bucket=convert.table_bucket_to_pb(tb), applied_offset=r.applied_offset)
        pb.error.CopyFrom(convert.ok() if r.error is None else convert.error_info(r.error))
        if r.error is None:
            fill(pb, r)
    return response


async def lookup(reads: KvReads, wait_s: float, request: Any) -> Any:
    def fill(pb: Any, r: KvReadResult) -> None:
        for row in r.values:
            pb.values.add(found=row is not None, row=row or b"")

    return await _per_bucket(
        request, tablet_pb2.LookupResponse, "Lookup", "keys", lambda asked: reads.lookup(asked, wait_s), fill
    )


async def prefix_lookup(reads: KvReads, wait_s: float, request: Any) -> Any:
    def fill(pb: Any, r: KvReadResult) -> None:
        for rows, truncated in r.groups:
            pb.results.add(rows=rows, truncated=truncated)

    return await _per_bucket(
        request, tablet_pb2.PrefixLookupResponse, "PrefixLookup", "prefixes",
        lambda asked: reads.prefix_lookup(asked, wait_s, request.max_rows_per_prefix), fill,
    )  # fmt: skip


async def scan_kv(reads: KvReads, wait_s: float, request: Any) -> Any:
    tb = convert.table_bucket_from_pb(request.table_bucket)
    try:
        r = await reads.scan(tb, request.after_key or None, request.max_rows, wait_s)
    except Exception as e:
        return tablet_pb2.ScanKvResponse(error=_failed("ScanKv", e))
    if r.error is not None:
        return tablet_pb2.ScanKvResponse(error=convert.error_info(r.error), applied_offset=r.applied_offset)
    return tablet_pb2.ScanKvResponse(
        error=convert.ok(),
        rows=[tablet_pb2.KvRow(key=k, row=v) for k, v in r.rows],
        more=r.more,
        applied_offset=r.applied_offset,
    )
