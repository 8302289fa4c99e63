"""``Lookuper``: reads of primary-key tables — point lookups, prefix lookups and bucket scans.

    async with Lookuper("127.0.0.1:9123") as lookuper:
        row = await lookuper.lookup("db.users", 42)                 # a dict, or None when absent
        rows = await lookuper.lookup_many("db.users", [1, 2, 3])    # batched: one request per leader server
        orders = await lookuper.prefix_lookup("db.orders", {"user_id": 42})
        async for row in lookuper.scan("db.users", bucket=0):       # the bucket's rows in key order
            ...

Every read goes to the bucket's leader and sees committed rows only: a lookup after an acknowledged upsert
returns it or a later value (docs/primary-key-tables.md §1, §5). Point lookups are coalesced by
``LookupBatcher`` (one Lookup request per leader server carrying many buckets); a prefix lookup (the values of
the bucket key, a prefix of the primary key) and each page of a scan are one request to one leader, retried
under the same rules (leader hints, metadata refresh, KV_NOT_READY backoff, ``request_timeout`` overall).
A scan reads pages of ``page_rows`` rows, each resuming after the last key of the previous page; it is not a
snapshot: a row written during a scan appears if its key is still ahead of the scan.

Rows come back as dicts of the table's current columns (a row written before a column was added has it None).
A key is a value (one-column primary key), a list in primary-key order, or a dict by column name.

Owned by one event loop; for threads use ``fluss_py.client.sync.SyncLookuper``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from fluss_py.client.kv.batcher import LookupBatcher, LookupClosedError
from fluss_py.client.kv.table import KvTable, KvTables
from fluss_py.client.metadata import ClusterMetadata
from fluss_py.client.options import Backoff, LookupOptions
from fluss_py.client.transport import PREFIX_LOOKUP, SCAN_KV, GrpcTransport, Rpc, Transport
from fluss_py.errors import ErrorCode, FlussError, InvalidRequestError, LeaderNotAvailableError, RequestTimedOutError
from fluss_py.rpc.convert import to_client_exception
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.types import TableBucket, TablePath

_RPC_GRACE = 2.0


class PrefixRows(list):  # type: ignore[type-arg]
    """The rows of a prefix lookup, in key order; ``truncated``: more rows matched than were returned."""

    truncated: bool = False


class Lookuper:
    """Reads of primary-key tables (see module docstring). Owns its metadata and transport unless given."""

    def __init__(
        self,
        bootstrap_servers: str,
        options: LookupOptions | None = None,
        *,
        transport: Transport | None = None,
        metadata: ClusterMetadata | None = None,
        security: PeerIdentity | None = None,
    ) -> None:
        self.options = opts = options or LookupOptions()
        self._owns_transport = transport is None
        self._transport = transport or GrpcTransport(security or PLAINTEXT, keepalive=opts.keepalive)
        self._owns_metadata = metadata is None
        self.metadata = metadata or ClusterMetadata(
            bootstrap_servers, self._transport, request_timeout=opts.request_timeout, retry=opts.retry
        )
        self._tables = KvTables(self.metadata, opts.request_timeout)
        self._batcher = LookupBatcher(self.metadata, self._transport, opts)
        self._closed = False

    async def __aenter__(self) -> Lookuper:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def requests(self) -> int:
        """Lookup requests sent so far (fewer than the keys looked up: the batching)."""
        return self._batcher.requests

    async def table(self, table: TablePath | str) -> KvTable:
        """The table as currently known (schema, codec); TABLE_TYPE_MISMATCH for a log table."""
        self._check_open()
        return await self._tables.get(table)

    # ---------------------------------------------------------------- point lookups
    async def lookup(self, table: TablePath | str, key: Any) -> dict[str, Any] | None:
        """The row of ``key``, or None when the table holds none."""
        t = await self.table(table)
        encoded = t.codec.encode_key(t.key_values(key))
        row = await self._batcher.submit(t.table_bucket(encoded), encoded)
        return None if row is None else await self._tables.decode(t, row)

    async def lookup_many(self, table: TablePath | str, keys: Iterable[Any]) -> list[dict[str, Any] | None]:
        """The rows of ``keys`` (None for each absent one), in order; every key is checked before any is sent."""
        t = await self.table(table)
        encoded = [t.codec.encode_key(t.key_values(k)) for k in keys]
        futures = [self._batcher.submit(t.table_bucket(e), e) for e in encoded]
        rows = await asyncio.gather(*futures)
        return [None if r is None else await self._tables.decode(t, r) for r in rows]

    # ---------------------------------------------------------------- prefix lookups and scans
    async def prefix_lookup(self, table: TablePath | str, prefix: Any, *, max_rows: int = 0) -> PrefixRows:
        """The rows whose bucket key is ``prefix`` (at most ``max_rows``; 0: the server's limit)."""
        if max_rows < 0:
            raise InvalidRequestError(f"max_rows must be >= 0, not {max_rows}")
        t = await self.table(table)
        encoded = t.encode_prefix(t.prefix_values(prefix))
        tb = t.table_bucket(encoded)
        request = tablet_pb2.PrefixLookupRequest(
            buckets=[tablet_pb2.PrefixLookupBucket(table_bucket=_tb_pb(tb), prefixes=[encoded])],
            max_rows_per_prefix=max_rows,
        )

        def error_of(response: Any) -> common_pb2.ErrorInfo:
            if response.error.code != ErrorCode.NONE:
                return response.error
            if len(response.buckets) != 1:
                return _missing_answer(tb)
            result = response.buckets[0]
            if result.error.code == ErrorCode.NONE and len(result.results) != 1:
                return _missing_answer(tb)
            return result.error

        response = await self._leader_call(tb, PREFIX_LOOKUP, request, error_of)
        found = response.buckets[0].results[0]
        rows = PrefixRows([await self._tables.decode(t, r) for r in found.rows])
        rows.truncated = found.truncated
        return rows

    def scan(self, table: TablePath | str, bucket: int, *, page_rows: int = 1000) -> BucketScan:
        """A cursor over the rows of one bucket, in key order (see module docstring)."""
        if not 1 <= page_rows <= 1_000_000:
            raise InvalidRequestError(f"page_rows must be 1..1000000, not {page_rows}")
        self._check_open()
        return BucketScan(self, table, bucket, page_rows)

    async def scan_bucket(self, table: TablePath | str, bucket: int, *, page_rows: int = 1000) -> list[dict[str, Any]]:
        """Every row of one bucket, in key order."""
        return [row async for row in self.scan(table, bucket, page_rows=page_rows)]

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._batcher.close()
        if self._owns_metadata:
            await self.metadata.close()
        if self._owns_transport:
            await self._transport.close()

    # ---------------------------------------------------------------- one request to one leader, retried
    async def _leader_call(
        self, tb: TableBucket, rpc: Rpc, request: Any, error_of: Callable[[Any], common_pb2.ErrorInfo]
    ) -> Any:
        """``request`` to the leader of ``tb`` until it answers without error (``error_of`` finds the error in
        the answer); retriable errors are retried as the batcher retries them, within ``request_timeout``."""
        deadline = time.monotonic() + self.options.request_timeout
        backoff = Backoff(self.options.retry)
        while True:
            self._check_open()
            remaining = deadline - time.monotonic()
            leader = self.metadata.leader_for(tb)
            hinted = False
            try:
                if leader is None:
                    raise LeaderNotAvailableError(f"no known leader of {tb}")
                request.timeout_ms = max(int(remaining * 1000), 1)  # the leader's wait for its KV (§1.5)
                response = await self._transport.call(leader.address, rpc, request, max(remaining, 0.001) + _RPC_GRACE)
                error = error_of(response)
                if error.code == ErrorCode.NONE:
                    return response
                raise to_client_exception(error)
            except FlussError as e:
                if not e.retriable:
                    raise
                if leader is not None and e.invalid_metadata and 0 <= e.leader_id != leader.id:
                    hinted = self.metadata.apply_leader_hint(tb, e.leader_id, e.leader_address)
                if not hinted:
                    self.metadata.request_update()
                delay = backoff.next_delay(hinted=hinted)
                if time.monotonic() + delay >= deadline:
                    raise RequestTimedOutError(
                        f"{rpc.name} of {tb} not answered within the request timeout after {backoff.attempts} "
                        f"attempt(s); last error: {e}"
                    ) from None
                await asyncio.sleep(delay)

    def _check_open(self) -> None:
        if self._closed:
            raise LookupClosedError("the lookuper is closed")


class BucketScan:
    """Pages of one bucket's rows in key order (``Lookuper.scan``): ``await next_page()`` until it returns
    None, or ``async for row in scan``. One reader at a time."""

    def __init__(self, lookuper: Lookuper, table: TablePath | str, bucket: int, page_rows: int) -> None:
        self._lookuper = lookuper
        self._table = table
        self._bucket = bucket
        self._page_rows = page_rows
        self._after = b""
        self._done = False

    async def next_page(self) -> list[dict[str, Any]] | None:
        if self._done:
            return None
        lk = self._lookuper
        t = await lk.table(self._table)
        if not 0 <= self._bucket < t.info.num_buckets:
            raise InvalidRequestError(f"bucket {self._bucket} out of range: {t.path} has {t.info.num_buckets}")
        tb = TableBucket(t.info.table_id, self._bucket)
        request = tablet_pb2.ScanKvRequest(table_bucket=_tb_pb(tb), after_key=self._after, max_rows=self._page_rows)
        response = await lk._leader_call(tb, SCAN_KV, request, lambda r: r.error)
        if response.rows:
            self._after = response.rows[-1].key
        self._done = not response.more or not response.rows
        return [await lk._tables.decode(t, r.row) for r in response.rows]

    async def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        while (page := await self.next_page()) is not None:
            for row in page:
                yield row


def _tb_pb(tb: TableBucket) -> common_pb2.TableBucket:
    return common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket)


def _missing_answer(tb: TableBucket) -> common_pb2.ErrorInfo:
    return common_pb2.ErrorInfo(code=ErrorCode.NETWORK_EXCEPTION, message=f"the leader of {tb} left out the answer")


__all__ = ["BucketScan", "LookupClosedError", "Lookuper", "PrefixRows"]
