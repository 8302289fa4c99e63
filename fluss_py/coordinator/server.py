"""``fluss-py coordinator``: one coordinator process — Standby services always, leader services when elected.

Lifecycle (states and legal moves in ``context.py``; design in ``docs/coordinator-ha.md``)::

    start: ZK session -> register coordinator/servers/server_<seq> -> RPC + HTTP -> Standby -> elect
    elect: Electing: candidate node, list candidates; not smallest -> Standby (watch predecessor only);
           smallest -> fence (bump epoch, version-conditional) -> leader services (in order) -> Leader
           fence/initialisation failed -> tear down (reverse), delete own leader/candidate nodes -> Standby
           -> elect again after a back-off
    standby: follow the predecessor's process (predecessor.py); proof of its death -> delete its candidate
           (and leader node, same session) in one transaction -> the predecessor watch fires -> elect
    leader: our own candidate deleted (a standby proved us dead, wrongly) -> step down like "fenced"
    session SUSPENDED longer than the session timeout, session LOST, or fenced by a newer epoch:
           tear down leader services (reverse), no ZooKeeper write -> Standby; after reconnecting:
           re-register (new session) and elect again
    SIGTERM: Down, tear down, close the session (our ephemeral nodes vanish at once), exit 0

One lifecycle task applies every step (the single writer of the coordinator state); ZooKeeper session
events, the predecessor watch and the event loop's fencing only enqueue ``Signal``s for it.

Who may call: the CLI (``run`` on the process's loop, ``request_stop`` from a signal handler).
"""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry

from fluss_py import config as cfg
from fluss_py import metric_catalogue_coordinator as mc
from fluss_py.common.http import HttpServer, Request, Response, json_response, metrics_route
from fluss_py.console.routes import MAX_GROUPS, ConsoleFeed
from fluss_py.console.snapshot import ConsoleSource, coordinators_view
from fluss_py.coordinator.context import CoordinatorState, StateMachine
from fluss_py.coordinator.distribution import TabletDistributionCollector
from fluss_py.coordinator.dynamic_config import config_routes
from fluss_py.coordinator.event_loop import CoordinatorEventLoop
from fluss_py.coordinator.group_coordinator import GroupLimits
from fluss_py.coordinator.leader import LeaderServices
from fluss_py.coordinator.lifecycle import CoordinatorLifecycle, Signal
from fluss_py.coordinator.predecessor import PredecessorWatch
from fluss_py.coordinator.rebalance.metrics import RebalanceCollector
from fluss_py.coordinator.rebalance.routes import leader_call, rebalance_routes
from fluss_py.coordinator.service import CoordinatorServicer
from fluss_py.coordinator.tables import ClusterView
from fluss_py.coordinator.tag_metrics import ServerTagCollector
from fluss_py.rpc.channels import set_server_identity, set_server_keepalive
from fluss_py.rpc.keepalive import Keepalive
from fluss_py.rpc.pb import coordinator_pb2_grpc
from fluss_py.rpc.peer import replica_verifier
from fluss_py.rpc.server import start_rpc_server
from fluss_py.security.server_security import ServerSecurity
from fluss_py.types import CoordinatorLeaderInfo
from fluss_py.zk.client import retry_session_lost
from fluss_py.zk.codecs import sequence_of
from fluss_py.zk.credentials import server_zk_client
from fluss_py.zk.election import LeaderElection
from fluss_py.zk.metrics import ZkSessionCollector
from fluss_py.zk.paths import (
    CandidateZNode,
    CoordinatorLeaderZNode,
    CoordinatorServerZNode,
    TabletServerZNode,
    persistent_parents,
)
from fluss_py.zk.values import ZkError

# not __name__: the runbook shows its lines by this name, docs/operations.md (the coordinator start-up lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorServer")
# not __name__: the runbook shows its lines by this name, docs/operations.md (the coordinator start-up lines)
standby_log = logging.getLogger("fluss_py.coordinator.initCoordinatorStandby")

