"""Random fault schedules over 3 replicas (seeded): appends with acks=all/1, kills, restarts, clean elections
from the live ISR, ISR shrinks by lag, leaders cut off from their followers (so acks=1 tails diverge).
Followers fetch with one call per request or on fetch streams (``transport``); on streams no follower may
ever break a stream's binding. At the end every server is back and in the ISR, an acks=all write succeeds, and:
- every acks=all-acknowledged record is at its acknowledged offset on every replica (nothing acked is lost);
- all replicas hold byte-identical logs (they never diverge)."""

from __future__ import annotations

import os
import random

import pytest

from fluss_py.replica.messages import ProduceResult
from fluss_py.testing.procs import async_wait_until as wait_until
from tests.unit.replica.fakes import batch, log_contents
from tests.unit.replica.harness import LAG_S, TB, ReplicaCluster

R3 = (1, 2, 3)


class Model:
    """Plays the coordinator: clean elections (first live ISR member in assignment order), dead replicas
    leave the ISR, restarted replicas come back as followers."""

    def __init__(self, cluster: ReplicaCluster) -> None:
        self.c = cluster
        self.acked: dict[int, bytes] = {}  # offset -> value, acks=all successes

    @property
    def state(self):
        return self.c.coordinator.state[TB]

    async def kill(self, server: int) -> None:
        await self.c.kill(server)
        live = [r for r in self.state.isr if r != server and r in self.c.managers]
        if self.state.leader == server:
            leader = next((r for r in R3 if r in live), -1)
            self.c.coordinator.state[TB] = self.state.with_leader(leader, tuple(live) or (server,), 1)
        elif server in self.state.isr:
            self.c.coordinator.state[TB] = self.state.with_isr(tuple(r for r in self.state.isr if r != server), 1)
        await self.c.notify(TB, R3)

    async def restart(self, server: int) -> None:
        self.c.start_server(server)
        if self.state.leader == -1 and server in self.state.isr:  # the last ISR member is back: clean election
            self.c.coordinator.state[TB] = self.state.with_leader(server, (server,), 1)
        await self.c.notify(TB, R3)

    async def produce(self, i: int, acks: int) -> None:
        leader = self.state.leader
        if leader not in self.c.managers:
            return
        value = b"v%d" % i
        result: ProduceResult = (await self.c.managers[leader].append(acks, 0.2, {TB: batch(value)}))[TB]
        if acks == -1 and result.error is None:
            assert result.base_offset not in self.acked or self.acked[result.base_offset] == value
            self.acked[result.base_offset] = value

    async def diverge(self, i: int) -> None:
        """The leader takes acks=1 writes its followers cannot fetch, then dies."""
        leader = self.state.leader
        if leader not in self.c.managers:
            return
        self.c.down.add(leader)
        await self.produce(i, 1)
        await self.kill(leader)

    async def shrink(self) -> None:
        self.c.clock.advance(LAG_S + 1)
        leader = self.c.managers.get(self.state.leader)
        if leader is not None and leader.maybe_shrink_isr():
            await wait_until(lambda: leader.replica(TB) is None or leader.replica(TB).pending_isr is None)


@pytest.mark.parametrize("transport", ["unary", "stream"])
@pytest.mark.parametrize("seed", range(int(os.environ.get("FLUSS_MODEL_SEEDS", "8"))))
async def test_random_faults_lose_no_acknowledged_write_and_never_diverge(
    seed: int, transport: str, clock, tmp_path
) -> None:
    rng = random.Random(seed)
    c = ReplicaCluster(3, clock, tmp_path)
    c.streams = transport == "stream"  # followers' sessions on FetchLogStreams (docs/replication.md)
    m = Model(c)
    try:
        await c.create(TB, R3, {"min.insync.replicas": "2"})
        for step in range(60):
            op = rng.random()
            live = sorted(c.managers)
            dead = [s for s in R3 if s not in c.managers]
            if op < 0.4:
                await m.produce(step, rng.choice((-1, -1, 1)))
            elif op < 0.55 and len(live) > 1:
                await m.kill(rng.choice(live))
            elif op < 0.75 and dead:
                await m.restart(rng.choice(dead))
            elif op < 0.82:
                await m.shrink()
            elif op < 0.87:
                await m.diverge(step)
            elif op < 0.92 and m.state.leader in c.managers:
                c.down.add(m.state.leader)  # followers cannot fetch from it (it still takes produce)
            else:
                c.down -= set(c.managers)
            # let replication make progress sometimes
            if rng.random() < 0.5:
                await wait_until(lambda: True)
        for s in R3:
            if s not in c.managers:
                await m.restart(s)
        c.down.clear()
        leader = m.state.leader
        assert leader in c.managers
        # Caught up = back in the ISR. A follower told of the leader before the leader was (or still backing
        # off) may not have truncated yet: it can hold a diverged acks=1 tail exactly as long as the leader's
        # log, so equal LEOs alone prove nothing. The leader admits a follower only from a fetch that is not
        # diverging (its progress is not recorded otherwise), so a full ISR means every follower truncated.
        back = f"seed {seed}: every replica back in the ISR"
        await wait_until(lambda: set(m.state.isr) == set(R3), timeout=10.0, message=back)
        final = (await c.managers[leader].append(-1, 5.0, {TB: batch(b"final")}))[TB]
        assert final.error is None, f"seed {seed}: the final acks=all write failed: {final.error!r}"
        leo = c.managers[leader].replica(TB).log_end_offset
        assert leo == final.base_offset + 1

        def converged() -> bool:
            return all(c.managers[s].replica(TB).log_end_offset == leo for s in R3)

        await wait_until(converged, timeout=10.0, message=f"seed {seed}")
        logs = [log_contents(c.log_managers[s].get(TB)) for s in R3]
        assert logs[0] == logs[1] == logs[2], f"seed {seed}: replicas diverged"
        by_offset = {o: v for o, _, v in logs[0]}
        for offset, value in m.acked.items():
            assert by_offset.get(offset) == value, f"seed {seed}: acked record at {offset} lost"
        refused = [e for endpoint in c.endpoints for e in endpoint.stream_refusals]
        assert not refused, f"seed {seed}: a follower broke a fetch stream's binding: {refused[0]}"
    finally:
        await c.close()
