"""The coordinator's lifecycle task: ZooKeeper session signals, the election, becoming leader and losing it.

Part of ``CoordinatorServer`` (a mixin: the same object). One task (``_lifecycle``) takes the signals
(session events, timers, fencing, a dead predecessor, stop) in order and moves ``StateMachine`` through
Standby, Electing and Leader (docs/coordinator-ha.md); nothing else transitions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from fluss_py import config as cfg
from fluss_py.coordinator.context import CoordinatorContext, CoordinatorState
from fluss_py.coordinator.leader import LeaderServices
from fluss_py.coordinator.leader_balance import LeaderBalanceOptions
from fluss_py.coordinator.predecessor import Proof, take_over
from fluss_py.coordinator.processor import options_from_config
from fluss_py.coordinator.rebalance.routes import executor_options
from fluss_py.errors import NotCoordinatorLeaderError
from fluss_py.zk.codecs import CoordinatorRegistration
from fluss_py.zk.election import fence_become_leader
from fluss_py.zk.epoch_node import InvalidEpochNodeError
from fluss_py.zk.own_nodes import ensure_own_sequential
from fluss_py.zk.paths import CoordinatorEpochZNode, CoordinatorLeaderZNode, CoordinatorServerZNode
from fluss_py.zk.values import SessionEvent, SessionState, WatchEvent, ZkError

# not __name__: the runbook shows its lines by this name, docs/operations.md (the coordinator start-up lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorServer")
# not __name__: the runbook shows its lines by this name, docs/operations.md (the coordinator start-up lines)
standby_log = logging.getLogger("fluss_py.coordinator.initCoordinatorStandby")

RETRY_BACKOFF = 1.0


@dataclass(frozen=True, slots=True)
class Signal:
    """One input of the lifecycle task (``kind`` below), queued by callbacks, timers and watches."""

    kind: str  # elect | suspended | suspend-timeout | lost | connected | fenced | predecessor-dead | stop
    session_id: int = 0
    token: int = 0
    proof: Proof | None = None


class CoordinatorLifecycle:
    """The lifecycle task of ``CoordinatorServer`` (see the module docstring)."""

    _server_node_session = 0  # the session our coordinator/servers node was registered in (0: none yet)
    _epoch_refusal = ""  # the last invalid-epoch-node refusal logged (logged once until it changes)

    # ---------------------------------------------------------------- signals
    def _signal(self, signal: Signal) -> None:
        self._signals.put_nowait(signal)

    def _later(self, delay: float, signal: Signal) -> None:
        async def fire() -> None:
            await asyncio.sleep(delay)
            self._signal(signal)

        self._spawn(fire(), f"later {signal.kind}")

    def _spawn(self, coro: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _on_session(self, event: SessionEvent) -> None:
        if event.state is SessionState.CONNECTED:
            self._signal(Signal("connected", session_id=event.session_id))
        elif event.state is SessionState.SUSPENDED:
            self._signal(Signal("suspended"))
        else:
            self._signal(Signal("lost"))

    async def _tick(self) -> None:
        while True:
            self._last_tick = time.monotonic()
            await asyncio.sleep(0.1)

    # ---------------------------------------------------------------- the lifecycle task
    async def _lifecycle(self) -> None:
        while True:
            signal = await self._signals.get()
            if signal.kind == "stop":
                return
            try:
                await self._handle(signal)
            except Exception:
                log.exception("Coordinator lifecycle step %r failed; retrying the election", signal.kind)
                if self._leader is not None:
                    await self._lose_leadership("lifecycle failure")
                if self.state.current is CoordinatorState.ELECTING:
                    self.state.transition(CoordinatorState.STANDBY, "lifecycle failure")
                self._later(RETRY_BACKOFF, Signal("elect"))

    async def _handle(self, signal: Signal) -> None:
        kind = signal.kind
        if kind == "elect":
            if self.state.current is CoordinatorState.STANDBY and self.zk.connected:
                if await self._ensure_server_node():
                    await self._elect()
                else:  # a standby is found by its registration (fast failover): none, no candidate
                    self._later(RETRY_BACKOFF, Signal("elect"))
        elif kind == "suspended":
            self._suspend_token += 1
            self._suspended = True
            log.warning("ZooKeeper connection suspended; the session may still be alive")
            if self._leader is not None:
                self._later(self.session_timeout, Signal("suspend-timeout", token=self._suspend_token))
        elif kind == "suspend-timeout":
            if signal.token == self._suspend_token and not self.zk.connected and self._leader is not None:
                await self._lose_leadership("ZooKeeper connection suspended for longer than the session timeout")
                self._stale_nodes = True
        elif kind == "lost":
            self.predecessor.stop()
            self._suspend_token += 1
            log.warning("ZooKeeper session expired: this coordinator's ephemeral nodes are gone")
            if self._leader is not None:
                await self._lose_leadership("ZooKeeper session expired")
            self.election.forget()
            self._stale_nodes = False
        elif kind == "connected":
            await self._on_connected(signal.session_id)
        elif kind == "fenced" and self._leader is not None:
            await self._lose_leadership("fenced by a newer coordinator epoch")
            await self._release()
            self._later(RETRY_BACKOFF, Signal("elect"))
        elif kind == "predecessor-dead":
            await self._take_over(signal.proof)

    async def _take_over(self, proof: Proof | None) -> None:
        """A standby proved its predecessor dead: delete what its session still holds, then look again."""
        if proof is None or self.state.current is not CoordinatorState.STANDBY or not self.zk.connected:
            return
        if self.election.watching != proof.predecessor.candidate:
            return  # the election moved on meanwhile; the proof is about a node we no longer follow
        await take_over(self.zk, self.root, proof.predecessor)
        self._signal(Signal("elect"))

    async def _on_connected(self, session_id: int) -> None:
        self._suspend_token += 1
        if session_id == self._session:
            if self._stale_nodes:  # we stepped down while suspended; the session survived after all
                self._stale_nodes = False
                await self._release()
            await self._ensure_server_node()  # its create may have failed with this very connection
            if self._suspended:  # kazoo dropped our predecessor watch on disconnect: re-arm it
                self._signal(Signal("elect"))
                candidate = self.election.candidate_path
                if self._leader is not None and candidate is not None:
                    await self._watch_own_candidate(candidate)
            self._suspended = False
            return
        self._suspended = False
        self.predecessor.stop()
        log.info("New ZooKeeper session 0x%x: rejoining as standby", session_id)
        self._session = session_id
        self._stale_nodes = False
        if self._leader is not None:
            await self._lose_leadership("ZooKeeper session replaced")
        self.election.forget()
        await self._ensure_server_node()  # on failure: again on the next CONNECTED or elect
        self._signal(Signal("elect"))

    async def _ensure_server_node(self) -> bool:
        """Register ``coordinator/servers/server_<seq>`` unless done in the current session; False on failure."""
        if self._server_node_session == self.zk.session_id and self._server_node_session:
            return True
        try:
            await self._register_server_node()
        except ZkError as e:
            log.warning("Registering the coordinator server node failed (%s); retrying on reconnect", e)
            return False
        return True

    async def _register_server_node(self) -> None:
        """Our one ``server_<seq>`` node of this session: adopted if a lost create reply left it, else created."""
        reg = CoordinatorRegistration(self.server_id, self.host, self.rpc_port, self.http_port)
        session = self.zk.session_id
        name, _adopted = await ensure_own_sequential(
            self.zk,
            CoordinatorServerZNode.parent(self.root),
            CoordinatorServerZNode.PREFIX,
            CoordinatorServerZNode.encode(reg),
            "coordinator server node",
        )
        self._server_node_session = session
        standby_log.info("Registered coordinator server node: %s", name)

    async def _elect(self) -> None:
        self.state.transition(CoordinatorState.ELECTING, "checking the election")
        try:
            decision = await self.election.check()
        except ZkError as e:
            log.warning("Election check failed (%s); waiting to retry", e)
            self.state.transition(CoordinatorState.STANDBY, "election check failed")
            self._later(RETRY_BACKOFF, Signal("elect"))
            return
        if decision.missing:
            self.state.transition(CoordinatorState.STANDBY, "candidate node missing")
            self._signal(Signal("elect"))
        elif not decision.leader:
            self.state.transition(CoordinatorState.STANDBY, f"watching predecessor {decision.predecessor}")
            if self._fast_failover and decision.predecessor is not None:
                self.predecessor.follow(decision.predecessor)
        else:
            self.predecessor.stop()
            await self._become_leader()

    async def _become_leader(self) -> None:
        candidate = self.election.candidate_path
        assert candidate is not None
        try:
            fence = await fence_become_leader(self.zk, self.root, candidate)
        except InvalidEpochNodeError as e:  # an operator must repair it: wait for its next change, no spin
            if str(e) != self._epoch_refusal:
                log.error("Refusing to become coordinator leader: %s", e)
            self._epoch_refusal = str(e)
            self.state.transition(CoordinatorState.STANDBY, "coordinator epoch node invalid")
            await self.zk.exists(CoordinatorEpochZNode.path(self.root), watch=self._on_epoch_node_change)
            return
        except ZkError as e:
            log.warning("Could not fence the coordinator epoch (%s); releasing leadership", e)
            await self._release()
            self.state.transition(CoordinatorState.STANDBY, "fence failed")
            self._later(RETRY_BACKOFF, Signal("elect"))
            return
        self._epoch_refusal = ""
        log.info("Became coordinator leader with epoch %d", fence.epoch)
        context = CoordinatorContext(self.server_id, fence, self.host, self.rpc_port)
        leader = LeaderServices(
            self.zk,
            context,
            self.http_port,
            self._leader_guard,
            self._on_fenced,
            options_from_config(self.config),
            proof_of_death=self.config[cfg.PROOF_OF_DEATH],
            rebalance_options=executor_options(self.config),
            leader_balance=LeaderBalanceOptions.from_config(self.config),
            static_config=self.config,
            auto_partition_interval=float(self.config[cfg.AUTO_PARTITION_CHECK_INTERVAL]),
        )
        self._leader, self._leader_session = leader, self.zk.session_id
        try:
            await leader.start()
        except Exception as e:
            log.error("Failed to initialise coordinator leader services (%s); releasing leadership", e, exc_info=True)
            self._leader = None
            await leader.stop()
            await self._release()
            self.state.transition(CoordinatorState.STANDBY, "leader initialisation failed")
            self._later(RETRY_BACKOFF, Signal("elect"))
            return
        self._known_leader = None
        self.state.transition(CoordinatorState.LEADER, f"epoch {fence.epoch}")
        log.info("Coordinator leader services started (server %d, epoch %d)", self.server_id, fence.epoch)
        await self._watch_own_candidate(candidate)

    def _on_epoch_node_change(self, event: WatchEvent) -> None:
        if event.type != "NONE":  # a reconnect re-checks the election anyway
            log.info("Coordinator epoch node changed (%s); checking the election again", event.type)
            self._signal(Signal("elect"))

    async def _watch_own_candidate(self, candidate: str) -> None:
        """While leader, our candidate disappears with a live session only when a standby proved this process
        dead (a forged refusal): step down at once, as when fenced (docs/coordinator-ha.md)."""

        def on_change(event: WatchEvent) -> None:
            if event.type == "DELETED" and self.election.candidate_path == candidate and self._leader is not None:
                log.warning("Our candidate node %s was deleted by a standby that proved us dead", candidate)
                self._signal(Signal("fenced"))

        if await self.zk.exists(candidate, watch=on_change) is None:
            on_change(WatchEvent("DELETED", candidate))

    async def _lose_leadership(self, reason: str) -> None:
        leader, self._leader = self._leader, None
        log.warning("Lost coordinator leadership (%s); tearing down leader services in reverse order", reason)
        if leader is not None:
            await leader.stop()
        if self.state.current in (CoordinatorState.LEADER, CoordinatorState.ELECTING):
            self.state.transition(CoordinatorState.STANDBY, reason)

    async def _release(self) -> None:
        """Voluntary release with a live session: delete our leader node (if ours) and our candidate."""
        try:
            path = CoordinatorLeaderZNode.path(self.root)
            got = await self.zk.get(path)
            if got is not None and got[1].ephemeral_owner == self.zk.session_id and self.zk.session_id:
                await self.zk.delete(path, got[1].version)
                log.info("Deleted our coordinator leader node")
            await self.election.resign()
        except ZkError as e:
            if self.zk.session_state is SessionState.LOST:
                log.warning("Releasing leadership nodes failed (%s); they go with the session", e)
                self.election.forget()
            else:  # connection loss, session alive: the candidate is still ours; the next election finds it
                log.warning("Releasing leadership nodes failed (%s); keeping candidate %s of our live session",
                            e, self.election.candidate)  # fmt: skip

    def _on_fenced(self) -> None:
        self._signal(Signal("fenced"))

    async def _leader_guard(self) -> None:
        """Raise unless this process may still act as leader (called before every event)."""
        if self._leader is None:
            raise NotCoordinatorLeaderError("not the coordinator leader")
        if not self.zk.connected or self.zk.session_id != self._leader_session:
            raise NotCoordinatorLeaderError("the ZooKeeper session of this leadership is gone")
        stalled = time.monotonic() - self._last_tick
        if stalled > self.session_timeout / 3:
            log.warning("Event loop was stalled for %.1fs; verifying the ZooKeeper session first", stalled)
            try:
                await asyncio.wait_for(self.zk.sync(self.root), self.session_timeout)
            except (ZkError, TimeoutError) as e:
                raise NotCoordinatorLeaderError(f"ZooKeeper session unverified after a stall: {e}") from None
            if self.zk.session_id != self._leader_session:
                raise NotCoordinatorLeaderError("the ZooKeeper session of this leadership is gone")
