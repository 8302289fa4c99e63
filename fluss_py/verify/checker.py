"""The verdict of a verify run, from its history, the final log and the replicas' files. Pure.

Inputs, all per bucket ``b``:
- ``events``   the history (see history.py): sends, acks, failures, reads
- ``final``    ``{b: [(offset, value), ...]}``: every record below the high watermark, read after healing
- ``replicas`` ``{server: {b: [(offset, value), ...]}}``: each replica's own log files; ``hw`` ``{b: HW}``

Violations (each one a list of examples; the run passes when all are empty):
- ``lost``        an acknowledged value is not in the final log
- ``duplicated``  a value appears more than once in the final log
- ``moved``       an acknowledged value sits at another bucket/offset than its acknowledgement said
- ``reordered``   one producer's values in one bucket are not in its send order
- ``uncommitted`` a consumer was handed a record that is not the final log's record at that offset
- ``divergent``   two replicas hold different records at one offset below the high watermark
Not violations, but reported: failed sends and how many of them landed anyway; sends never answered.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fluss_py.verify.history import ACK, FAIL, READ, SEND, parse_value, value_of

Log = Sequence[tuple[int, str]]
EXAMPLES = 20


@dataclass
class Report:
    """Counts and a few examples of each violation, plus the send statistics."""

    sends: int = 0
    acked: int = 0
    failed: int = 0
    failed_landed: int = 0
    unanswered: int = 0
    reads: int = 0
    final_records: int = 0
    violations: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def add(self, kind: str, example: str) -> None:
        self.violations[kind] = self.violations.get(kind, 0) + 1
        bucket = self.examples.setdefault(kind, [])
        if len(bucket) < EXAMPLES:
            bucket.append(example)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


KINDS = ("lost", "duplicated", "moved", "reordered", "uncommitted", "divergent")


def check(
    events: Iterable[Mapping[str, Any]],
    final: Mapping[int, Log],
    replicas: Mapping[str, Mapping[int, Log]] | None = None,
    hw: Mapping[int, int] | None = None,
) -> Report:
    report = Report(violations=dict.fromkeys(KINDS, 0), examples={k: [] for k in KINDS})
    where: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for b, log in final.items():
        for offset, value in log:
            where[value].append((b, offset))
        report.final_records += len(log)
    at = {(b, o): v for b, log in final.items() for o, v in log}

    sent: set[tuple[int, int]] = set()
    answered: set[tuple[int, int]] = set()
    for e in events:
        kind = e.get("k")
        if kind == SEND:
            report.sends += 1
            sent.add((e["p"], e["s"]))
        elif kind == ACK:
            report.acked += 1
            answered.add((e["p"], e["s"]))
            value = value_of(e["p"], e["s"])
            places = where.get(value, [])
            if not places:
                report.add("lost", f"{value} acknowledged at {e['b']}/{e['o']}, not in the final log")
            elif (e["b"], e["o"]) not in places:
                report.add("moved", f"{value} acknowledged at {e['b']}/{e['o']}, found at {places}")
        elif kind == FAIL:
            report.failed += 1
            answered.add((e["p"], e["s"]))
            if value_of(e["p"], e["s"]) in where:
                report.failed_landed += 1
        elif kind == READ:
            report.reads += 1
            now = at.get((e["b"], e["o"]))
            if now != e["v"]:
                report.add("uncommitted", f"read {e['v']} at {e['b']}/{e['o']}; the final log has {now!r} there")
    report.unanswered = len(sent - answered)

    for value, places in where.items():
        if len(places) > 1:
            report.add("duplicated", f"{value} at {sorted(places)}")
    for b, log in final.items():
        last: dict[int, tuple[int, int]] = {}
        for offset, value in sorted(log):
            pv = parse_value(value)
            if pv is None:
                continue
            producer, seq = pv
            if producer in last and seq <= last[producer][0]:
                before = value_of(producer, last[producer][0])
                report.add("reordered", f"bucket {b}: {value} at {offset} after {before} at {last[producer][1]}")
            last[producer] = (seq, offset)
    for example in divergence(replicas or {}, hw or {}):
        report.add("divergent", example)
    return report


def divergence(replicas: Mapping[str, Mapping[int, Log]], hw: Mapping[int, int]) -> list[str]:
    """Offsets below the high watermark where two replicas hold different records."""
    out = []
    names = sorted(replicas)
    for b, limit in sorted(hw.items()):
        views = {n: {o: v for o, v in replicas[n].get(b, ()) if o < limit} for n in names if b in replicas[n]}
        for i, x in enumerate(names):
            for y in names[i + 1 :]:
                if x not in views or y not in views:
                    continue
                for o in sorted(views[x].keys() & views[y].keys()):
                    if views[x][o] != views[y][o]:
                        out.append(f"bucket {b} offset {o}: {x} has {views[x][o]}, {y} has {views[y][o]}")
    return out
