"""The primary-key workload's checker: each violation it names, on small hand-made histories."""

from __future__ import annotations

from fluss_py.verify.kv_checker import KV_ACK, KV_FAIL, KV_READ, KV_SEND, ReplicaKv, check_kv


def send(t: float, p: int, s: int, key: int, op: str = "u") -> dict:
    return {"k": KV_SEND, "t": t, "p": p, "s": s, "key": key, "op": op}


def ack(t: float, p: int, s: int) -> dict:
    return {"k": KV_ACK, "t": t, "p": p, "s": s, "b": 0, "o": s}


def fail(t: float, p: int, s: int) -> dict:
    return {"k": KV_FAIL, "t": t, "p": p, "s": s, "e": "timed out"}


def read(t0: float, t: float, key: int, w: tuple[int, int] | None) -> dict:
    return {"k": KV_READ, "t0": t0, "t": t, "key": key, "w": None if w is None else list(w)}


HISTORY = [
    send(1, 0, 1, 7), ack(2, 0, 1),  # key 7: upsert (0, 1)
    send(3, 0, 2, 7), ack(4, 0, 2),  # key 7: upsert (0, 2)
    send(5, 0, 3, 8), ack(6, 0, 3),  # key 8: upsert (0, 3)
    send(7, 0, 4, 8, "d"), ack(8, 0, 4),  # key 8: delete
    send(9, 0, 5, 7), fail(10, 0, 5),  # key 7: upsert (0, 5) failed: it may have landed
]  # fmt: skip


def violations(report) -> dict[str, int]:
    return {k: v for k, v in report.violations.items() if v}


def test_a_clean_history_passes_with_or_without_the_failed_write_landing() -> None:
    reads = [read(2.5, 2.6, 7, (0, 1)), read(4.5, 4.6, 7, (0, 2)), read(8.5, 8.6, 8, None), read(0, 0.5, 9, None)]
    for final7 in ((0, 2), (0, 5)):
        report = check_kv(HISTORY + reads, {7: final7, 8: None}, committed={(0, 1), (0, 2), (0, 3)})
        assert report.ok, report.examples
        assert (report.sends, report.acked, report.failed, report.reads) == (5, 4, 1, 4)


def test_lost_updates_and_resurrected_deletes() -> None:
    report = check_kv(HISTORY, {7: (0, 1), 8: (0, 3)}, committed={(0, 1), (0, 2), (0, 3)})
    assert violations(report) == {"lost-update": 1, "resurrected": 1}
    assert "key 7" in report.examples["lost-update"][0]


def test_stale_lost_and_phantom_reads() -> None:
    reads = [
        read(4.5, 4.6, 7, (0, 1)),  # stale: (0, 2) was acknowledged before the lookup began
        read(8.5, 8.6, 8, (0, 3)),  # stale: the delete was acknowledged before
        read(6.5, 6.6, 8, None),  # stale: absent after the upsert was acknowledged, no delete sent yet
        read(2.5, 2.6, 7, (0, 9)),  # phantom: never sent
        read(0.1, 0.2, 8, (0, 3)),  # phantom: sent only after the lookup ended
        read(2.5, 2.6, 8, (0, 1)),  # phantom: a write of another key
        read(3.5, 3.6, 7, (0, 2)),  # lost: not in the committed changelog
    ]
    report = check_kv(HISTORY + reads, {7: (0, 2), 8: None}, committed={(0, 1), (0, 3)})
    assert violations(report) == {"stale-read": 3, "phantom-read": 3, "lost-read": 1}


def test_replicas_must_hold_the_final_rows_and_their_logs_replay() -> None:
    final = {7: (0, 2), 8: None}
    replicas = {
        "ts-1": ReplicaKv({7: (0, 2)}, {7: (0, 2)}),
        "ts-2": ReplicaKv({7: (0, 1)}, {7: (0, 2)}, applied=5, hw=9),  # lags, and its KV is not its log's
        "ts-3": ReplicaKv({7: (0, 2), 8: (0, 3)}, {7: (0, 2), 8: (0, 3)}),  # a resurrected row
        "ts-4 bucket 1": ReplicaKv({8: (0, 3)}, {8: (0, 3)}, keys=frozenset({8})),
        "ts-5 bucket 0": ReplicaKv({7: (0, 2)}, {7: (0, 2)}, keys=frozenset({7})),  # its bucket's keys only
    }
    report = check_kv(HISTORY, final, {(0, 1), (0, 2), (0, 3)}, replicas)
    assert violations(report) == {"replica": 3, "kv-vs-log": 1}
    assert report.examples["kv-vs-log"][0].startswith("ts-2")
    assert "applied 5 of the high watermark 9" in report.examples["replica"][0]
