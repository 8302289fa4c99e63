"""Coordinator leader -> tablet server requests: batched per server, ordered per server, never blocking.

A handler collects what each server must hear in a ``RequestBatch`` and sends it once at the end::

    batch = RequestBatch(coordinator_id, coordinator_epoch)
    batch.leader_and_isr(server, bucket_pb, table_info_pb)     # NotifyLeaderAndIsr, one per server
    batch.stop_replica(server, tb, leader_epoch, delete)       # StopReplica, one per server
    batch.update_metadata(servers)                             # UpdateMetadata: the full cluster view
    batch.metadata_delta(servers, buckets, tables, removed)    # UpdateMetadata: only what changed
    batch.send(channel, views, nodes, tokens)                  # per server: UpdateMetadata, Notify, Stop

Every request carries the coordinator epoch (tablet servers refuse lower ones). ``TabletChannel`` keeps
one outbox (deque + sender task) per live server: requests to one server leave in the order they were
queued; a failed send *or a refusal* (a whole-request error) is sent again with back-off (100 ms doubling
to 1 s) until the server answers it or is removed (it died). UpdateMetadata is a full view or a numbered
delta on top of the previous view (docs/control-plane.md §8): any UpdateMetadata followed by a newer *full*
one in the same outbox is skipped; a delta the server cannot apply (it lacks the base view) is answered
``needs_full_view`` and replaced at once by the current full view (``full_view``). A NotifyLeaderAndIsr
being retried drops the buckets a newer one names. Requests present this leader's per-term token in the call metadata
(docs/peer-trust.md); UpdateMetadata carries every live server's replica token. Handlers never await the
network, so one slow or paused server cannot stall the coordinator's event loop.

``TabletGateway`` is the narrow network edge (``GrpcTabletGateway`` over grpc.aio; unit tests pass a fake).

Who may call: the event processor's task (``RequestBatch``, ``TabletChannel.add/remove``); the sender
tasks are owned by ``TabletChannel`` and cancelled by ``close``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from fluss_py.errors import ErrorCode
from fluss_py.rpc import convert
from fluss_py.rpc.channels import ChannelPool
from fluss_py.rpc.pb import common_pb2, tablet_pb2, tablet_pb2_grpc
from fluss_py.rpc.peer import COORDINATOR_TOKEN_KEY, call_metadata
from fluss_py.types import ServerNode, TableBucket

log = logging.getLogger(__name__)

NOTIFY = "NotifyLeaderAndIsr"
STOP = "StopReplica"
UPDATE = "UpdateMetadata"
RETRY_INITIAL = 0.1
RETRY_MAX = 1.0


@dataclass(frozen=True)
class MetadataDelta:
    """What changed in the view since the previous UpdateMetadata: buckets, whole tables (created), and
    dropped tables."""

    buckets: frozenset[TableBucket] = frozenset()
    tables: frozenset[int] = frozenset()
    removed: frozenset[int] = frozenset()

    def __or__(self, other: MetadataDelta) -> MetadataDelta:
        return MetadataDelta(self.buckets | other.buckets, self.tables | other.tables, self.removed | other.removed)


@dataclass(frozen=True)
class MetadataViews:
    """The UpdateMetadata contents of one batch, numbered ``version``: ``full`` builds the full view (asked
    only when some server gets it), ``delta`` is the changes on top of view ``version - 1``."""

    version: int
    full: Callable[[], common_pb2.ClusterMetadata]
    delta: common_pb2.ClusterMetadata
    removed: tuple[int, ...] = ()


FullView = Callable[[], tablet_pb2.UpdateMetadataRequest]


class TabletGateway(Protocol):
    """Sends one request to one tablet server and returns its response (raises on transport failure)."""

    async def send(self, server: ServerNode, kind: str, request: Any) -> Any: ...


class GrpcTabletGateway:
    """TabletGateway over grpc.aio: one stub per address from a ChannelPool (owned by the caller); every call
    presents the leader's per-term ``token``."""

    def __init__(self, pool: ChannelPool, timeout: float = 5.0, token: str = "") -> None:
        self._pool = pool
        self._timeout = timeout
        self._metadata = call_metadata(COORDINATOR_TOKEN_KEY, token)

    async def send(self, server: ServerNode, kind: str, request: Any) -> Any:
        stub = tablet_pb2_grpc.TabletServiceStub(self._pool.get(server.address))
        method = getattr(stub, kind)
        return await method(request, timeout=self._timeout, metadata=self._metadata)


