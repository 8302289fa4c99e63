"""An in-memory fake cluster behind the client's ``Transport`` Protocol (no sockets).

It models what the client relies on: tablet servers at addresses, one coordinator, tables whose buckets
have a leader, leader epoch, replicas and ISR; one shared log per bucket (every replica holds it, as if
replication were instant); idempotent writer state (duplicates answered with the original offsets,
OUT_OF_ORDER_SEQUENCE on gaps); HW = LEO; ListOffsets; long-poll-free FetchLog with epoch checks and fetch
sessions (a session answers the buckets named plus those that changed since last answered, as a real leader).

Faults are scripted with ``cluster.fault(...)``: the next matching call fails as told (not-leader with or
without a hint, naming the real leader or, with ``hint=``, a stale one; disconnect, timeout, fenced epoch,
append-then-fail = the leader appended but the answer was lost, so the retry is a duplicate). Leaders move
with ``move_leader``; ``kill`` makes a server unreachable, ``paused`` silent (an address there answers nothing;
``coordinator_address`` may be moved to a new leader). Every call is logged in ``calls`` for ordering
assertions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fluss_py.client import transport as rpcs
from fluss_py.errors import (
    ApiError,
    ErrorCode,
    NetworkExceptionError,
    RequestTimedOutError,
)
from fluss_py.record import iter_batches
from fluss_py.record.batch import set_base_offset_and_epoch
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2
from fluss_py.types import TableBucket


@dataclass
class FakeBucket:
    tb: TableBucket
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    batches: list[bytes] = field(default_factory=list)  # stamped batches, in offset order
    leo: int = 0
    writers: dict[int, list[tuple[int, int, int, int]]] = field(default_factory=dict)  # id -> (fseq, lseq, fo, lo)

    def records(self) -> list[tuple[int, bytes | None, bytes | None]]:
        out = []
        for data in self.batches:
            for batch in iter_batches(data):
                out.extend((r.offset, r.key, r.value) for r in batch.records())
        return out


@dataclass
class Fault:
    rpc: str  # "ProduceLog", "FetchLog", "ListOffsets", "GetMetadata", "AllocateWriterId", ...
    kind: str  # not_leader | not_leader_hint | disconnect | timeout | hang | fenced | append_then_disconnect | error
    address: str | None = None
    bucket: TableBucket | None = None
    times: int = 1
    code: ErrorCode = ErrorCode.NONE  # for kind == "error"
    then: Callable[[], None] | None = None  # run when the fault fires (e.g. move the leader)
    hint: int | None = None  # not_leader_hint: the server named (default: the real leader); a stale view


class FakeCluster:
    """Implements ``Transport``; see module docstring."""

    def __init__(self, num_servers: int = 3) -> None:
        self.servers = {i: f"127.0.0.1:{9200 + i}" for i in range(num_servers)}
        self.coordinator_address = "127.0.0.1:9100"
        self.dead: set[str] = set()
        self.paused: set[str] = set()  # SIGSTOPped or cut off: calls get no answer until their deadline
        self.tables: dict[tuple[str, str], tuple[int, int, int]] = {}  # path -> (id, buckets, rf)
        self.buckets: dict[TableBucket, FakeBucket] = {}
        self.properties: dict[tuple[str, str], dict[str, str]] = {}
        self.faults: list[Fault] = []
        self.calls: list[tuple[str, str, Any]] = []
        self.next_table_id = 1
        self.next_session_id = 0
        self.fetch_sessions: dict[int, dict[str, Any]] = {}
        self.next_writer_id = 100
        self.databases: set[str] = {"fluss"}
        self.appended = asyncio.Event() if _has_loop() else None
        self.latency = 0.0
        self.produce_errors: list[ErrorCode] = []  # every per-bucket error ProduceLog answered

    # ---------------------------------------------------------------- scripting
    def create_table(
        self, database: str, table: str, num_buckets: int = 1, rf: int = 3, properties: dict[str, str] | None = None
    ) -> int:
        """A table; with auto-partition ``properties`` and no ``$`` in its name, a partitioned table's logical
        table: described with ``num_buckets`` but no buckets of its own (as the coordinator creates it)."""
        table_id = self.next_table_id
        self.next_table_id += 1
        self.tables[(database, table)] = (table_id, num_buckets, rf)
        if properties:
            self.properties[(database, table)] = dict(properties)
            if "$" not in table:
                return table_id
        ids = sorted(self.servers)
        for b in range(num_buckets):
            replicas = [ids[(b + i) % len(ids)] for i in range(rf)]
            self.buckets[TableBucket(table_id, b)] = FakeBucket(
                TableBucket(table_id, b), replicas, replicas[0], 0, list(replicas)
            )
        return table_id

    def fault(self, rpc: str, kind: str, **kw: Any) -> Fault:
        f = Fault(rpc, kind, **kw)
        self.faults.append(f)
        return f

    def move_leader(self, tb: TableBucket, new_leader: int) -> None:
        b = self.buckets[tb]
        b.leader = new_leader
        b.leader_epoch += 1

    def kill(self, server_id: int) -> None:
        self.dead.add(self.servers[server_id])

    def truncate(self, tb: TableBucket, keep_batches: int) -> None:
        """Drop the bucket's last batches and rebuild writer state (an unclean loss)."""
        b = self.buckets[tb]
        kept = b.batches[:keep_batches]
        b.batches, b.leo, b.writers = [], 0, {}
        for data in kept:
            self._append(b, bytearray(data))

    # ---------------------------------------------------------------- Transport
    async def call(self, address: str, rpc: rpcs.Rpc, request: Any, timeout: float) -> Any:
        if isinstance(request, rpcs.EncodedRequest):
            request = request.decode()
        self.calls.append((address, rpc.name, request))
        await asyncio.sleep(self.latency)
        if address in self.dead:
            raise NetworkExceptionError(f"{address} refused the connection")
        if address in self.paused:
            await asyncio.sleep(timeout)
            raise RequestTimedOutError(f"{rpc.name} to {address} timed out")
        is_coord = address == self.coordinator_address
        if (rpc.service == rpcs.COORDINATOR_SERVICE) != is_coord:
            raise _unimplemented(address)
        handler = getattr(self, f"_h_{rpc.name}")
        return await handler(address, request, timeout)

    async def close(self) -> None:
        pass

    def _take_fault(
        self, rpc: str, address: str, tb: TableBucket | None = None, transport: bool = False
    ) -> Fault | None:
        for f in self.faults:
            if (f.kind in _TRANSPORT_KINDS) != transport:
                continue
            if f.rpc == rpc and (f.address is None or f.address == address) and (f.bucket is None or f.bucket == tb):
                f.times -= 1
                if f.times <= 0:
                    self.faults.remove(f)
                if f.then is not None:
                    f.then()
                return f
        return None

    def _server_id(self, address: str) -> int:
        return next(i for i, a in self.servers.items() if a == address)

    async def _transport_fault(self, rpc: str, address: str, timeout: float) -> None:
        f = self._take_fault(rpc, address, transport=True)
        if f is not None and f.kind == "disconnect":
            raise NetworkExceptionError(f"{address} reset the connection")
        if f is not None and f.kind == "timeout":
            raise RequestTimedOutError(f"{rpc} to {address} timed out")
        if f is not None and f.kind == "hang":  # a paused server: no answer until the deadline
            await asyncio.sleep(timeout)
            raise RequestTimedOutError(f"{rpc} to {address} timed out")

    # ---------------------------------------------------------------- handlers
    def _metadata(self) -> common_pb2.ClusterMetadata:
        md = common_pb2.ClusterMetadata(coordinator=_node(-1, self.coordinator_address), coordinator_epoch=1)
        for sid, addr in self.servers.items():
            if addr not in self.dead:
                md.tablet_servers.append(_node(sid, addr))
        for (db, name), (tid, nb, rf) in self.tables.items():
            tm = md.tables.add()
            tm.info.table_id = tid
            tm.info.path.database, tm.info.path.table = db, name
            tm.info.descriptor.num_buckets, tm.info.descriptor.replication_factor = nb, rf
            tm.info.descriptor.properties.update(self.properties.get((db, name), {}))
            for b in range(nb):
                fb = self.buckets.get(TableBucket(tid, b))
                if fb is None:  # a partitioned table's logical table
                    continue
                tm.buckets.add(
                    table_bucket=common_pb2.TableBucket(table_id=tid, bucket=b),
                    leader=fb.leader,
                    leader_epoch=fb.leader_epoch,
                    isr=fb.isr,
                    replicas=fb.replicas,
                )
        return md

    async def _h_GetMetadata(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("GetMetadata", address, timeout)
        return common_pb2.MetadataResponse(metadata=self._metadata())

    async def _h_AllocateWriterId(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("AllocateWriterId", address, timeout)
        self.next_writer_id += 1
        return coordinator_pb2.AllocateWriterIdResponse(writer_id=self.next_writer_id)

    async def _h_CreateTable(self, address: str, request: Any, timeout: float) -> Any:
        key = (request.path.database, request.path.table)
        if key in self.tables:
            if request.ignore_if_exists:
                return coordinator_pb2.CreateTableResponse(table_id=self.tables[key][0])
            return coordinator_pb2.CreateTableResponse(error=_err(ErrorCode.TABLE_ALREADY_EXIST))
        d = request.descriptor
        tid = self.create_table(*key, num_buckets=d.num_buckets or 1, rf=d.replication_factor or 3)
        return coordinator_pb2.CreateTableResponse(table_id=tid)

    async def _h_DropTable(self, address: str, request: Any, timeout: float) -> Any:
        key = (request.path.database, request.path.table)
        if key not in self.tables:
            return coordinator_pb2.SimpleResponse(error=_err(ErrorCode.TABLE_NOT_EXIST))
        tid = self.tables.pop(key)[0]
        self.buckets = {tb: b for tb, b in self.buckets.items() if tb.table_id != tid}
        return coordinator_pb2.SimpleResponse()

    async def _h_ListTables(self, address: str, request: Any, timeout: float) -> Any:
        return coordinator_pb2.ListTablesResponse(tables=sorted(t for d, t in self.tables if d == request.database))

    async def _h_CreateDatabase(self, address: str, request: Any, timeout: float) -> Any:
        self.databases.add(request.name)
        return coordinator_pb2.SimpleResponse()

    async def _h_ListDatabases(self, address: str, request: Any, timeout: float) -> Any:
        return coordinator_pb2.ListDatabasesResponse(databases=sorted(self.databases))

    def _leader_error(self, b: FakeBucket, me: int, f: Fault | None) -> common_pb2.ErrorInfo | None:
        if f is not None and f.kind == "not_leader":
            return _err(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        if f is not None and f.kind == "not_leader_hint":
            named = b.leader if f.hint is None else f.hint
            return _err(ErrorCode.NOT_LEADER_OR_FOLLOWER, named, self.servers[named])
        if f is not None and f.kind == "fenced":
            return _err(ErrorCode.FENCED_LEADER_EPOCH)
        if f is not None and f.kind == "error":
            return _err(f.code)
        if b.leader != me:
            return _err(ErrorCode.NOT_LEADER_OR_FOLLOWER, b.leader, self.servers[b.leader])
        return None

    async def _h_ProduceLog(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("ProduceLog", address, timeout)
        me = self._server_id(address)
        response = tablet_pb2.ProduceLogResponse()
        lost_answer = False
        for pb in request.buckets:
            tb = TableBucket(pb.table_bucket.table_id, pb.table_bucket.bucket)
            result = response.buckets.add(table_bucket=pb.table_bucket)
            b = self.buckets.get(tb)
            if b is None:
                result.error.CopyFrom(_err(ErrorCode.UNKNOWN_TABLE_OR_BUCKET))
                continue
            f = self._take_fault("ProduceLog", address, tb)
            if f is not None and f.kind == "append_then_disconnect":
                lost_answer = True
                f = None
            error = self._leader_error(b, me, f)
            if error is not None:
                result.error.CopyFrom(error)
                self.produce_errors.append(ErrorCode(error.code))
                continue
            try:
                first, last = self._append(b, bytearray(pb.records))
            except ApiError as e:
                result.error.CopyFrom(_err(e.code))
                self.produce_errors.append(e.code)
                continue
            result.base_offset, result.last_offset = first, last
        if self.appended is not None:
            self.appended.set()
        if lost_answer:
            raise NetworkExceptionError(f"{address} died before answering")
        return response

    def _append(self, b: FakeBucket, data: bytearray) -> tuple[int, int]:
        batches = list(iter_batches(data))
        assert len(batches) == 1, "the client sends one batch per bucket per request"
        batch = batches[0]
        batch.ensure_valid()
        n = batch.record_count
        if batch.writer_id >= 0:
            seen = b.writers.get(batch.writer_id, [])
            for fseq, lseq, fo, lo in seen:
                if fseq == batch.base_sequence and lseq == batch.last_sequence:
                    return fo, lo  # duplicate: the original offsets, nothing appended
            if seen and batch.base_sequence != seen[-1][1] + 1:
                raise _api(ErrorCode.OUT_OF_ORDER_SEQUENCE)
        first = b.leo
        set_base_offset_and_epoch(data, 0, first, b.leader_epoch)
        b.batches.append(bytes(data))
        b.leo += n
        if batch.writer_id >= 0:
            entry = (batch.base_sequence, batch.base_sequence + n - 1, first, first + n - 1)
            b.writers[batch.writer_id] = [*b.writers.get(batch.writer_id, []), entry][-5:]
        return first, first + n - 1

    def _has_fault(self, rpc: str, address: str, tb: TableBucket) -> bool:
        return any(
            f.rpc == rpc
            and f.kind not in _TRANSPORT_KINDS
            and (f.address is None or f.address == address)
            and (f.bucket is None or f.bucket == tb)
            for f in self.faults
        )

    def _session_fetches(self, address: str, me: int, request: Any, response: Any) -> list[Any] | None:
        """Fetch sessions as a real leader keeps them (docs/replication.md "Fetch sessions"), simplified: the
        buckets to answer are the named ones plus those of the session something happened to since they were
        last answered (new records, a leader move, a scripted fault). None: a session error was answered."""
        s = request.session
        if s.id == 0:
            self.next_session_id += 1
            sid, session = self.next_session_id, {"epoch": 1, "pos": {}, "seen": {}}
            self.fetch_sessions[sid] = session
        else:
            sid, session = s.id, self.fetch_sessions.get(s.id)
            if session is None or s.epoch != session["epoch"]:
                self.fetch_sessions.pop(s.id, None)
                code = ErrorCode.FETCH_SESSION_NOT_FOUND if session is None else ErrorCode.INVALID_FETCH_SESSION_EPOCH
                response.error.CopyFrom(_err(code))
                return None
            session["epoch"] += 1
            for f in s.forgotten:
                tb = TableBucket(f.table_id, f.bucket)
                session["pos"].pop(tb, None)
                session["seen"].pop(tb, None)
        response.session_id = sid
        named = {TableBucket(f.table_bucket.table_id, f.table_bucket.bucket): f for f in request.buckets}
        session["pos"].update(named)
        out = list(named.values())
        for tb, fbk in session["pos"].items():
            b = self.buckets.get(tb)
            happened = (
                b is None or (b.leo, b.leader) != session["seen"].get(tb) or self._has_fault("FetchLog", address, tb)
            )
            if tb not in named and happened:
                out.append(fbk)
        for fbk in out:
            tb = TableBucket(fbk.table_bucket.table_id, fbk.table_bucket.bucket)
            b = self.buckets.get(tb)
            session["seen"][tb] = None if b is None else (b.leo, b.leader)
        return out

    async def _h_FetchLog(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("FetchLog", address, timeout)
        me = self._server_id(address)
        response = tablet_pb2.FetchLogResponse()
        fetches = list(request.buckets)
        if request.HasField("session"):
            fetches = self._session_fetches(address, me, request, response)
            if fetches is None:
                return response
        for fbk in fetches:
            tb = TableBucket(fbk.table_bucket.table_id, fbk.table_bucket.bucket)
            result = response.buckets.add(table_bucket=fbk.table_bucket)
            b = self.buckets.get(tb)
            if b is None:
                result.error.CopyFrom(_err(ErrorCode.UNKNOWN_TABLE_OR_BUCKET))
                continue
            error = self._leader_error(b, me, self._take_fault("FetchLog", address, tb))
            if error is None and 0 <= fbk.current_leader_epoch < b.leader_epoch:
                error = _err(ErrorCode.FENCED_LEADER_EPOCH)
            if error is None and fbk.current_leader_epoch > b.leader_epoch:
                error = _err(ErrorCode.UNKNOWN_LEADER_EPOCH)
            if error is None and not 0 <= fbk.fetch_offset <= b.leo:
                error = _err(ErrorCode.OFFSET_OUT_OF_RANGE)
            if error is not None:
                result.error.CopyFrom(error)
                continue
            result.high_watermark = result.log_end_offset = b.leo
            out, size = [], 0
            for data in b.batches:
                batch = next(iter_batches(data))
                if batch.last_offset < fbk.fetch_offset:
                    continue
                if out and size + len(data) > fbk.max_bytes:
                    break
                out.append(data)
                size += len(data)
            result.records = b"".join(out)
        if not any(r.records for r in response.buckets) and request.max_wait_ms > 0:
            await asyncio.sleep(min(request.max_wait_ms / 1000, 0.01))
        return response

    async def _h_ListOffsets(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("ListOffsets", address, timeout)
        me = self._server_id(address)
        response = tablet_pb2.ListOffsetsResponse()
        for lb in request.buckets:
            tb = TableBucket(lb.table_bucket.table_id, lb.table_bucket.bucket)
            result = response.buckets.add(table_bucket=lb.table_bucket)
            b = self.buckets[tb]
            error = self._leader_error(b, me, self._take_fault("ListOffsets", address, tb))
            if error is not None:
                result.error.CopyFrom(error)
                continue
            result.high_watermark = result.log_end_offset = b.leo
            result.log_start_offset = 0
            if lb.spec == tablet_pb2.EARLIEST:
                result.offset = 0
            elif lb.spec in (tablet_pb2.LATEST, tablet_pb2.HIGH_WATERMARK):
                result.offset = b.leo
            else:
                result.offset = -1
                for data in b.batches:
                    for r in next(iter_batches(data)).records():
                        if r.timestamp_ms >= lb.timestamp_ms:
                            result.offset = r.offset
                            break
                    if result.offset >= 0:
                        break
        return response


_TRANSPORT_KINDS = frozenset({"disconnect", "timeout", "hang"})


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        return False


def _node(sid: int, address: str) -> common_pb2.ServerNode:
    host, _, port = address.rpartition(":")
    return common_pb2.ServerNode(id=sid, host=host, port=int(port))


def _err(code: ErrorCode, leader_id: int = -1, leader_address: str = "") -> common_pb2.ErrorInfo:
    return common_pb2.ErrorInfo(code=int(code), message=code.name, leader_id=leader_id, leader_address=leader_address)


def _api(code: ErrorCode) -> ApiError:
    from fluss_py.errors import for_code

    return for_code(code)()


def _unimplemented(address: str) -> ApiError:
    from fluss_py.errors import InvalidRequestError

    return InvalidRequestError(f"UNIMPLEMENTED at {address}")
