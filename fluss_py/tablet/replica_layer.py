"""The real ``ReplicaLayer``: the TabletService's RPCs converted to and from ``ReplicaManager`` calls.

Per RPC: protobuf request -> plain values of ``fluss_py.replica.messages`` -> ``ReplicaManager`` -> protobuf
response. Per-bucket failures travel as ``ErrorInfo`` (code, message and, for NOT_LEADER_OR_FOLLOWER, the
leader the server knows); a whole-request failure (stale coordinator epoch) is the response's ``error``.
Record bytes are passed through untouched: nothing here looks at records.

Request sizes and waits asked for by a caller are inputs: a FetchLog's ``max_bytes`` (whole and per bucket)
is cut to ``fetch.response.max-bytes`` (and ``min_bytes`` to that), its ``max_wait_ms`` and a ProduceLog's
``timeout_ms`` to ``request.max-hold`` (``RequestLimits``), so no request makes the server read a whole
segment into memory or hold a waiter for days (docs/tablet-server.md "Request limits").

Control requests (already fenced by coordinator epoch in ``TabletServicer``):
- NotifyLeaderAndIsr: addresses of the named servers, table properties and schemas come with the request; the
  properties decide each bucket's ``LogConfig`` (segment size, TTL, retention; also applied to logs loaded
  at start with server defaults) and ``min.insync.replicas``. ``leader = -1`` makes the replica a follower
  of nobody (it stops fetching until a leader is elected).
- StopReplica: stop serving; ``delete`` also removes the bucket's files.
- UpdateMetadata: replaces the ``MetadataCache`` view (GetMetadata answers from it), the replica
  manager's server addresses (leader hints, fetcher targets) and the schemas of its hosted buckets (a
  column added reaches the replicas this way).

Who may call: ``TabletServicer`` handlers, on the server's loop.
"""

from __future__ import annotations

import functools
import logging
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fluss_py import config as cfg
from fluss_py.common import latency_trace as trace
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.log.config import LogConfig
from fluss_py.replica.kv_reads import KvReads
from fluss_py.replica.manager import ReplicaManager
from fluss_py.replica.messages import (
    NO_SESSION,
    EpochRequest,
    FetchBucketRequest,
    FetchBucketResult,
    FetchRequest,
    FetchSessionRequest,
    LeaderAndIsrItem,
    ListOffsetsRequest,
    OffsetSpec,
    StopReplicaItem,
)
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.schema.schema import TableSchema
from fluss_py.tablet import kv_rpc
from fluss_py.tablet.metadata_cache import MetadataCache, table_schema_of
from fluss_py.tablet.strays import stray_buckets
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)


def _error(e: BaseException | None) -> common_pb2.ErrorInfo:
    return convert.ok() if e is None else convert.error_info(e)


# convert.ok() as constructor fields: ``buckets.add(error=<dict>)`` builds in place, a message would be copied
OK_FIELDS = {"code": int(ErrorCode.NONE), "leader_id": -1}


def fetch_response(results: Mapping[TableBucket, FetchBucketResult], session_id: int = NO_SESSION) -> Any:
    """FetchLogResponse of per-bucket results, built in place with ``buckets.add`` (the same bytes as building
    each FetchBucketResult and passing the list, at less than half the cost: an idle follower round of ~667
    buckets arrives twice a second from each follower)."""
    response = tablet_pb2.FetchLogResponse(error=convert.ok(), session_id=session_id)
    add = response.buckets.add
    for tb, r in results.items():
        pb = add(
            table_bucket={"table_id": tb.table_id, "bucket": tb.bucket},
            error=OK_FIELDS if r.error is None else convert.error_info(r.error),
            high_watermark=r.high_watermark,
            log_start_offset=r.log_start_offset,
            log_end_offset=r.log_end_offset,
            records=r.records,
        )
        if r.diverging_epoch is not None:
            pb.diverging_epoch.epoch = r.diverging_epoch.epoch
            pb.diverging_epoch.end_offset = r.diverging_epoch.end_offset
    return response


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """What the server grants a request at most, whatever it asks for (bytes, seconds)."""

    fetch_max_bytes: int = 16 * 1024**2
    max_hold_s: float = 60.0

    @classmethod
    def from_config(cls, config: cfg.Config) -> RequestLimits:
        return cls(int(config[cfg.FETCH_RESPONSE_MAX_BYTES]), float(config[cfg.REQUEST_MAX_HOLD]))

    def wait_s(self, asked_ms: int) -> float:
        """A produce timeout or fetch wait in seconds: negative asks are 0, long ones ``max_hold_s``."""
        return min(max(asked_ms, 0) / 1000.0, self.max_hold_s)

    def fetch_bytes(self, asked: int) -> int:
        return min(asked, self.fetch_max_bytes)


