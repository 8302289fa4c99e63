"""Proof of death for the election predecessor: a standby takes over without waiting for a session to expire.

Design: docs/coordinator-ha.md "Fast failover". Every standby already watches exactly one election node,
its predecessor's candidate. ``PredecessorWatch`` also holds one gRPC connection to that candidate's
coordinator process and judges it by the rule tablet servers are judged by (docs/failure-detection.md)::

    connection breaks / cannot be made ──▶ probe RPC and HTTP port of the predecessor's registration
        both REFUSED                     ──▶ proof: report it (the lifecycle deletes the dead nodes)
        anything else (connected, timeout, unreachable) ──▶ no proof: back off, connect again

A stopped (SIGSTOP) or partitioned process keeps its sockets or cannot be reached: no proof, and it is left
to ZooKeeper session expiry exactly as before. The proof acts only on what the dead session still holds:
``takeover_ops`` deletes the predecessor's candidate (by its unique sequence name) and, when the same
session owns it, the leader node, in one transaction, so it fails as a whole when session expiry or a
graceful stop got there first.

``ConnectionFollower`` and ``Prober`` are the narrow network edges (gRPC channel, TCP connect); unit tests
pass fakes. ``decide``, ``registration_for`` and ``takeover_ops`` are pure.

Who may call: the coordinator's lifecycle task (``follow``/``stop``/``close`` and ``take_over``); the watch
task is owned by this object and reports through ``on_proof`` (which only enqueues a lifecycle signal).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import grpc
import grpc.aio

from fluss_py.coordinator.liveness import Prober, ProbeResult, probe_port
from fluss_py.rpc.channels import ChannelPool
from fluss_py.zk.client import ZkClient
from fluss_py.zk.codecs import CoordinatorRegistration
from fluss_py.zk.paths import CandidateZNode, CoordinatorLeaderZNode, CoordinatorServerZNode
from fluss_py.zk.values import DeleteOp, Op, ZkError, ZnodeStat

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 1.0
RETRY_INITIAL = 0.1
RETRY_MAX = 1.0


@dataclass(frozen=True, slots=True)
class Predecessor:
    """The candidate node we follow, the session that owns it and the coordinator that session registered."""

    candidate: str  # e.g. candidate_0000000003
    owner: int  # ephemeral owner (session id) of the candidate node
    registration: CoordinatorRegistration


@dataclass(frozen=True, slots=True)
class Proof:
    predecessor: Predecessor
    why: str  # how the connection ended (for the log)


def decide(rpc: ProbeResult, http: ProbeResult | None) -> bool:
    """True when the probes made after the connection broke prove the predecessor's process dead: every
    address it registered refuses connections (``http`` is None when it registered no HTTP port)."""
    return rpc is ProbeResult.REFUSED and (http is None or http is ProbeResult.REFUSED)


def registration_for(
    owner: int, servers: Iterable[tuple[CoordinatorRegistration, ZnodeStat]]
) -> CoordinatorRegistration | None:
    """The ``coordinator/servers`` registration made by session ``owner`` (pure). A coordinator creates it
    after binding its ports and before its candidate, so every live candidate has one in its session."""
    for reg, stat in servers:
        if stat.ephemeral_owner == owner:
            return reg
    return None


def takeover_ops(root: str, pred: Predecessor, leader: tuple[bytes, ZnodeStat] | None) -> list[Op]:
    """The transaction that removes what a proven-dead predecessor still holds (pure): its candidate node
    and, if its session owns it, the leader node (version-conditional). The candidate's sequence name is
    never reused, so deleting it fails (and rolls back the whole transaction) once the session expired."""
    ops: list[Op] = [DeleteOp(f"{CandidateZNode.parent(root)}/{pred.candidate}", 0)]
    if leader is not None and leader[1].ephemeral_owner == pred.owner:
        ops.append(DeleteOp(CoordinatorLeaderZNode.path(root), leader[1].version))
    return ops


@dataclass(frozen=True, slots=True)
class Ended:
    """How one followed connection ended: ``connected`` when it had been up (the back-off restarts)."""

    connected: bool
    why: str


class ConnectionFollower(Protocol):
    """Holds one connection to ``address`` until it breaks or cannot be made, and says how it ended."""

    async def follow(self, address: str) -> Ended: ...


class GrpcConnectionFollower:
    """ConnectionFollower over a gRPC channel of its own (a fresh connection for every ``follow``). No RPC
    is made: the channel's READY state is the TCP + HTTP/2 connection; the kernel closing a dead process's
    socket turns it to IDLE at once, while a stopped process keeps it READY."""

    def __init__(self) -> None:
        self._pool = ChannelPool()

    async def follow(self, address: str) -> Ended:
        channel = self._pool.get(address)
        try:
            deadline = asyncio.get_running_loop().time() + CONNECT_TIMEOUT
            state = channel.get_state(try_to_connect=True)
            while state is not grpc.ChannelConnectivity.READY:
                remaining = deadline - asyncio.get_running_loop().time()
                if state is grpc.ChannelConnectivity.TRANSIENT_FAILURE or remaining <= 0:
                    # a failed connect ends the attempt at once: the probe tells why (a dying process's
                    # listening socket may have accepted the connection a moment ago)
                    return Ended(False, f"not connected ({state.name})")
                try:
                    await asyncio.wait_for(channel.wait_for_state_change(state), remaining)
                except TimeoutError:
                    pass
                state = channel.get_state(try_to_connect=True)
            while state is grpc.ChannelConnectivity.READY:
                await channel.wait_for_state_change(state)
                state = channel.get_state()
            return Ended(True, f"connection went {state.name}")
        finally:
            await self._pool.drop(address)

    async def close(self) -> None:
        await self._pool.close()


async def resolve(zk: ZkClient, root: str, candidate: str) -> Predecessor | None:
    """Read who owns ``candidate`` and which coordinator that session registered (None: gone, or no
    registration found — then there is nothing to probe and session expiry decides)."""
    stat = await zk.exists(f"{CandidateZNode.parent(root)}/{candidate}")
    if stat is None:
        return None
    servers: list[tuple[CoordinatorRegistration, ZnodeStat]] = []
    parent = CoordinatorServerZNode.parent(root)
    for child in await zk.get_children(parent):
        got = await zk.get(f"{parent}/{child}")
        if got is not None:
            try:
                servers.append((CoordinatorServerZNode.decode(got[0]), got[1]))
            except (ValueError, KeyError) as e:
                log.warning("Ignoring unreadable coordinator registration %s: %s", child, e)
    reg = registration_for(stat.ephemeral_owner, servers)
    return Predecessor(candidate, stat.ephemeral_owner, reg) if reg is not None else None


async def take_over(zk: ZkClient, root: str, pred: Predecessor) -> bool:
    """Delete what the proven-dead predecessor holds (``takeover_ops``). False when its nodes changed or
    vanished meanwhile (session expiry or a graceful stop was faster): nothing was written then."""
    leader = await zk.get(CoordinatorLeaderZNode.path(root))
    ops = takeover_ops(root, pred, leader)
    try:
        await zk.commit(ops)
    except ZkError as e:
        log.info("Predecessor %s already gone or changed (%s); nothing to take over", pred.candidate, e)
        return False
    log.warning(
        "Deleted the election node%s of coordinator %d (proven dead) without waiting for its session",
        " and the leader node" if len(ops) > 1 else "", pred.registration.server_id,
    )  # fmt: skip
    return True


class PredecessorWatch:
    """Owns at most one watch task: the connection to the current election predecessor and its probes.

    ``follow(candidate)`` is level-triggered (the lifecycle calls it after every election check that left us
    a standby); a different candidate replaces the task. A proof is reported once through ``on_proof``;
    the task then ends (the lifecycle's next election check decides what to follow next).
    """

    def __init__(
        self,
        zk: ZkClient,
        root: str,
        on_proof: Callable[[Proof], None],
        follower: ConnectionFollower | None = None,
        prober: Prober = probe_port,
        retry_initial: float = RETRY_INITIAL,
        retry_max: float = RETRY_MAX,
    ) -> None:
        self._zk = zk
        self._root = root
        self._on_proof = on_proof
        self._follower = follower or GrpcConnectionFollower()
        self._probe = prober
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._task: asyncio.Task | None = None
        self.candidate: str | None = None
        self.proofs = 0

    def follow(self, candidate: str) -> None:
        if self.candidate == candidate and self._task is not None and not self._task.done():
            return
        self.stop()
        self.candidate = candidate
        self._task = asyncio.get_running_loop().create_task(self._watch(candidate), name=f"predecessor-{candidate}")
        self._task.add_done_callback(_surface_failure)

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self._task, self.candidate = None, None

    async def close(self) -> None:
        task = self._task
        self.stop()
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)
        close = getattr(self._follower, "close", None)
        if close is not None:
            await close()

    async def _watch(self, candidate: str) -> None:
        delay = self._retry_initial
        pred: Predecessor | None = None
        while pred is None:
            try:
                pred = await resolve(self._zk, self._root, candidate)
            except ZkError as e:
                log.info("Could not read predecessor %s (%s); retrying", candidate, e)
            if pred is None:
                await asyncio.sleep(delay)
                delay = min(self._retry_max, delay * 2)
        reg = pred.registration
        log.info("Following predecessor %s: coordinator %d at %s", candidate, reg.server_id, f"{reg.host}:{reg.port}")
        delay, attempts = self._retry_initial, 0
        while True:
            ended = await self._follower.follow(f"{reg.host}:{reg.port}")
            why = ended.why
            if ended.connected:
                delay, attempts = self._retry_initial, 0
            rpc = await self._probe(reg.host, reg.port)
            http = await self._probe(reg.host, reg.http_port) if reg.http_port else None
            if decide(rpc, http):
                log.warning(
                    "Coordinator %d at %s:%d is dead: its connection broke (%s) and its ports refuse "
                    "connections; taking over its election node without waiting for its ZooKeeper session",
                    reg.server_id, reg.host, reg.port, why,
                )  # fmt: skip
                self.proofs += 1
                self._on_proof(Proof(pred, why))
                return
            attempts += 1
            level = logging.INFO if attempts in (1, 10) or attempts % 100 == 0 else logging.DEBUG
            log.log(level, "Connection to coordinator %d failed (%s), probe rpc=%s http=%s (no proof of death); "
                    "again in %.1fs", reg.server_id, why, rpc.value, http.value if http else "-", delay)  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(self._retry_max, delay * 2)


def _surface_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("Predecessor watch %s failed", task.get_name(), exc_info=task.exception())
