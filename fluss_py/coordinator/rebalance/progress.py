"""A rebalance's durable state: the plan and its progress, as stored in ``<root>/cluster/rebalance``.

JSON (``RebalanceZNode`` adds ``"version"``; format in ``docs/rebalance.md`` §5)::

    {"id": "...", "status": "REBALANCING", "reason": "...", "created_ms": 0, "plan": {...Plan.to_json()},
     "batch": 0, "moves": ["adding", "pending"], "origin": {"0": [1, 2, 3]}, "bytes_moved": 0, "message": "",
     "replacing": [3]}

``replacing`` (only in a replacement, docs/rebalance.md §12): the permanent-offline servers it empties; the
health check between batches ignores their replicas.

Who may call: the executor (on the coordinator's event loop) and readers of the node (CLI, tests).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fluss_py.coordinator.rebalance.planner import Move, Plan
from fluss_py.types import TableBucket


class RebalanceStatus(enum.Enum):
    REBALANCING = "REBALANCING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELED = "CANCELED"


class MoveStatus(enum.Enum):
    PENDING = "pending"  # batch not started
    ADDING = "adding"  # step 1 written: the target is assigned and catching up
    DONE = "done"  # steps 2-3 written: the old replica is gone (or the leadership moved)
    ROLLED_BACK = "rolled_back"  # the target was removed again; the old replicas never left
    SKIPPED = "skipped"  # no longer applicable when its batch started (e.g. a leadership target out of sync)

    @property
    def open(self) -> bool:
        return self in (MoveStatus.PENDING, MoveStatus.ADDING)


@dataclass
class RebalanceProgress:
    """The plan and where its execution stands. Mutated only by the executor, on the loop task."""

    id: str
    plan: Plan
    reason: str = ""
    created_ms: int = 0
    status: RebalanceStatus = RebalanceStatus.REBALANCING
    batch: int = 0
    moves: list[MoveStatus] = field(default_factory=list)
    origin: dict[int, tuple[int, ...]] = field(default_factory=dict)  # move index -> replicas before it
    bytes_moved: int = 0
    message: str = ""
    replacing: tuple[int, ...] = ()  # a replacement: the servers it empties (docs/rebalance.md §12)

    def __post_init__(self) -> None:
        if not self.moves:
            self.moves = [MoveStatus.PENDING] * len(self.plan.moves)

    @property
    def running(self) -> bool:
        return self.status is RebalanceStatus.REBALANCING

    def batch_moves(self, index: int | None = None) -> list[tuple[int, Move]]:
        b = self.batch if index is None else index
        if not 0 <= b < len(self.plan.batches):
            return []
        return [(i, self.plan.moves[i]) for i in self.plan.batches[b]]

    def open_moves(self) -> list[tuple[int, Move]]:
        return [(i, m) for i, m in self.batch_moves() if self.moves[i].open]

    def count(self, status: MoveStatus) -> int:
        return sum(1 for s in self.moves if s is status)

    def adding_replicas(self) -> dict[TableBucket, tuple[int, ...]]:
        """Per bucket, the targets of its moves in step 1 (*adding*) while the rebalance runs: what
        NotifyLeaderAndIsr names in ``adding_replicas`` so the leader throttles only them (docs/rebalance.md §6)."""
        out: dict[TableBucket, tuple[int, ...]] = {}
        if self.running:
            for i, m in self.open_moves():
                if self.moves[i] is MoveStatus.ADDING:
                    out[m.bucket] = (*out.get(m.bucket, ()), m.to_server)
        return out

    def to_json(self) -> dict[str, Any]:
        replacing = {"replacing": list(self.replacing)} if self.replacing else {}
        return {
            **replacing,
            "id": self.id,
            "status": self.status.value,
            "reason": self.reason,
            "created_ms": self.created_ms,
            "plan": self.plan.to_json(),
            "batch": self.batch,
            "moves": [s.value for s in self.moves],
            "origin": {str(i): list(r) for i, r in sorted(self.origin.items())},
            "bytes_moved": self.bytes_moved,
            "message": self.message,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> RebalanceProgress:
        return cls(
            id=str(d["id"]),
            plan=Plan.from_json(d["plan"]),
            reason=str(d.get("reason", "")),
            created_ms=int(d.get("created_ms", 0)),
            status=RebalanceStatus(d["status"]),
            batch=int(d.get("batch", 0)),
            moves=[MoveStatus(s) for s in d.get("moves", [])],
            origin={int(i): tuple(int(s) for s in r) for i, r in dict(d.get("origin", {})).items()},
            bytes_moved=int(d.get("bytes_moved", 0)),
            message=str(d.get("message", "")),
            replacing=tuple(int(s) for s in d.get("replacing", ())),
        )

    def view(self) -> dict[str, Any]:
        """What GET /rebalance and the CLI show: status, counts, spreads (no per-move detail)."""
        return {
            "id": self.id,
            "kind": "replacement" if self.replacing else "rebalance",
            "replacing": list(self.replacing),
            "status": self.status.value,
            "reason": self.reason,
            "batch": self.batch,
            "batches_total": len(self.plan.batches),
            "moves_total": len(self.plan.moves),
            "replica_moves": self.plan.replica_moves,
            "moves_done": self.count(MoveStatus.DONE),
            "moves_in_flight": self.count(MoveStatus.ADDING),
            "moves_rolled_back": self.count(MoveStatus.ROLLED_BACK),
            "bytes_total": self.plan.moved_bytes,
            "bytes_moved": self.bytes_moved,
            "spread_before": round(self.plan.spread_before, 4),
            "spread_planned": round(self.plan.spread_after, 4),
            "message": self.message,
            "summary": self.plan.summary(),
        }