DEFAULT_RPC_PORT = 9123
DEFAULT_HTTP_PORT = 9124


def stable_coordinator_id(host: str, port: int) -> int:
    """A coordinator id that survives restarts on the same address (used when coordinator.id is unset)."""
    return zlib.crc32(f"{host}:{port}".encode()) % 1_000_000


class CoordinatorServer(CoordinatorLifecycle):
    """Owns the ZooKeeper session, the RPC/HTTP servers, the election and (when leader) LeaderServices."""

    def __init__(self, config: cfg.Config) -> None:
        self.config = config
        self.bind_host = config[cfg.BIND_HOST]
        self.host = config[cfg.ADVERTISED_HOST]
        self.rpc_port = config[cfg.RPC_PORT] or DEFAULT_RPC_PORT
        self.http_port = config[cfg.HTTP_PORT] or DEFAULT_HTTP_PORT
        configured_id = config[cfg.COORDINATOR_ID]
        self.server_id = configured_id if configured_id >= 0 else stable_coordinator_id(self.host, self.rpc_port)
        self.session_timeout = float(config[cfg.ZK_SESSION_TIMEOUT])
        self.zk = server_zk_client(config)
        self.root = self.zk.root
        self.state = StateMachine(on_change=self._on_state_change)
        self.election = LeaderElection(self.zk, self.root, self.server_id, lambda: self._signal(Signal("elect")))
        self._signals: asyncio.Queue[Signal] = asyncio.Queue()
        self._fast_failover = bool(config[cfg.PROOF_OF_DEATH])
        self.predecessor = PredecessorWatch(
            self.zk, self.root, lambda proof: self._signal(Signal("predecessor-dead", proof=proof))
        )
        self._leader: LeaderServices | None = None
        self._leader_session = 0
        self._session = 0
        self._suspend_token = 0
        self._suspended = False
        self._stale_nodes = False  # stepped down while suspended: our old nodes may still exist
        self._known_leader: CoordinatorLeaderInfo | None = None
        self._last_tick = time.monotonic()
        self._tasks: set[asyncio.Task] = set()
        self._rpc_server: Any = None
        self._http: HttpServer | None = None
        self._run_task: asyncio.Task | None = None
        self._in_lifecycle = False
        self.metrics = CollectorRegistry()
        self._state_metric = mc.COORDINATOR_STATE.enum(self.metrics, ["Starting"] + [s.value for s in CoordinatorState])
        self._state_metric.state("Starting")
        for spec, read in (
            (mc.COORDINATOR_EPOCH, lambda: self.coordinator_epoch),
            (mc.COORDINATOR_IS_LEADER, lambda: 1 if self.state.current is CoordinatorState.LEADER else 0),
            (
                mc.COORDINATOR_LIVE_TABLET_SERVERS,
                lambda: len(self._leader.context.tablet_servers) if self._leader else 0,
            ),
            (mc.COORDINATOR_LIVENESS_STREAMS, lambda: self._liveness_stat("fresh")),
            (mc.COORDINATOR_PROOFS_OF_DEATH, lambda: self._liveness_stat("proofs")),
            (mc.COORDINATOR_OFFLINE_BUCKETS, self._offline_buckets),
            (mc.COORDINATOR_PARTITIONS, lambda: self._partition_stat("count")),
            (mc.COORDINATOR_PARTITIONS_CREATED, lambda: self._partition_stat("created")),
            (mc.COORDINATOR_PARTITIONS_DROPPED, lambda: self._partition_stat("dropped")),
            (mc.COORDINATOR_PARTITION_CREATION_LAG, lambda: self._partition_stat("lag")),
            (mc.COORDINATOR_PARTITION_LAST_CREATION_LATE, lambda: self._partition_stat("late")),
        ):
            spec.gauge(self.metrics).set_function(read)
        self.metrics.register(TabletDistributionCollector(self._distribution_source))
        self.metrics.register(RebalanceCollector(lambda: self._leader.rebalance if self._leader else None))
        self.metrics.register(ServerTagCollector(lambda: self._leader.server_tags if self._leader else None))
        self.metrics.register(ZkSessionCollector(self.zk))
        self.security = ServerSecurity(config, self.metrics)  # docs/security.md
        set_server_identity(self.security.identity)
        set_server_keepalive(Keepalive.from_config(config))  # rpc.keepalive.*: its server and its channels
        self.servicer: CoordinatorServicer | None = None
        self.metrics.register(_RefusalCollector(lambda: self.servicer))
        scheme = "https" if self.security.tls else "http"
        self._console_coordinators: list[dict[str, Any]] = []  # the coordinators panel, read by _read_coordinators
        self._console_committed: tuple[dict[str, dict[Any, int]], float | None] = ({}, None)  # offsets, read at
        self.console = ConsoleFeed(
            self._console_source,
            self.current_leader,
            scheme=scheme,
            refresh=self._console_refresh,
            view=self._serving_view,
            access=self.security.http if self.security.enabled else None,  # docs/console.md "Security"
        )  # docs/console.md

    async def _registered_token(self, server_id: int) -> str | None:
        """The replica token in tablet server ``server_id``'s registration (None: not registered)."""
        got = await self.zk.get(TabletServerZNode.path(self.root, server_id))
        return TabletServerZNode.decode(got[0]).replica_token if got is not None else None

    # ---------------------------------------------------------------- views for the service and /health
    def _distribution_source(self) -> tuple[Any, Any] | None:
        leader = self._leader
        if leader is None or leader.tables is None or self.state.current is not CoordinatorState.LEADER:
            return None
        return leader.tables.view, leader.tables.live()

    def _serving_view(self) -> ClusterView | None:
        """The leader's view while this coordinator serves as leader (the console's timeline follows it)."""
        leader = self._leader
        if leader is None or leader.tables is None or self.state.current is not CoordinatorState.LEADER:
            return None
        return leader.tables.view

    def _table_name(self, table_id: int) -> str | None:
        """A table id's name in the serving leader's view, for the security interceptor. None off the leader:
        a standby's handlers answer NOT_COORDINATOR_LEADER without reading or changing anything, and they
        decide it in the same step as this lookup (no await between the interceptor's check and theirs)."""
        view = self._serving_view()
        return None if view is None else view.table_name(table_id)

    def _offline_buckets(self) -> int:
        source = self._distribution_source()
        if source is None:
            return 0
        view, live = source
        return sum(1 for b in view.buckets.values() if b.leader_and_isr is None or b.leader_and_isr.leader not in live)

    def _console_source(self) -> ConsoleSource:
        coordinator = {"id": self.server_id, "state": self.state.name, "epoch": self.coordinator_epoch,
                       "zk_connected": self.zk.connected}  # fmt: skip
        source, leader = self._distribution_source(), self._leader
        if source is None or leader is None:
            return ConsoleSource(coordinator, coordinators=self._console_coordinators)
        view, live = source
        progress = leader.rebalance.progress if leader.rebalance is not None else None
        servers = dict(leader.context.tablet_servers)
        sizes = leader.bucket_sizes
        members = leader.tables.groups.members.loaded if leader.tables is not None else {}
        return ConsoleSource(coordinator, view, live, servers, sizes(), sizes.offsets(), progress and progress.view(),
                             self._console_coordinators, leader.disk_use, members,
                             *self._console_committed)  # fmt: skip

    async def _console_refresh(self) -> None:
        """The console's ZooKeeper reads: the coordinators, and the groups' committed offsets while a console
        watches and this coordinator leads (at most every ``REFRESH_EVERY`` samples, the first ``MAX_GROUPS``)."""
        await self._read_coordinators()
        tables = self._leader.tables if self._leader is not None else None
        if tables is None or self._distribution_source() is None:
            self._console_committed = {}, None  # not the serving leader: no offsets of another term are shown
        elif self.console.watched:
            self._console_committed = await tables.groups.read_committed(MAX_GROUPS), time.time()

    async def _read_coordinators(self) -> None:
        """Every coordinator from ZooKeeper (registrations, election candidates, leader node) for the
        console's coordinators panel; a few small reads every ``REFRESH_EVERY`` samples."""
        if not self.zk.connected:
            return
        registered = []
        parent = CoordinatorServerZNode.parent(self.root)
        for name in await self.zk.get_children(parent):
            got = await self.zk.get(f"{parent}/{name}")
            if got is not None:
                registered.append(CoordinatorServerZNode.decode(got[0]))
        candidates = []
        parent = CandidateZNode.parent(self.root)
        for name in sorted(await self.zk.get_children(parent), key=sequence_of):
            got = await self.zk.get(f"{parent}/{name}")
            if got is not None:
                candidates.append(CandidateZNode.decode(got[0]))
        got = await self.zk.get(CoordinatorLeaderZNode.path(self.root))
        leader = CoordinatorLeaderZNode.decode(got[0]) if got is not None else None
        self._console_coordinators = coordinators_view(registered, candidates, leader)

    @property
    def coordinator_epoch(self) -> int:
        if self._leader is not None:
            return self._leader.context.epoch
        return self._known_leader.epoch if self._known_leader else 0

    def serving_event_loop(self) -> CoordinatorEventLoop | None:
        """The event loop when this coordinator is the fully started leader, else None."""
        if self.state.current is CoordinatorState.LEADER and self._leader is not None:
            return self._leader.event_loop
        return None

    async def current_leader(self) -> CoordinatorLeaderInfo | None:
        """The leader as registered in ZooKeeper (a cached value when ZooKeeper does not answer quickly)."""
        if self._leader is not None and self.state.current is CoordinatorState.LEADER:
            ctx = self._leader.context
            return CoordinatorLeaderInfo(ctx.coordinator_id, ctx.epoch, ctx.host, ctx.port, self.http_port)
        if self.zk.connected:
            try:
                got = await asyncio.wait_for(self.zk.get(CoordinatorLeaderZNode.path(self.root)), 0.5)
                self._known_leader = CoordinatorLeaderZNode.decode(got[0]) if got else None
            except (ZkError, TimeoutError, ValueError, KeyError) as e:
                log.debug("reading the leader node failed: %s", e)
        return self._known_leader

    async def _health(self, _request: Request | None = None) -> Response:  # no per-table data: open
        leader = await self.current_leader()
        return json_response(
            {
                "role": "coordinator",
                "server_id": self.server_id,
                "state": self.state.name,
                "coordinator_epoch": self.coordinator_epoch,
                "leader_id": leader.server_id if leader else -1,
                "zk_connected": self.zk.connected,
            }
        )

    def _liveness_stat(self, what: str) -> int:
        monitor = self._leader.liveness if self._leader is not None else None
        if monitor is None:
            return 0
        return monitor.proofs if what == "proofs" else monitor.fresh(2.0)

    def _partition_stat(self, what: str) -> float:
        manager = self._leader.auto_partition if self._leader is not None else None
        if manager is None or self.state.current is not CoordinatorState.LEADER:
            return 0
        if what == "count":
            return sum(len(parts) for parts in manager.partitions().values())
        if what == "lag":
            return manager.lag()
        if what == "late":
            return manager.last_creation_late
        return manager.created if what == "created" else manager.dropped

    def _on_state_change(self, state: CoordinatorState) -> None:
        self._state_metric.state(state.value)

    # ---------------------------------------------------------------- run / stop
    async def run(self) -> None:
        """Start, run until ``request_stop``, shut down. Raises ZkUnavailableError / RpcBindError on start."""
        self._run_task = asyncio.current_task()
        standby_log.info(
            "Starting coordinator server in standby mode (server id %d, RPC %s:%d, HTTP %s:%d, ZooKeeper %s%s)",
            self.server_id, self.host, self.rpc_port, self.host, self.http_port, self.zk.hosts, self.root,
        )  # fmt: skip
        try:
            self.zk.add_session_listener(self._on_session)
            await self.zk.start()
            self._session = self.zk.session_id
            for path in persistent_parents(self.root):  # idempotent: repeated after a connection loss
                await retry_session_lost(
                    lambda p=path: self.zk.ensure_path(p), self.zk.connection_timeout, f"creating {path}"
                )
            await self.security.start(self.zk, self.root)
            # tablet servers' AdjustIsr/ControlledShutdown/ReportReplicaFaults must present the token of their
            # registration and, with mutual TLS, a certificate naming the server (docs/peer-trust.md)
            servicer = self.servicer = CoordinatorServicer(
                self,
                replica_verifier(None, self._registered_token, certificates=self.security.peer_certificates),
                GroupLimits.from_config(self.config),
            )
            self._rpc_server, self.rpc_port = await start_rpc_server(
                self.bind_host,
                self.rpc_port,
                [lambda s: coordinator_pb2_grpc.add_CoordinatorServiceServicer_to_server(servicer, s)],
                tls=self.security.tls,
                interceptors=self.security.interceptors(self._table_name),  # ConsumerHeartbeat names table ids
            )
            # /metrics needs DESCRIBE_CONFIGS on a secure cluster; /health is open (security/operations.py)
            routes: dict[str, Any] = {"GET /health": self._health, "GET /metrics": metrics_route(self.metrics)}
            routes.update(rebalance_routes(self.serving_event_loop, self.current_leader))  # docs/rebalance.md
            routes.update(config_routes(leader_call(self.serving_event_loop, self.current_leader)))  # dynamic-config.md
            self._http = HttpServer(
                self.bind_host,
                self.http_port,
                routes,
                ssl_context=self.security.tls.http_context() if self.security.tls else None,
                guard=self.security.http_guard,
                setup=self.console.setup,
            )
            await self._http.start()
            self._spawn(self.console.run(), "console-feed")
            await self._register_server_node()
            self.state.transition(CoordinatorState.STANDBY, "standby services started")
            self._spawn(self._tick(), "coordinator-tick")
            self._signal(Signal("elect"))
            self._in_lifecycle = True
            await self._lifecycle()
        finally:
            await self._shutdown()

    def request_stop(self) -> None:
        """Graceful stop (signal handler): Down, tear down, close the ZooKeeper session."""
        log.info("Stop requested")
        if self._in_lifecycle:
            self._signal(Signal("stop"))
        elif self._run_task is not None:
            self._run_task.cancel()

    async def _shutdown(self) -> None:
        self._in_lifecycle = False
        if self.state.current is not CoordinatorState.DOWN:
            self.state.transition(CoordinatorState.DOWN, "shutting down")
        await self.predecessor.close()
        if self._leader is not None:
            leader, self._leader = self._leader, None
            log.info("Stopping coordinator leader services")
            await leader.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._rpc_server is not None:
            await self._rpc_server.stop(0.5)
        if self._http is not None:
            await self._http.close()
        self.security.stop()
        await self.zk.close()
        log.info("Coordinator server %d stopped", self.server_id)

    def reload_certificates(self) -> None:
        """SIGHUP: re-read the TLS files (docs/security.md)."""
        self.security.reload_certificates()


class _RefusalCollector:
    """``fluss_coordinator_peer_refusals_total{kind}``: tablet-server requests whose caller did not prove it
    is the server it names (docs/peer-trust.md), from the service's refusal log at scrape time."""

    def __init__(self, servicer: Callable[[], CoordinatorServicer | None]) -> None:
        self._servicer = servicer

    def collect(self) -> Any:
        family = mc.COORDINATOR_PEER_REFUSALS.family()
        servicer = self._servicer()
        counts = servicer.refusals.counts if servicer is not None else {}
        family.add_metric(["replica_not_authenticated"], counts.get("replica_not_authenticated", 0))
        yield family