ResponseHook = Callable[[int, str, Any, Any], None]


@dataclass
class _Outbox:
    node: ServerNode
    queue: deque[tuple[str, Any]] = field(default_factory=deque)
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None


class TabletChannel:
    """One ordered outbox and sender task per live tablet server. Owned by the leader's services."""

    def __init__(self, gateway: TabletGateway, on_response: ResponseHook | None = None) -> None:
        self._gateway = gateway
        self.on_response = on_response  # (server id, kind, request, response), called on the loop
        self.full_view: FullView | None = None  # the current full UpdateMetadata, for a server refusing a delta
        self.full_views_asked = 0
        self._outboxes: dict[int, _Outbox] = {}
        self._closed = False
        self.sent = 0  # requests answered (for tests and metrics)

    # ---------------------------------------------------------------- membership
    def add(self, node: ServerNode) -> None:
        """Start (or re-address) the outbox of a live server."""
        box = self._outboxes.get(node.id)
        if box is not None and box.node.address == node.address:
            return
        if box is not None:
            self.remove(node.id)
        box = _Outbox(node)
        self._outboxes[node.id] = box
        if not self._closed:
            box.task = asyncio.get_running_loop().create_task(self._run(box), name=f"coordinator-send-{node.id}")

    def remove(self, server_id: int) -> None:
        """Drop a dead server's outbox and everything queued for it."""
        box = self._outboxes.pop(server_id, None)
        if box is not None and box.task is not None:
            box.task.cancel()

    def servers(self) -> list[int]:
        return sorted(self._outboxes)

    def enqueue(self, server_id: int, kind: str, request: Any) -> bool:
        """Queue a request; False if the server has no outbox (not live)."""
        box = self._outboxes.get(server_id)
        if box is None or self._closed:
            log.debug("Not sending %s to tablet server %d: not live", kind, server_id)
            return False
        box.queue.append((kind, request))
        box.wakeup.set()
        return True

    def pending(self, server_id: int) -> int:
        box = self._outboxes.get(server_id)
        return len(box.queue) if box is not None else 0

    async def close(self) -> None:
        self._closed = True
        tasks = [b.task for b in self._outboxes.values() if b.task is not None]
        self._outboxes.clear()
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ---------------------------------------------------------------- sending
    async def _run(self, box: _Outbox) -> None:
        while True:
            if not box.queue:
                box.wakeup.clear()
                await box.wakeup.wait()
                continue
            if _drop_superseded(box.queue, retrying=False):
                continue
            answered = await self._send_until_answered(box)
            box.queue.popleft()
            if answered is None:
                continue  # superseded while it was being retried
            kind, request, response = answered
            self.sent += 1
            self._check(box.node.id, kind, request, response)

    async def _send_until_answered(self, box: _Outbox) -> tuple[str, Any, Any] | None:
        """Send the head of the outbox until the server answers it without a whole-request error: a failed
        call and a refusal (say a tablet server that has not yet seen this leader's node in ZooKeeper) are
        sent again, 100 ms doubling to 1 s apart. None when a newer request queued meanwhile replaced it."""
        delay = RETRY_INITIAL
        attempt = 0
        while True:
            kind, request = box.queue[0]
            attempt += 1
            try:
                response = await self._gateway.send(box.node, kind, request)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                problem = f"failed: {_short(e)}"
            else:
                error = getattr(response, "error", None)
                if kind == UPDATE and getattr(response, "needs_full_view", False) and self.full_view is not None:
                    self.full_views_asked += 1
                    box.queue[0] = (UPDATE, self.full_view())  # at once: the server holds no usable view
                    continue
                if error is None or error.code == ErrorCode.NONE:
                    return kind, request, response
                problem = f"refused: {_code_name(error.code)}: {error.message}"
            level = logging.WARNING if attempt in (1, 10) or attempt % 50 == 0 else logging.DEBUG
            log.log(
                level,
                "%s to tablet server %d at %s %s (attempt %d); sending it again in %.1fs",
                kind,
                box.node.id,
                box.node.address,
                problem,
                attempt,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(RETRY_MAX, delay * 2)
            if _drop_superseded(box.queue, retrying=True):
                return None

    def _check(self, server_id: int, kind: str, request: Any, response: Any) -> None:
        failed: dict[str, list[str]] = {}
        for result in getattr(response, "buckets", ()):
            if result.error.code != ErrorCode.NONE:
                what = f"{_code_name(result.error.code)} ({result.error.message})"
                failed.setdefault(what, []).append(f"{result.table_bucket.table_id}-{result.table_bucket.bucket}")
        for what, buckets in failed.items():
            shown = ", ".join(buckets[:10]) + (f", ... ({len(buckets)} in all)" if len(buckets) > 10 else "")
            log.warning("%s to tablet server %d: bucket(s) %s answered %s", kind, server_id, shown, what)
        if self.on_response is not None:
            try:
                self.on_response(server_id, kind, request, response)
            except Exception:
                log.exception("response hook failed for %s to tablet server %d", kind, server_id)


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


def _drop_superseded(queue: deque[tuple[str, Any]], retrying: bool) -> bool:
    """Whether the head of ``queue`` is replaced by a request queued behind it: an UpdateMetadata by a later
    full one (a delta is never skipped: the next one builds on it); while being retried, a NotifyLeaderAndIsr
    loses the buckets a later one names (it carries their newer state) and is replaced once none is left.
    StopReplica is never replaced. A replaced head is popped here unless ``retrying`` (then the sender pops
    it)."""
    kind, request = queue[0]
    later = list(queue)[1:]
    if kind == UPDATE:
        replaced = any(k == UPDATE and not getattr(r, "incremental", False) for k, r in later)
    elif kind == NOTIFY and retrying:
        named = {(b.table_bucket.table_id, b.table_bucket.bucket) for k, r in later if k == NOTIFY for b in r.buckets}
        kept = [b for b in request.buckets if (b.table_bucket.table_id, b.table_bucket.bucket) not in named]
        replaced = not kept
        if kept and len(kept) < len(request.buckets):
            trimmed = type(request)()
            trimmed.CopyFrom(request)
            del trimmed.buckets[:]
            trimmed.buckets.extend(kept)
            queue[0] = (kind, trimmed)
    else:
        replaced = False
    if replaced and not retrying:
        queue.popleft()
    return replaced


def _short(e: BaseException) -> str:
    details = getattr(e, "details", None)
    if callable(details):
        try:
            return f"{e.code().name}: {details()}"  # grpc.aio.AioRpcError
        except Exception:
            pass
    return f"{type(e).__name__}: {e}"


class RequestBatch:
    """The requests one event produces, grouped per server. Built and sent on the event loop's task."""

    def __init__(self, coordinator_id: int, coordinator_epoch: int) -> None:
        self.coordinator_id = coordinator_id
        self.coordinator_epoch = coordinator_epoch
        self._notify: dict[int, dict[TableBucket, common_pb2.BucketLeaderAndIsr]] = {}
        self._named: dict[int, set[int]] = {}  # per server: the servers its NotifyLeaderAndIsr names
        self._tables: dict[int, dict[int, common_pb2.TableInfo]] = {}
        self._stop: dict[int, dict[TableBucket, tablet_pb2.StopReplicaBucket]] = {}
        self._update: set[int] = set()  # servers to get the full view
        self._delta_to: set[int] = set()  # servers to get the delta (unless they get the full view)
        self.delta = MetadataDelta()

    def leader_and_isr(
        self,
        server: int,
        bucket: common_pb2.BucketLeaderAndIsr,
        table: common_pb2.TableInfo,
        tb: TableBucket | None = None,
        named: Iterable[int] | None = None,
    ) -> None:
        """``bucket`` (the message of ``tb``, which names the servers ``named``: its replicas, ISR and leader)
        into ``server``'s NotifyLeaderAndIsr; ``tb`` and ``named`` are read from the message when not given."""
        if tb is None:
            tb = convert.table_bucket_from_pb(bucket.table_bucket)
        if named is None:
            named = (*bucket.replicas, *bucket.isr, bucket.leader)
        self._notify.setdefault(server, {})[tb] = bucket
        self._named.setdefault(server, set()).update(named)
        self._tables.setdefault(server, {})[table.table_id] = table

    def stop_replica(self, server: int, tb: TableBucket, leader_epoch: int, delete: bool) -> None:
        self._stop.setdefault(server, {})[tb] = tablet_pb2.StopReplicaBucket(
            table_bucket=convert.table_bucket_to_pb(tb), leader_epoch=leader_epoch, delete=delete
        )

    def update_metadata(self, servers: Iterable[int]) -> None:
        """The full view to ``servers`` (at a leadership's start, to a returning server)."""
        self._update.update(servers)

    def metadata_delta(
        self,
        servers: Iterable[int],
        buckets: Iterable[TableBucket] = (),
        tables: Iterable[int] = (),
        removed: Iterable[int] = (),
    ) -> None:
        """Only what changed to ``servers``: ``buckets``, the whole of ``tables``, the dropped ``removed``
        (the live servers and the coordinator always travel whole)."""
        self._delta_to.update(servers)
        self.delta = self.delta | MetadataDelta(frozenset(buckets), frozenset(tables), frozenset(removed))

    def has_metadata(self) -> bool:
        return bool(self._update or self._delta_to)

    def empty(self) -> bool:
        return not (self._notify or self._stop or self._update or self._delta_to)

    def requests(
        self,
        views: MetadataViews | None,
        nodes: dict[int, ServerNode],
        replica_tokens: Mapping[int, str] | None = None,
    ) -> list[tuple[int, str, Any]]:
        """(server, kind, request) in send order: per server UpdateMetadata, NotifyLeaderAndIsr, StopReplica.
        Each UpdateMetadata carries ``replica_tokens`` (every live server's, docs/peer-trust.md)."""
        out: list[tuple[int, str, Any]] = []
        ce, cid = self.coordinator_epoch, self.coordinator_id
        tokens = [tablet_pb2.ReplicaToken(server_id=s, token=t) for s, t in sorted((replica_tokens or {}).items())]
        full: common_pb2.ClusterMetadata | None = None
        for server in sorted(self._update | self._delta_to | set(self._notify) | set(self._stop)):
            if views is not None and server in self._update:
                full = full if full is not None else views.full()
                out.append((server, UPDATE, update_request(ce, cid, views.version, full, tokens)))
            elif views is not None and server in self._delta_to:
                request = update_request(ce, cid, views.version, views.delta, tokens)
                request.incremental, request.base_version = True, views.version - 1
                request.removed_table_ids.extend(views.removed)
                out.append((server, UPDATE, request))
            if server in self._notify:
                buckets = self._notify[server]
                named = sorted(self._named[server] - {-1})
                out.append(
                    (
                        server,
                        NOTIFY,
                        tablet_pb2.NotifyLeaderAndIsrRequest(
                            coordinator_epoch=ce,
                            coordinator_id=cid,
                            buckets=[buckets[tb] for tb in sorted(buckets)],
                            tables=[self._tables[server][t] for t in sorted(self._tables[server])],
                            servers=[convert.server_node_to_pb(nodes[s]) for s in named if s in nodes],
                        ),
                    )
                )
            if server in self._stop:
                stops = self._stop[server]
                out.append(
                    (
                        server,
                        STOP,
                        tablet_pb2.StopReplicaRequest(
                            coordinator_epoch=ce, coordinator_id=cid, buckets=[stops[tb] for tb in sorted(stops)]
                        ),
                    )
                )
        return out

    def send(
        self,
        channel: TabletChannel,
        views: MetadataViews | None,
        nodes: dict[int, ServerNode],
        replica_tokens: Mapping[int, str] | None = None,
    ) -> int:
        """Queue every request on ``channel``; returns how many were queued (dead servers are skipped)."""
        queued = self.requests(views, nodes, replica_tokens)
        return sum(channel.enqueue(server, kind, req) for server, kind, req in queued)


def update_request(
    epoch: int,
    coordinator_id: int,
    version: int,
    metadata: common_pb2.ClusterMetadata,
    tokens: Iterable[tablet_pb2.ReplicaToken],
) -> tablet_pb2.UpdateMetadataRequest:
    """An UpdateMetadata carrying the full view ``metadata`` numbered ``version`` (the delta's fields unset)."""
    return tablet_pb2.UpdateMetadataRequest(
        coordinator_epoch=epoch,
        coordinator_id=coordinator_id,
        metadata=metadata,
        replica_tokens=tokens,
        metadata_version=version,
    )
