"""A seeded random schedule of faults for ``fluss-py verify``. Pure: the same seed gives the same schedule.

Faults come one after another: each lasts ``[min_fault, max_fault]`` seconds, then the cluster is healed
and gets ``[min_gap, max_gap]`` seconds of quiet before the next. Kinds (``--faults``):

    kill       kill -9 of one process (a server or a ZooKeeper member), started again at the end
    pause      SIGSTOP of one process, SIGCONT at the end
    term       SIGTERM of one server (graceful stop), started again at the end
    partition  one of: isolate a process; split the processes into halves; cut a tablet server off from
               everyone but the clients; one-way drop into a process; a bridge (halves sharing one node)
    netem      on one process's link: random loss (10-30 %), or 50-200 ms ± 50 ms of latency with 5 % loss
    zookeeper  loss of the ZooKeeper quorum (a majority killed), or kill -9 of one member
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

KINDS = ("kill", "pause", "term", "partition", "netem", "zookeeper")
PARTITIONS = ("isolate", "halves", "cut-off", "one-way", "bridge")


@dataclass(frozen=True)
class Planned:
    """One fault to inject at ``at`` seconds for ``duration`` seconds; ``targets`` are process names."""

    at: float
    duration: float
    kind: str
    variant: str
    targets: tuple[str, ...]
    params: dict[str, float] = field(default_factory=dict)

    def describe(self) -> str:
        extra = "".join(f" {k}={v:g}" for k, v in self.params.items())
        return f"{self.kind}/{self.variant} {','.join(self.targets)}{extra}"


def make_schedule(
    seed: int,
    duration: float,
    kinds: Sequence[str],
    zookeepers: Sequence[str],
    coordinators: Sequence[str],
    tablet_servers: Sequence[str],
    *,
    min_fault: float = 2.0,
    max_fault: float = 6.0,
    min_gap: float = 1.0,
    max_gap: float = 3.0,
    start: float = 3.0,
) -> list[Planned]:
    """Faults from ``start`` until ``duration`` seconds (each one ends before ``duration``)."""
    unknown = set(kinds) - set(KINDS)
    if unknown or not kinds:
        raise ValueError(f"unknown fault kinds {sorted(unknown)} (known: {', '.join(KINDS)})")
    rng = random.Random(seed)
    servers = [*coordinators, *tablet_servers]
    everyone = [*zookeepers, *servers]
    out: list[Planned] = []
    t = start
    while True:
        length = rng.uniform(min_fault, max_fault)
        if t + length > duration:
            return out
        kind = rng.choice(list(kinds))
        out.append(_one(rng, t, length, kind, zookeepers, servers, tablet_servers, everyone))
        t += length + rng.uniform(min_gap, max_gap)


def _one(
    rng: random.Random,
    t: float,
    length: float,
    kind: str,
    zookeepers: Sequence[str],
    servers: Sequence[str],
    tablet_servers: Sequence[str],
    everyone: Sequence[str],
) -> Planned:
    if kind in ("kill", "pause"):
        return Planned(t, length, kind, "process", (rng.choice(everyone),))
    if kind == "term":
        return Planned(t, length, kind, "server", (rng.choice(servers),))
    if kind == "netem":
        if rng.random() < 0.5:
            params = {"loss_pct": float(rng.choice([10, 20, 30]))}
            return Planned(t, length, kind, "loss", (rng.choice(everyone),), params)
        params = {"delay_ms": float(rng.choice([50, 100, 200])), "jitter_ms": 50.0, "loss_pct": 5.0}
        return Planned(t, length, kind, "delay", (rng.choice(everyone),), params)
    if kind == "zookeeper":
        if len(zookeepers) >= 3 and rng.random() < 0.5:
            return Planned(
                t, length, kind, "quorum-loss", tuple(rng.sample(list(zookeepers), len(zookeepers) // 2 + 1))
            )
        return Planned(t, length, kind, "kill-member", (rng.choice(list(zookeepers)),))
    variant = rng.choice(PARTITIONS)
    if variant == "isolate":
        return Planned(t, length, kind, variant, (rng.choice(everyone),))
    if variant == "cut-off":
        return Planned(t, length, kind, variant, (rng.choice(list(tablet_servers)),))
    if variant == "one-way":
        to, source = rng.sample(list(everyone), 2)
        return Planned(t, length, kind, variant, (to, source))
    shuffled = list(everyone)
    rng.shuffle(shuffled)
    half = len(shuffled) // 2
    if variant == "halves":
        return Planned(t, length, kind, variant, tuple(shuffled[:half]))
    return Planned(t, length, kind, "bridge", tuple(shuffled))  # a | b with shuffled[half] in both