def _request_failed(what: str, e: Exception) -> common_pb2.ErrorInfo:
    """A whole-request failure: expected ones (FlussError) keep their code; anything else is logged."""
    if not isinstance(e, FlussError):
        log.error("%s failed unexpectedly", what, exc_info=e)
    return convert.error_info(e)


class ManagerReplicaLayer:
    """Owns nothing but the conversions; state lives in ``ReplicaManager`` and ``MetadataCache``.

    ``on_metadata`` (optional) is called after each UpdateMetadata was applied (the server logs it).
    """

    def __init__(
        self,
        replicas: ReplicaManager,
        metadata: MetadataCache,
        config: cfg.Config,
        on_metadata: Callable[[common_pb2.ClusterMetadata], None] | None = None,
    ) -> None:
        self.replicas = replicas
        self.metadata = metadata
        self.config = config
        self.limits = RequestLimits.from_config(config)
        self._on_metadata = on_metadata

    @functools.cached_property
    def kv_reads(self) -> KvReads:
        return KvReads(self.replicas, self.replicas.kv)

    # ---------------------------------------------------------------- data path
    async def produce_log(self, request: Any) -> Any:
        batches = {convert.table_bucket_from_pb(b.table_bucket): b.records for b in request.buckets}
        if len(batches) != len(request.buckets):
            # one entry per bucket: a second would silently replace the first (docs/tablet-server.md)
            return tablet_pb2.ProduceLogResponse(
                error=convert.error_code(ErrorCode.INVALID_REQUEST, _named_twice(request.buckets))
            )
        if trace.ENABLED:
            for tb in batches:
                trace.mark("L_req", tb, -1)
        try:
            results = await self.replicas.append(request.acks, self.limits.wait_s(request.timeout_ms), batches)
        except Exception as e:
            return tablet_pb2.ProduceLogResponse(error=_request_failed("ProduceLog", e))
        response = tablet_pb2.ProduceLogResponse(
            error=convert.ok(),
            buckets=[
                tablet_pb2.ProduceBucketResult(
                    table_bucket=convert.table_bucket_to_pb(tb),
                    error=_error(r.error),
                    base_offset=r.base_offset,
                    last_offset=r.last_offset,
                    log_append_time_ms=r.log_append_time_ms,
                )
                for tb, r in results.items()
            ],
        )
        if trace.ENABLED:
            for tb, r in results.items():
                trace.mark("L_resp", tb, r.base_offset)
        return response

    async def fetch_log(self, request: Any) -> Any:
        limits = self.limits
        buckets = [
            FetchBucketRequest(
                convert.table_bucket_from_pb(b.table_bucket),
                b.fetch_offset,
                limits.fetch_bytes(b.max_bytes),
                b.current_leader_epoch,
                b.last_fetched_epoch,
                max(b.flushed_offset, 0),
            )
            for b in request.buckets
        ]
        max_wait_s = limits.wait_s(request.max_wait_ms)
        max_bytes = limits.fetch_bytes(request.max_bytes)
        min_bytes = min(request.min_bytes, max_bytes)
        try:
            if request.HasField("session"):
                session = FetchSessionRequest(
                    request.session.id,
                    request.session.epoch,
                    tuple(convert.table_bucket_from_pb(b) for b in request.session.forgotten),
                )
                answer = await self.replicas.fetch_in_session(
                    FetchRequest(request.replica_id, max_wait_s, min_bytes, max_bytes, tuple(buckets), session)
                )
                return fetch_response(answer.buckets, answer.session_id)
            results = await self.replicas.fetch(request.replica_id, max_wait_s, min_bytes, max_bytes, buckets)
        except Exception as e:
            return tablet_pb2.FetchLogResponse(error=_request_failed("FetchLog", e))
        return fetch_response(results)

    async def list_offsets(self, request: Any) -> Any:
        try:
            asked = [
                ListOffsetsRequest(convert.table_bucket_from_pb(b.table_bucket), OffsetSpec(b.spec), b.timestamp_ms)
                for b in request.buckets
            ]
        except ValueError as e:
            return tablet_pb2.ListOffsetsResponse(error=convert.error_code(ErrorCode.INVALID_REQUEST, str(e)))
        try:
            results = await self.replicas.list_offsets(asked)
        except Exception as e:
            return tablet_pb2.ListOffsetsResponse(error=_request_failed("ListOffsets", e))
        return tablet_pb2.ListOffsetsResponse(
            error=convert.ok(),
            buckets=[
                tablet_pb2.ListOffsetsBucketResult(
                    table_bucket=convert.table_bucket_to_pb(tb),
                    error=_error(r.error),
                    offset=r.offset,
                    high_watermark=r.high_watermark,
                    log_end_offset=r.log_end_offset,
                    log_start_offset=r.log_start_offset,
                    kv=None if r.kv is None else tablet_pb2.KvSize(size_bytes=r.kv.size_bytes, rows=r.kv.rows),
                )
                for tb, r in results.items()
            ],
        )

    async def offsets_for_leader_epoch(self, request: Any) -> Any:
        asked = [
            EpochRequest(convert.table_bucket_from_pb(b.table_bucket), b.leader_epoch, b.current_leader_epoch)
            for b in request.buckets
        ]
        try:
            results = await self.replicas.offsets_for_leader_epoch(asked)
        except Exception as e:
            return tablet_pb2.OffsetsForLeaderEpochResponse(error=_request_failed("OffsetsForLeaderEpoch", e))
        return tablet_pb2.OffsetsForLeaderEpochResponse(
            error=convert.ok(),
            buckets=[
                tablet_pb2.OffsetsForLeaderEpochBucketResult(
                    table_bucket=convert.table_bucket_to_pb(tb),
                    error=_error(r.error),
                    leader_epoch=r.leader_epoch,
                    end_offset=r.end_offset,
                )
                for tb, r in results.items()
            ],
        )

    async def lookup(self, request: Any) -> Any:
        return await kv_rpc.lookup(self.kv_reads, self.limits.wait_s(request.timeout_ms), request)

    async def prefix_lookup(self, request: Any) -> Any:
        return await kv_rpc.prefix_lookup(self.kv_reads, self.limits.wait_s(request.timeout_ms), request)

    async def scan_kv(self, request: Any) -> Any:
        return await kv_rpc.scan_kv(self.kv_reads, self.limits.wait_s(request.timeout_ms), request)

    async def get_metadata(self, request: Any) -> Any:
        try:
            md = self.metadata.cluster_metadata(convert.table_path_from_pb(p) for p in request.tables)
        except FlussError as e:
            return common_pb2.MetadataResponse(error=convert.error_info(e))
        return common_pb2.MetadataResponse(error=convert.ok(), metadata=md)

    # ---------------------------------------------------------------- coordinator -> tablet server
    async def notify_leader_and_isr(self, request: Any) -> Any:
        tables = {t.table_id: t for t in request.tables}
        described: dict[int, tuple[dict[str, str], TableSchema | None, int] | FlussError] = {}
        states, unreadable = [], {}
        for b in request.buckets:
            tb, lai, replicas = convert.leader_and_isr_from_pb(b)
            table = described.get(tb.table_id)
            if table is None:
                table = described[tb.table_id] = self._describe(tb.table_id, tables.get(tb.table_id))
            if isinstance(table, FlussError):
                unreadable[tb] = table
                continue
            props, schema, num_buckets = table
            states.append(LeaderAndIsrItem(tb, lai, replicas, props, tuple(b.adding_replicas), schema, num_buckets))
        self._apply_log_configs(states)
        servers = [convert.server_node_from_pb(s) for s in request.servers]
        try:
            errors = await self.replicas.become_leader_or_follower(request.coordinator_epoch, states, servers)
        except Exception as e:
            return tablet_pb2.NotifyLeaderAndIsrResponse(error=_request_failed("NotifyLeaderAndIsr", e))
        errors.update(unreadable)
        failed = {tb: e for tb, e in errors.items() if e is not None}
        if failed:
            log.warning("NotifyLeaderAndIsr: %d of %d buckets failed: %s", len(failed), len(errors), _brief(failed))
        return tablet_pb2.NotifyLeaderAndIsrResponse(error=convert.ok(), buckets=_failed_results(errors))

    def _describe(self, table_id: int, info: Any) -> tuple[dict[str, str], TableSchema | None, int] | FlussError:
        """A table's properties, schema and bucket count: from the request's TableInfo, else from the last
        metadata view; the error of a schema that does not check (its buckets are refused, the others applied)."""
        try:
            if info is not None:
                return dict(info.descriptor.properties), table_schema_of(info), info.descriptor.num_buckets
            md = self.metadata
            return md.table_properties(table_id) or {}, md.table_schema(table_id), md.num_buckets(table_id) or 0
        except FlussError as e:
            log.error("NotifyLeaderAndIsr: %s", e)
            return e

    async def stop_replica(self, request: Any) -> Any:
        items = [
            StopReplicaItem(convert.table_bucket_from_pb(b.table_bucket), b.leader_epoch, b.delete)
            for b in request.buckets
        ]
        try:
            errors = await self.replicas.stop_replicas(request.coordinator_epoch, items)
        except Exception as e:
            return tablet_pb2.StopReplicaResponse(error=_request_failed("StopReplica", e))
        deleted = sum(1 for i in items if i.delete)
        log.info("StopReplica for %d buckets (%d deleted) from coordinator %d", len(items), deleted,
                 request.coordinator_id)  # fmt: skip
        return tablet_pb2.StopReplicaResponse(error=convert.ok(), buckets=_failed_results(errors))

    async def update_metadata(self, request: Any) -> Any:
        if not self.metadata.apply(request):
            log.info("UpdateMetadata delta on view %d (epoch %d) refused: asking coordinator %d for the full view",
                     request.base_version, request.metadata.coordinator_epoch, request.coordinator_id)  # fmt: skip
            return tablet_pb2.UpdateMetadataResponse(error=convert.ok(), needs_full_view=True)
        self.replicas.update_servers(self.metadata.servers)
        self._update_schemas(request.metadata.tables)
        if not request.incremental:
            self._set_strays_aside()
        if self._on_metadata is not None:
            self._on_metadata(request.metadata)
        return tablet_pb2.UpdateMetadataResponse(error=convert.ok())

    def _update_schemas(self, tables: Iterable[Any]) -> None:
        """Hand the hosted buckets of the tables an UpdateMetadata names their schema (a column added: a new
        version, docs/primary-key-tables.md §2). A schema that does not check is logged and not handed."""
        for tm in tables:
            try:
                schema = self.metadata.table_schema(tm.info.table_id)
            except FlussError as e:
                log.error("UpdateMetadata: %s", e)
                continue
            if schema is not None and self.replicas.schemas.update(tm.info.table_id, schema):
                self.replicas.kv.schema_changed(tm.info.table_id, schema)  # the KVs of its primary-key buckets

    def _set_strays_aside(self) -> None:
        """Close the logs no longer assigned here (their table dropped, or their bucket moved away, while this
        server was away: ``tablet/strays.py``) and rename their dirs ``...-stray`` for the operator to delete.
        On full views only: a returning server gets one first; a delta names only changes it was told of."""
        logs = self.replicas.log_manager
        assignments = self.metadata.assignments()
        hosted = self.replicas.replica
        for tb in stray_buckets(list(logs.logs), lambda b: hosted(b) is not None, assignments, self.replicas.server_id):
            aside = logs.set_aside(tb)
            why = "was dropped" if tb.table_id not in assignments else "no longer has a replica here"
            log.warning("Log of %s set aside as %s: table %d %s (delete it when sure)", tb, aside, tb.table_id, why)

    # ---------------------------------------------------------------- helpers
    def _apply_log_configs(self, states: Iterable[LeaderAndIsrItem]) -> None:
        """Logs opened at start carry server defaults: give them their table's settings (same for a
        table's buckets, computed once per table). Invalid properties were refused at create time."""
        by_table: dict[int, LogConfig] = {}
        for state in states:
            tablet = self.replicas.log_manager.get(state.table_bucket)
            if tablet is None:
                continue
            tid = state.table_bucket.table_id
            if tid not in by_table:
                by_table[tid] = LogConfig.from_config(self.config, state.table_properties)
            if tablet.config != by_table[tid]:
                tablet.config = by_table[tid]


def _failed_results(errors: dict[TableBucket, Any]) -> list[tablet_pb2.BucketResult]:
    """The buckets of a NotifyLeaderAndIsr/StopReplica that failed, each with its error; a bucket not named was
    applied (tablet.proto). Servers before 2026-12 named every bucket, with NONE for the applied ones: the
    coordinator reads only the errors, so it is right with either."""
    return [
        tablet_pb2.BucketResult(table_bucket=convert.table_bucket_to_pb(tb), error=convert.error_info(e))
        for tb, e in errors.items()
        if e is not None
    ]


def _named_twice(buckets: Iterable[Any]) -> str:
    names = Counter(str(convert.table_bucket_from_pb(b.table_bucket)) for b in buckets)
    twice = sorted(name for name, n in names.items() if n > 1)
    return f"bucket(s) {', '.join(twice)} named twice in one ProduceLog: refused whole, nothing written"


def _brief(failed: dict[TableBucket, Any], limit: int = 5) -> str:
    items = [f"{tb}: {ErrorCode(e.code).name} {e.message}" for tb, e in list(failed.items())[:limit]]
    more = f" (+{len(failed) - limit} more)" if len(failed) > limit else ""
    return "; ".join(items) + more
