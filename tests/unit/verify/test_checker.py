"""The checker catches each kind of violation, and a clean history passes."""

from fluss_py.verify.checker import check
from fluss_py.verify.history import decode_lines, encode


def send(p, s, b, t=0.0):
    return {"k": "send", "t": t, "p": p, "s": s, "b": b}


def ack(p, s, b, o):
    return {"k": "ack", "t": 1.0, "p": p, "s": s, "b": b, "o": o}


def clean():
    events = [send(0, 0, 0), ack(0, 0, 0, 0), send(0, 1, 0), ack(0, 1, 0, 1), send(1, 0, 1), ack(1, 0, 1, 0)]
    final = {0: [(0, "p0-0"), (1, "p0-1")], 1: [(0, "p1-0")]}
    return events, final


def test_a_clean_run_passes():
    events, final = clean()
    events.append({"k": "read", "t": 2.0, "b": 0, "o": 1, "v": "p0-1"})
    report = check(events, final, {"a": final, "b": final}, {0: 2, 1: 1})
    assert report.ok and report.acked == 3 and report.reads == 1 and report.unanswered == 0


def test_lost_moved_duplicated_reordered():
    events, _ = clean()
    final = {0: [(0, "p0-1"), (1, "p0-0"), (2, "p0-1")], 1: []}
    v = check(events, final).violations
    assert v["lost"] == 1  # p1-0
    assert v["moved"] == 2  # p0-0 acked at 0, p0-1 acked at 1
    assert v["duplicated"] == 1  # p0-1 twice
    assert v["reordered"] >= 1  # p0-0 after p0-1


def test_reads_of_uncommitted_data_and_divergent_replicas():
    events, final = clean()
    events.append({"k": "read", "t": 2.0, "b": 0, "o": 2, "v": "p0-9"})  # truncated away later
    replicas = {"a": {0: [(0, "p0-0"), (1, "p0-1")]}, "b": {0: [(0, "p0-0"), (1, "p0-7")]}}
    report = check(events, final, replicas, {0: 2})
    assert report.violations["uncommitted"] == 1
    assert report.violations["divergent"] == 1
    assert not check(events[:-1], final, replicas, {0: 1}).violations["divergent"]  # above the HW: allowed


def test_failed_sends_that_landed_are_counted_not_violations():
    events, final = clean()
    events += [send(0, 2, 0), {"k": "fail", "t": 3.0, "p": 0, "s": 2, "b": 0, "e": "timeout"}, send(0, 3, 0)]
    final[0].append((2, "p0-2"))
    report = check(events, final)
    assert report.ok and report.failed == 1 and report.failed_landed == 1 and report.unanswered == 1


def test_history_codec_skips_a_torn_line():
    text = encode(send(0, 1, 0)) + encode(ack(0, 1, 0, 5)) + '{"k": "se'
    assert [e["k"] for e in decode_lines(text.splitlines())] == ["send", "ack"]


def test_stalls_are_attributed_to_the_fault_in_force_or_just_before():
    from fluss_py.verify.history import Fault
    from fluss_py.verify.runner import stalls_by_kind

    events = [send(0, 0, 0, t=1.0), ack(0, 0, 0, 0), send(0, 1, 0, t=6.5), send(0, 2, 0, t=9.5)]
    events += [{"k": "ack", "t": 8.5, "p": 0, "s": 1, "b": 0, "o": 1}, {"k": "fail", "t": 20.0, "p": 0, "s": 2, "b": 0}]
    faults = [Fault(0.5, 6.0, "kill", "kill/process ts-1"), Fault(9.0, 12.0, "partition", "partition/isolate ts-2")]
    # seq 0 answered at once; seq 1, sent in the kill's aftermath, waited 2 s; seq 2, sent during the partition, 10.5 s
    assert stalls_by_kind(events, faults) == {"kill/process": 2.0, "partition/isolate": 10.5}
