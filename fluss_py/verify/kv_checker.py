"""The verdict of a primary-key workload: writes, lookups, the final rows and every replica's KV. Pure.

The workload (issue 34's acceptance): clients upsert and delete random keys of one primary-key table with
acks=all, one write at a time each, every key written by one client only, so a key's writes are totally
ordered; the row written carries its writer and sequence (``p``, ``s``), so any row read names its write. A
further client looks keys up meanwhile. The history holds (history.py's codec)::

    {"k": "kv-send", "t": 3.2, "p": 1, "s": 17, "key": 42, "op": "u"}     client 1's write 17: upsert of key 42
    {"k": "kv-ack",  "t": 3.3, "p": 1, "s": 17, "b": 0, "o": 311}         acknowledged at bucket 0, offset 311
    {"k": "kv-fail", "t": 9.0, "p": 1, "s": 18, "e": "..."}               failed (it may still have landed)
    {"k": "kv-read", "t0": 3.4, "t": 3.5, "key": 42, "w": [1, 17]}        a lookup in [t0, t]; w null: no row

Inputs besides the events: ``final`` — each key's row after healing as (p, s) or None (the leader's lookups);
``committed`` — every (p, s) that the committed changelog holds as a new row (+I or +U); ``replicas`` — per
bucket replica a ``ReplicaKv``: its KV as ``{key: (p, s)}`` (read once it applied everything committed), the KV
rebuilt by replaying its own log, and the keys of its bucket.

Violations (each a count and a few examples; the run passes when every count is 0):
- ``lost-update``  a key's final row is not its last acknowledged write (nor a later write that failed and
                   may have landed)
- ``resurrected``  a key whose last acknowledged write is a delete has a row
- ``stale-read``   a lookup returned a value older than the last write of the key acknowledged before it began
- ``lost-read``    a lookup returned a write that is not in the committed changelog (a value later lost)
- ``phantom-read`` a lookup returned a row no client sent (before the lookup ended), or of another key
- ``replica``      a replica's KV differs from the final rows
- ``kv-vs-log``    a replica's KV differs from the KV rebuilt from its own log
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from fluss_py.verify.checker import Report
from fluss_py.verify.history import ACK, FAIL, SEND

KV_SEND, KV_ACK, KV_FAIL, KV_READ = "kv-send", "kv-ack", "kv-fail", "kv-read"
KV_KINDS = ("lost-update", "resurrected", "stale-read", "lost-read", "phantom-read", "replica", "kv-vs-log")

Write = tuple[int, int]  # (client, sequence)


@dataclass(frozen=True)
class ReplicaKv:
    """One bucket replica's KV (``rows``), the KV its own log describes at the same applied offset (``rebuilt``),
    the keys of its bucket (None: every key) and how far it applied of the high watermark."""

    rows: Mapping[int, Write]
    rebuilt: Mapping[int, Write]
    keys: frozenset[int] | None = None
    applied: int = -1
    hw: int = -1


@dataclass
class _Op:
    w: Write
    upsert: bool
    sent: float
    acked: float | None = None  # acknowledgement time
    failed: bool = False


def check_kv(
    events: Iterable[Mapping],
    final: Mapping[int, Write | None],
    committed: set[Write],
    replicas: Mapping[str, ReplicaKv] | None = None,
) -> Report:
    report = Report(violations=dict.fromkeys(KV_KINDS, 0), examples={k: [] for k in KV_KINDS})
    ops: dict[int, list[_Op]] = defaultdict(list)  # key -> its writes in order
    by_write: dict[Write, tuple[int, _Op]] = {}
    reads = []
    for e in events:
        kind = e.get("k")
        if kind == KV_SEND:
            op = _Op((e["p"], e["s"]), e["op"] == "u", e["t"])
            ops[e["key"]].append(op)
            by_write[op.w] = (e["key"], op)
            report.sends += 1
        elif kind == KV_ACK:
            by_write[(e["p"], e["s"])][1].acked = e["t"]
            report.acked += 1
        elif kind == KV_FAIL:
            by_write[(e["p"], e["s"])][1].failed = True
            report.failed += 1
        elif kind == KV_READ:
            reads.append(e)
    report.reads = len(reads)
    for key_ops in ops.values():
        key_ops.sort(key=lambda op: op.w[1])  # one client per key: its sequence is the key's order
    report.unanswered = sum(1 for _, op in by_write.values() if op.acked is None and not op.failed)

    for key in sorted(ops.keys() | final.keys()):
        _check_final(report, key, ops.get(key, []), final.get(key))
    for e in reads:
        _check_read(report, e, ops.get(e["key"], []), by_write, committed)
    report.final_records = sum(1 for v in final.values() if v is not None)
    for name, r in sorted((replicas or {}).items()):
        want = {k: v for k, v in final.items() if v is not None and (r.keys is None or k in r.keys)}
        lag = f" (applied {r.applied} of the high watermark {r.hw})" if r.applied < r.hw else ""
        for line in _differences(dict(r.rows), want):
            report.add("replica", f"{name}{lag}: {line}")
        for line in _differences(dict(r.rows), dict(r.rebuilt)):
            report.add("kv-vs-log", f"{name}: KV vs its log's replay: {line}")
    return report


def _value(op: _Op) -> Write | None:
    return op.w if op.upsert else None


def _check_final(report: Report, key: int, key_ops: list[_Op], got: Write | None) -> None:
    acked = [i for i, op in enumerate(key_ops) if op.acked is not None]
    last = acked[-1] if acked else -1
    allowed: set[Write | None] = {None} if last < 0 else {_value(key_ops[last])}
    allowed |= {_value(op) for op in key_ops[last + 1 :] if op.acked is None}  # failed or unanswered
    if got in allowed:
        return
    what = "nothing acknowledged" if last < 0 else f"last acknowledged {_describe(key_ops[last])}"
    if got is not None and last >= 0 and not key_ops[last].upsert:
        report.add("resurrected", f"key {key}: row of write {got}; {what}")
    else:
        report.add("lost-update", f"key {key}: final {got}; {what}")


def _check_read(
    report: Report, e: Mapping, key_ops: list[_Op], by_write: Mapping[Write, tuple[int, _Op]], committed: set[Write]
) -> None:
    key, t0, t1 = e["key"], e["t0"], e["t"]
    before = [i for i, op in enumerate(key_ops) if op.acked is not None and op.acked < t0]
    floor = before[-1] if before else -1
    if e["w"] is None:
        if floor < 0 or not key_ops[floor].upsert:
            return
        if any(not op.upsert and op.sent < t1 for op in key_ops[floor + 1 :]):
            return
        report.add("stale-read", f"key {key} read as absent in [{t0}, {t1}] after {_describe(key_ops[floor])}")
        return
    w = (int(e["w"][0]), int(e["w"][1]))
    found = by_write.get(w)
    if found is None or found[0] != key or not found[1].upsert or found[1].sent >= t1:
        report.add("phantom-read", f"key {key} read in [{t0}, {t1}] as write {w}, which no upsert of it explains")
        return
    index = key_ops.index(found[1])
    if index < floor:
        report.add("stale-read", f"key {key} read as {w} in [{t0}, {t1}] after {_describe(key_ops[floor])}")
    if w not in committed:
        report.add("lost-read", f"key {key} read as {w} in [{t0}, {t1}]; the committed changelog lacks it")


def _describe(op: _Op) -> str:
    return f"{'upsert' if op.upsert else 'delete'} {op.w} (acknowledged at {op.acked})"


def _differences(have: dict[int, Write], want: dict[int, Write]) -> list[str]:
    out = []
    for key in sorted(have.keys() | want.keys()):
        if have.get(key) != want.get(key):
            out.append(f"key {key}: {have.get(key)} instead of {want.get(key)}")
    return out


def as_send_events(events: Iterable[Mapping]) -> list[dict]:
    """The writes of a KV history as the log workload's send/ack/fail events (for the timeline and the stalls)."""
    kinds = {KV_SEND: SEND, KV_ACK: ACK, KV_FAIL: FAIL}
    return [{**e, "k": kinds[e["k"]]} for e in events if e.get("k") in kinds]
