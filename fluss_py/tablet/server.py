"""``fluss-py tablet-server``: membership in ZooKeeper, coordinator-epoch fencing, the TabletService.

Lifecycle::

    Starting: ZK session -> LogManager.load_logs() (recovery of data.dir) -> ReplicaManager.start()
              -> RPC + HTTP servers bound -> register <root>/tabletservers/ids/<id> (ephemeral)
              -> watch <root>/coordinator/leader -> Running
    session expired: registered=false; on the new session register again (same id, same data), and again
             on every later CONNECTED while not registered (a connection loss cut the attempt short)
    SIGTERM: ShuttingDown (controlled shutdown: ControlledShutdown to the coordinator leader until this
             server leads nothing, at most CONTROLLED_SHUTDOWN_TIMEOUT_S; still serving meanwhile)
             -> Stopping: stop RPC intake -> ReplicaManager.shutdown() -> LogManager.shutdown() (flush,
             checkpoints, clean-shutdown marker) -> close the session (the ids node vanishes) -> exit 0

The replica layer (``tablet/replica_layer.py``) converts the TabletService's protobuf for the
``ReplicaManager``; AdjustIsr goes to the coordinator leader named by the leader znode this server
watches; followers fetch through ``GrpcLeaderEndpoint``. /metrics renders replica counts at scrape time.

Duplicate ids: when ``ids/<id>`` exists and belongs to another session, the server looks at the address
it names. If it is our own advertised address and a different incarnation, it is our dead predecessor
(we hold its port): delete that node (conditional on its version) and register at once
(docs/failure-detection.md, fast restart). Else, if something answers there, another live server has our
id: refuse to start (SERVER_ID_CONFLICT, exit 1). If nothing answers, it is a dead predecessor whose session
has not expired yet: wait for the node to vanish, at most twice the session timeout, then refuse.
The registration carries this process's incarnation; ``WatchLiveness`` streams (``tablet/liveness.py``)
let the coordinator leader detect this process's death without waiting for the session to expire. It also
carries this process's secret replica token, which its follower fetches present; the server checks other
followers' tokens (``TokenReplicaVerifier``, from UpdateMetadata or their registrations) and the
coordinator leader's epoch and token (``CoordinatorFence``, fed by the leader watch): docs/peer-trust.md.

Who may call: the CLI (``run``, ``request_stop``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import Any

from prometheus_client import CollectorRegistry

from fluss_py import config as cfg
from fluss_py import metric_catalogue as mc
from fluss_py.common.http import HttpServer, Request, Response, json_response, metrics_route
from fluss_py.errors import ServerIdConflictError
from fluss_py.log.dirs import LogDirs, data_dirs_of
from fluss_py.replica.fetcher.leader_endpoint import GrpcLeaderEndpoint
from fluss_py.replica.gateway import GrpcCoordinatorEndpoint
from fluss_py.replica.manager import ReplicaManager, ReplicaStats
from fluss_py.rpc.channels import set_server_identity, set_server_keepalive
from fluss_py.rpc.keepalive import Keepalive
from fluss_py.rpc.pb import tablet_pb2_grpc
from fluss_py.rpc.peer import new_token, replica_verifier
from fluss_py.rpc.server import start_rpc_server
from fluss_py.security.server_security import ServerSecurity
from fluss_py.tablet.controlled_shutdown import controlled_shutdown
from fluss_py.tablet.coordinator_fence import CoordinatorFence, ZkCoordinatorRecords
from fluss_py.tablet.dynamic_config import DynamicConfigWatcher, DynamicOverrides
from fluss_py.tablet.lifecycle import TabletServerState, transition
from fluss_py.tablet.liveness import LivenessBeacon, is_own_stale_registration, new_incarnation
from fluss_py.tablet.metadata_cache import MetadataCache
from fluss_py.tablet.metrics import PeerRefusalCollector, replica_metrics_text
from fluss_py.tablet.replica_layer import ManagerReplicaLayer
from fluss_py.tablet.request_metrics import MeteredReplicaLayer, RequestMetrics
from fluss_py.tablet.retention import retention_pass
from fluss_py.tablet.service import ReplicaLayer, TabletServicer
from fluss_py.tablet.storage_health import (
    HEALTH_DETAILS,
    StorageCollector,
    disk_use,
    health_fields,
    hide_table_details,
    replica_fields,
)
from fluss_py.types import CoordinatorLeaderInfo
from fluss_py.zk.client import retry_session_lost
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.credentials import server_zk_client
from fluss_py.zk.metrics import ZkSessionCollector
from fluss_py.zk.paths import CoordinatorLeaderZNode, TabletServerZNode, persistent_parents
from fluss_py.zk.values import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionState,
    ZkError,
    ZnodeStat,
)

log = logging.getLogger(__name__)

DEFAULT_RPC_PORT = 9122
DEFAULT_HTTP_PORT = 9125
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0
FOLLOWER_SHUTDOWN_TIMEOUT_S = 1.0  # leading nothing: only leaving the ISRs early, the death path does it too
RETENTION_CHECK_INTERVAL_S = 60.0
REREGISTER_BACKOFF = 1.0  # between attempts to register again while connected


async def address_answers(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a TCP connection to host:port succeeds (positive proof that something listens there)."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError):
        return False
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return True


class TabletServer:
    """Owns the ZooKeeper session, the ids registration, the leader watch, the RPC and HTTP servers."""

    def __init__(self, config: cfg.Config) -> None:
        self.config = config
        self.server_id = int(config[cfg.TABLET_SERVER_ID])
        self.incarnation = new_incarnation()  # this process's life, in the registration and heartbeats
        self.replica_token = new_token()  # this process's secret: its follower fetches present it (peer-trust.md)
        self.rack = config[cfg.TABLET_SERVER_RACK]
        self.bind_host = config[cfg.BIND_HOST]
        self.host = config[cfg.ADVERTISED_HOST]
        self.rpc_port = config[cfg.RPC_PORT] or DEFAULT_RPC_PORT
        self.http_port = config[cfg.HTTP_PORT] or DEFAULT_HTTP_PORT
        self.session_timeout = float(config[cfg.ZK_SESSION_TIMEOUT])
        self.zk = server_zk_client(config)
        self.root = self.zk.root
        self.state = TabletServerState.STARTING
        self.registered = False
        self.fence = CoordinatorFence(ZkCoordinatorRecords(self.zk))
        self.servicer: TabletServicer | None = None
        self.coordinator_leader: CoordinatorLeaderInfo | None = None
        self.metadata_cache = MetadataCache()
        self.log_manager: LogDirs | None = None
        self.replica_manager: ReplicaManager | None = None
        self._gateway: GrpcCoordinatorEndpoint | None = None
        self.replica_layer: ReplicaLayer | None = None
        self._signals: asyncio.Queue[SessionEvent | None] = asyncio.Queue()
        self._session = 0
        self._rpc_server: Any = None
        self._http: HttpServer | None = None
        self._run_task: asyncio.Task | None = None
        self._in_lifecycle = False
        self._leader_watch: Any = None
        self._retention_task: asyncio.Task[None] | None = None
        self._retention_failure: BaseException | None = None
        self._dynamic: DynamicConfigWatcher | None = None
        self.metrics = CollectorRegistry()
        mc.TABLET_SERVER_REGISTERED.gauge(self.metrics).set_function(lambda: 1 if self.registered else 0)
        mc.TABLET_SERVER_COORDINATOR_EPOCH.gauge(self.metrics).set_function(lambda: self.fence.highest)
        self.metrics.register(ZkSessionCollector(self.zk))
        self.metrics.register(PeerRefusalCollector(self))
        self.request_metrics = RequestMetrics(self.metrics)
        self.security = ServerSecurity(config, self.metrics)  # docs/security.md
        set_server_identity(self.security.identity)
        set_server_keepalive(Keepalive.from_config(config))  # rpc.keepalive.*: its server and its channels
        # followers prove who they are: the certificate names them (mutual TLS) and they present their token
        self.replica_verifier = replica_verifier(
            self.server_id, self._registered_token, certificates=self.security.peer_certificates
        )

    async def _registered_token(self, server_id: int) -> str | None:
        """The replica token in tablet server ``server_id``'s registration (None: not registered)."""
        if server_id < 0:
            return None
        got = await self.zk.get(TabletServerZNode.path(self.root, server_id))
        return TabletServerZNode.decode(got[0]).replica_token if got is not None else None

    @property
    def registration_path(self) -> str:
        return TabletServerZNode.path(self.root, self.server_id)

    def _replica_stats(self) -> ReplicaStats | None:
        return self.replica_manager.stats() if self.replica_manager is not None else None

    def _coordinator_address(self) -> str | None:
        leader = self.coordinator_leader
        return leader.address if leader is not None else None

    async def _health(self, request: Request | None = None) -> Response:
        body: dict[str, Any] = {
            "role": "tablet-server",
            "server_id": self.server_id,
            "state": self.state,
            "registered": self.registered,
            "zk_connected": self.zk.connected,
            "coordinator_epoch": self.fence.highest,
            "coordinator_leader": self.coordinator_leader.server_id if self.coordinator_leader else -1,
        }
        problems: list[str] = []
        if self.replica_manager is not None:
            problems += replica_fields(body, self.replica_manager)  # counts, tasks, KVs (tablet/storage_health.py)
        if self._retention_failure is not None:
            problems.append(f"retention loop failed: {self._retention_failure!r}")
        if self.log_manager is not None:
            body.update(health_fields(self.log_manager, self.replica_manager))
            problems += [f"data directory {p} {s}" for p, s in body["log_dirs"].items() if s != "online"]
        body["status"] = "degraded" if problems else "ok"  # the process runs; something in it does not
        body["problems"] = problems
        shown = request is None or await self.security.http.allowed(request, *HEALTH_DETAILS)  # docs/security.md
        return json_response(body if shown else hide_table_details(body))  # table names: DESCRIBE_CONFIGS only

    def _start_replicas(self) -> ReplicaLayer:
        """Lock and load (recover) every log of the data dirs, then start the replica manager; before any RPC
        is served. A directory that fails to load is offline; a locked one stops the start (StorageError)."""
        log_manager = LogDirs(data_dirs_of(self.config), self.config)
        started = time.monotonic()
        logs = log_manager.load_logs()
        load_s = time.monotonic() - started
        # only now may shutdown write the clean-shutdown marker: after a failed load it would let the next
        # start trust logs that were never recovered
        self.log_manager = log_manager
        self._gateway = GrpcCoordinatorEndpoint(self._coordinator_address, replica_token=self.replica_token)
        endpoints = functools.partial(
            GrpcLeaderEndpoint, replica_token=self.replica_token, stream=bool(self.config[cfg.REPLICA_FETCH_STREAM])
        )
        self.replica_manager = ReplicaManager(self.server_id, self.log_manager, self.config, self._gateway, endpoints)
        self.replica_manager.start()
        self.metrics.register(StorageCollector(log_manager, self.replica_manager, load_s))
        self._retention_task = asyncio.create_task(self._retention_loop(), name="log-retention")
        self._retention_task.add_done_callback(self._retention_done)
        log.info(
            "Tablet server %d: %d logs loaded from %s (%s shutdown before) in %.3f s, %d MB CRC-checked%s",
            self.server_id, len(logs), ", ".join(map(str, log_manager.paths)),
            "clean" if log_manager.had_clean_shutdown else "unclean", load_s, log_manager.verified_bytes // 1_000_000,
            "".join(f"; {p} OFFLINE: {f.reason}" for p, f in log_manager.offline.items()),
        )  # fmt: skip
        layer = ManagerReplicaLayer(self.replica_manager, self.metadata_cache, self.config)
        return MeteredReplicaLayer(layer, self.request_metrics)

    # ---------------------------------------------------------------- run / stop
    async def run(self) -> None:
        self._run_task = asyncio.current_task()
        log.info(
            "Starting tablet server %d (RPC %s:%d, HTTP %s:%d, rack %r, ZooKeeper %s%s)",
            self.server_id, self.host, self.rpc_port, self.host, self.http_port, self.rack, self.zk.hosts, self.root,
        )  # fmt: skip
        try:
            self.zk.add_session_listener(self._signals.put_nowait)
            await self.zk.start()
            self._session = self.zk.session_id
            for path in persistent_parents(self.root):
                await retry_session_lost(
                    lambda p=path: self.zk.ensure_path(p), self.zk.connection_timeout, f"creating {path}"
                )
            await self.security.start(self.zk, self.root)
            if self.replica_layer is None:
                self.replica_layer = self._start_replicas()
            servicer = self.servicer = TabletServicer(
                self.fence,
                self.replica_layer,
                self.replica_verifier,
                coordinator_certificates=self.security.peer_certificates,
            )
            rm, dirs = self.replica_manager, self.log_manager  # led sizes and disk use ride on the heartbeats
            sizes, disk = (rm.led_sizes, functools.partial(disk_use, dirs, rm)) if rm and dirs else (None, None)
            servicer.liveness = LivenessBeacon(self.server_id, self.incarnation, sizes, disk_use=disk,
                                               led_changes=rm.led if rm else None)  # fmt: skip
            self._rpc_server, self.rpc_port = await start_rpc_server(
                self.bind_host,
                self.rpc_port,
                [lambda s: tablet_pb2_grpc.add_TabletServiceServicer_to_server(servicer, s)],
                tls=self.security.tls,
                interceptors=self.security.interceptors(self.metadata_cache.table_name),
            )
            self._http = HttpServer(
                self.bind_host,
                self.http_port,
                {
                    "GET /health": self._health,  # open; /metrics needs DESCRIBE_CONFIGS (security/operations.py)
                    "GET /metrics": metrics_route(self.metrics, replica_metrics_text(self._replica_stats)),
                },
                ssl_context=self.security.tls.http_context() if self.security.tls else None,
                guard=self.security.http_guard,
            )
            await self._http.start()
            await retry_session_lost(self._register, self.zk.connection_timeout, "registering")
            self._leader_watch = self.zk.watch_data(CoordinatorLeaderZNode.path(self.root), self._on_leader_node)
            if self.replica_manager is not None:  # docs/dynamic-config.md
                self._dynamic = DynamicConfigWatcher(self.zk, self.server_id, self._apply_dynamic)
                self._dynamic.start()
            self.state = transition(self.server_id, self.state, TabletServerState.RUNNING)
            log.info("Tablet server %d is running", self.server_id)
            self._in_lifecycle = True
            await self._lifecycle()
        finally:
            await self._shutdown()

    def reload_certificates(self) -> None:
        """SIGHUP: re-read the TLS files (docs/security.md)."""
        self.security.reload_certificates()

    def request_stop(self) -> None:
        log.info("Stop requested")
        if self._in_lifecycle:
            self._signals.put_nowait(None)
        elif self._run_task is not None:
            self._run_task.cancel()

    def _apply_dynamic(self, overrides: DynamicOverrides) -> None:
        """DynamicConfigWatcher callback (on the loop): cluster, then this server's, then per-table entries."""
        assert self.replica_manager is not None
        changed = self.replica_manager.apply_dynamic([overrides.cluster, overrides.server], overrides.tables)
        log.info("Dynamic configuration applied: server-level %s; tables %s", changed or "none",
                 {t: e for t, e in overrides.tables.items() if e} or "none")  # fmt: skip

    async def _retention_loop(self) -> None:
        """Every RETENTION_CHECK_INTERVAL_S: delete segments past table.log.ttl / retention-bytes (below the
        HW only) and expire idle writers, log by log on the loop (LogTablet is single-owner)."""
        assert self.log_manager is not None
        while True:
            await asyncio.sleep(RETENTION_CHECK_INTERVAL_S)
            await retention_pass(self.log_manager, int(time.time() * 1000))  # tablet/retention.py

    def _retention_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self._retention_failure = task.exception()
            log.error("The retention loop died", exc_info=self._retention_failure)

    async def _controlled_shutdown(self) -> None:
        """Hand leadership away and leave the ISRs while still serving (bounded). A server leading nothing
        asks too (shorter bound): otherwise it stayed in the ISRs until its RPC server and session were gone,
        and acks=all writes to the buckets it follows stalled ~0.5 s. Skipped when it leads nothing and no
        coordinator leader is known (the whole cluster is stopping)."""
        if self.replica_manager is None or not self.registered:
            return
        leading = self.replica_manager.leader_count()
        if leading == 0 and self._coordinator_address() is None:
            log.info("Tablet server %d leads no bucket and knows no coordinator leader: stopping", self.server_id)
            return
        self.state = transition(self.server_id, self.state, TabletServerState.SHUTTING_DOWN)
        self.replica_manager.begin_controlled_shutdown()  # what it hands over, its restart truncates
        log.info("Controlled shutdown of tablet server %d: leading %d buckets", self.server_id, leading)
        timeout = CONTROLLED_SHUTDOWN_TIMEOUT_S if leading else FOLLOWER_SHUTDOWN_TIMEOUT_S
        if await controlled_shutdown(
            self.server_id, self._coordinator_address, timeout, replica_token=self.replica_token
        ):
            # the coordinator moved leadership; its NotifyLeaderAndIsr to us may still be on the way: wait a
            # moment so requests in flight get NOT_LEADER_OR_FOLLOWER naming the new leader
            deadline = time.monotonic() + 1.0
            while self.replica_manager.leader_count() > 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            log.info("Leadership handed over (%d bucket(s) still led)", self.replica_manager.leader_count())

    async def _shutdown(self) -> None:
        self.state = transition(self.server_id, self.state, TabletServerState.STOPPING)
        self._in_lifecycle = False
        if self._leader_watch is not None:
            self._leader_watch.cancel()
        if self._dynamic is not None:
            self._dynamic.close()
        rpc_stopped = None
        if self._rpc_server is not None:
            # no new requests; in-flight ones get 0.5 s. Followers' long-poll fetches parked here are answered
            # at once by the replica manager's shutdown below instead of using up the grace (a stop took 0.5 s
            # more than needed), and no log is closed before the RPC server has stopped.
            if self.servicer is not None and self.servicer.liveness is not None:
                self.servicer.liveness.close()  # else the coordinator's stream holds the whole grace
            rpc_stopped = asyncio.ensure_future(self._rpc_server.stop(0.5))
            await asyncio.sleep(0)
        if self._retention_task is not None:
            self._retention_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retention_task
        t0 = time.monotonic()
        if self.replica_manager is not None:
            await self.replica_manager.shutdown()  # fetchers, tasks, parked requests, last checkpoint
        t1 = time.monotonic()
        if rpc_stopped is not None:
            await rpc_stopped
        if self._gateway is not None:
            await self._gateway.close()
        t2 = time.monotonic()
        if self.log_manager is not None:
            self.log_manager.shutdown()  # flush, close, checkpoints, then the clean-shutdown marker, unlock
        t3 = time.monotonic()
        log.info("Replicas, RPC server and logs stopped in %.2f s (replicas %.2f s, then RPC server %.2f s, "
                 "logs %.2f s)", t3 - t0, t1 - t0, t2 - t1, t3 - t2)  # fmt: skip
        if self._http is not None:
            await self._http.close()
        self.security.stop()
        await self.zk.close()
        self.registered = False
        log.info("Tablet server %d stopped", self.server_id)

    # ---------------------------------------------------------------- session events
    async def _lifecycle(self) -> None:
        while True:
            event = await self._signals.get()
            if event is None:
                await self._controlled_shutdown()
                return
            if event.state is SessionState.LOST:
                self.registered = False
                log.warning(
                    "ZooKeeper session expired: registration %s is gone; registering again after reconnect",
                    self.registration_path,
                )
            elif event.state is SessionState.SUSPENDED:
                log.warning("ZooKeeper connection suspended; the registration lives as long as the session")
            elif event.session_id != self._session or not self.registered:
                # also a reconnect within the session: a registration cut short by a connection loss resumes
                what = "New ZooKeeper session" if event.session_id != self._session else "Reconnected in session"
                self._session = event.session_id
                log.info("%s 0x%x: registering tablet server %d again", what, event.session_id, self.server_id)
                while not self.registered and self.zk.connected:
                    try:
                        await self._register()
                    except (ZkError, ServerIdConflictError) as e:
                        log.error("Re-registering tablet server %d failed: %s; retrying", self.server_id, e)
                        await asyncio.sleep(REREGISTER_BACKOFF)

    # ---------------------------------------------------------------- registration
    async def _register(self) -> None:
        reg = TabletServerRegistration(
            self.host, self.rpc_port, self.http_port, self.rack, incarnation=self.incarnation,
            replica_token=self.replica_token,
        )  # fmt: skip
        data = TabletServerZNode.encode(reg)
        path = self.registration_path
        deadline = time.monotonic() + 2 * self.session_timeout + 1.0
        waited = False
        while True:
            try:
                # private: the registration holds this process's replica token (docs/peer-trust.md)
                await self.zk.create(path, data, ephemeral=True, makepath=True, private=True)
                self.registered = True
                log.info("Registered tablet server %d at %s (%s)", self.server_id, reg.address, path)
                return
            except NodeExistsError:
                pass
            got = await self.zk.get(path)
            if got is None:
                continue
            stat: ZnodeStat = got[1]
            if stat.ephemeral_owner == self.zk.session_id:
                self.registered = True
                log.info("Tablet server %d is already registered by this session", self.server_id)
                return
            other = TabletServerZNode.decode(got[0])
            bound = self._rpc_server is not None
            if is_own_stale_registration(other, self.host, self.rpc_port, self.incarnation, bound):
                try:
                    await self.zk.delete(path, version=stat.version)
                except (NoNodeError, BadVersionError):
                    continue  # gone or replaced meanwhile: look again
                log.warning(
                    "Deleted the registration of tablet server %d's previous incarnation %r (session 0x%x): "
                    "this process holds its port %s, so it is dead; registering without waiting for its session",
                    self.server_id, other.incarnation, stat.ephemeral_owner, other.address,
                )  # fmt: skip
                continue
            ours = (other.host, other.port) == (self.host, self.rpc_port)
            if not ours and await address_answers(other.host, other.port):
                raise ServerIdConflictError(
                    f"tablet server id {self.server_id} is already registered by a live server at {other.address} "
                    f"(ZooKeeper session 0x{stat.ephemeral_owner:x}); give every tablet server its own tablet-server.id"
                )
            if time.monotonic() > deadline:
                raise ServerIdConflictError(
                    f"tablet server id {self.server_id} is still registered by ZooKeeper session "
                    f"0x{stat.ephemeral_owner:x} ({other.address}) after waiting {2 * self.session_timeout + 1:g}s"
                )
            if not waited:
                log.warning(
                    "Tablet server id %d is still registered by session 0x%x (%s), which does not answer; "
                    "waiting for that session to expire",
                    self.server_id, stat.ephemeral_owner, other.address,
                )  # fmt: skip
                waited = True
            await asyncio.sleep(0.2)

    # ---------------------------------------------------------------- coordinator leader watch
    def _on_leader_node(self, value: tuple[bytes, ZnodeStat] | None) -> None:
        if value is None:
            if self.coordinator_leader is not None:
                log.info("No coordinator leader registered (server %d left)", self.coordinator_leader.server_id)
            self.coordinator_leader = None
            self.metadata_cache.observe_coordinator(None)
            self.fence.observe_leader(None)  # a zombie leader's requests are refused from now on
            return
        try:
            info = CoordinatorLeaderZNode.decode(value[0])
        except (ValueError, KeyError) as e:
            log.warning("Unreadable coordinator leader node: %s", e)
            return
        if info != self.coordinator_leader:
            log.info("Coordinator leader is server %d at %s (epoch %d)", info.server_id, info.address, info.epoch)
        self.coordinator_leader = info
        self.metadata_cache.observe_coordinator(info)
        self.fence.observe_leader(info)
