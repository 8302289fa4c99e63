"""Members that must not keep buckets, on real processes (docs/consumer-groups.md, "Static membership" and
"Stuck members"): a second process with a static instance id that a live member holds, a member whose
application stopped polling in the middle of a revocation, and one that stopped polling at all.

Real ZooKeeper, a real coordinator and tablet server, ``fluss-py consume --group`` processes and
tests/fault/stuck_member.py (a member whose application can be made to stop calling ``poll`` while its
heartbeats go on). Ownership is sampled every 100 ms (``OwnershipSampler``): the coordinator's ownership
and each live member process's own account; the data checked are the records each process printed and
the committed offsets in ZooKeeper.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from fluss_py.client import SyncAdmin
from fluss_py.client.groups import GroupMembers
from fluss_py.errors import UnknownMemberIdError
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR
from fluss_py.testing.procs import wait_until
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.group_support import Member, Members, OwnershipSampler, commit_as, produce, setup_group

pytestmark = pytest.mark.fault

TABLE = "fluss.fenced"
BUCKETS = 12
GROUP = "fenced"
SESSION = 6.0  # the session timeout
REBALANCE = 4.0  # group.rebalance.timeout of the stuck-revocation test
MAX_POLL = 3.0  # the stuck application's max_poll_interval


def _setup(cluster_factory, made: list[Members], tmp_path: Path, **coordinator: str):
    return setup_group(cluster_factory, made, tmp_path, TABLE, GROUP, BUCKETS, **coordinator)


def _produce(bootstrap: str, start: int, count: int) -> set[str]:
    return produce(bootstrap, TABLE, start, count)


def _printed(group: Members) -> set[str]:
    return {value for m in group.started for _, _, value in m.records()}


def _owned(view: GroupMembers) -> dict[str, set[int]]:
    return {m.member_id: {tb.bucket for tb in m.assigned} for m in view.members}


def _settled(admin: SyncAdmin, live: list[Member], timeout: float = 60.0) -> GroupMembers:
    """Every live process's own account is what the coordinator says, together every bucket, group stable."""

    def check() -> GroupMembers | None:
        view = admin.describe_group_members(GROUP)
        accounts = sorted(sorted(m.owns()) for m in live)
        server = sorted(sorted(b) for b in _owned(view).values())
        ok = view.state == "STABLE" and len(view.members) == len(live) and accounts == server
        return view if ok and sorted(b for a in accounts for b in a) == list(range(BUCKETS)) else None

    return wait_until(check, timeout, interval=0.1, message=lambda: f"settled: {admin.describe_group_members(GROUP)}")  # type: ignore[return-value]


def _offsets_in_zookeeper(cluster: LocalCluster, table_id: int) -> dict[int, int]:
    """The committed offsets as the documented znodes hold them: <root>/consumers/<G>/offsets/<table>/<b>."""
    base = f"{cluster.zk_root}/consumers/{GROUP}/offsets/{table_id}"
    with ZkView(cluster.zookeeper_address) as zk:
        return {int(b): zk.get_json(f"{base}/{b}")["offset"] for b in zk.children(base)}


def _members_in_zookeeper(cluster: LocalCluster) -> list[str]:
    with ZkView(cluster.zookeeper_address) as zk:
        return [m["id"] for m in zk.get_json(f"{cluster.zk_root}/consumers/{GROUP}/members")["members"]]


def _read_nothing_while_out(member: Member, out_from: str) -> None:
    """From the line ``out_from`` until its next ``assigned:`` line the process printed no record: it read
    nothing while it was not a member."""
    lines = member.text().splitlines()
    start = next(i for i, line in enumerate(lines) if line == out_from)
    rest = lines[start:]
    back = next((i for i, line in enumerate(rest) if line.startswith("assigned: ")), len(rest))
    assert not [line for line in rest[:back] if line.count("\t") == 2], rest[:back]


def _check_sampler(sampler: OwnershipSampler, seconds: float) -> None:
    assert not sampler.errors, sampler.errors[:3]
    assert len(sampler.samples) >= seconds * 5, len(sampler.samples)  # every 100 ms, on a loaded machine
    assert sampler.server_doubled() == []  # the coordinator never gave a bucket to two members
    assert [(s.at, s.doubled) for s in sampler.samples if s.doubled] == []  # no two live processes read one


# ---------------------------------------------------------------- finding 7: one process per instance id
def test_a_second_process_with_a_held_instance_id_is_refused_and_never_reads(
    cluster_factory, members, tmp_path
) -> None:
    """Before: the two processes replaced each other for ever (both read the same buckets, printed the same
    records, only "fenced ... rejoining" warnings). Now the second one prints one line and exits 1, the
    first keeps its buckets, no rebalance, every record printed exactly once."""
    _, bootstrap, admin, group = _setup(cluster_factory, members, tmp_path)
    produced = _produce(bootstrap, 0, 300)
    s1 = group.start("s1", "--instance-id", "worker-1", session_timeout=SESSION)
    b = group.start("b", session_timeout=SESSION)
    before = _settled(admin, [s1, b])
    wait_until(lambda: _printed(group) >= produced, 60, message="the first records read")
    started = time.monotonic()
    with OwnershipSampler(bootstrap, GROUP, lambda: [m for m in group.started if m.handle.alive()]) as sampler:
        twin = group.start("twin", "--instance-id", "worker-1", session_timeout=SESSION)
        assert twin.handle.wait_exit(60.0), "the second process with instance id worker-1 is still running"
        produced |= _produce(bootstrap, 300, 300)
        wait_until(lambda: _printed(group) >= produced, 60, message="the records produced after")
    _check_sampler(sampler, time.monotonic() - started)
    assert twin.handle.returncode == 1
    said = [line for line in twin.text().splitlines() if "UNRELEASED_INSTANCE_ID" in line]
    assert len(said) == 1 and said[0].startswith("fluss-py: UNRELEASED_INSTANCE_ID: instance id 'worker-1'"), said
    assert "fenced" not in twin.text() and not twin.table_changes() and not twin.records()
    assert all(not s.accounts.get("twin") for s in sampler.samples)  # it never owned a bucket
    after = admin.describe_group_members(GROUP)
    assert _owned(after) == _owned(before) and after.group_epoch == before.group_epoch  # nothing moved
    assert "fenced" not in s1.text() and "fenced" not in b.text()
    read = Counter((bucket, offset) for m in group.started for bucket, offset, _ in m.records())
    assert len(read) == 600 and set(read.values()) == {1}  # every record once: no bucket was read twice


def test_a_static_member_killed_without_leaving_holds_its_id_until_its_session_ran_out(
    cluster_factory, members, tmp_path
) -> None:
    """kill -9 of a static member: its restart is refused (exit 1, one line, the group unchanged) while its
    session runs; once it ran out, its buckets went to the other member and a restart joins anew. (A
    restart after SIGTERM, a static leave, keeps the buckets: tests/fault/test_group_membership.py.)"""
    session = 15.0  # a CLI process starts in 1-3 s on a loaded machine: well inside the session
    _, _, admin, group = _setup(cluster_factory, members, tmp_path)
    s1 = group.start("s1", "--instance-id", "worker-1", session_timeout=session)
    b = group.start("b", session_timeout=session)
    before = _settled(admin, [s1, b])
    s1.handle.kill()
    killed_at = time.monotonic()
    refused = group.start("s1", "--instance-id", "worker-1", session_timeout=session)
    assert refused.handle.wait_exit(60.0) and refused.handle.returncode == 1
    assert time.monotonic() - killed_at < session, "the refused restart came after the session ran out"
    said = [line for line in refused.text().splitlines() if "UNRELEASED_INSTANCE_ID" in line]
    assert len(said) == 1 and not refused.table_changes(), refused.text()
    after = admin.describe_group_members(GROUP)
    assert after.group_epoch == before.group_epoch and _owned(after) == _owned(before)  # nothing changed
    dynamic = next(m.member_id for m in before.members if not m.instance_id)
    wait_until(lambda: _owned(admin.describe_group_members(GROUP)) == {dynamic: set(range(BUCKETS))},
               session + 30, message="b owns every bucket")  # fmt: skip
    s1_new = group.start("s1", "--instance-id", "worker-1", session_timeout=session)
    view = _settled(admin, [s1_new, b])
    assert sorted(len(m.assigned) for m in view.members) == [6, 6]


# ---------------------------------------------------------------- finding 8: stuck members
def _stuck_member(cluster_factory, members, tmp_path, *, max_poll: float = 300.0, **coordinator: str):
    cluster, bootstrap, admin, group = _setup(cluster_factory, members, tmp_path, **coordinator)
    stuck_file = tmp_path / "stuck"
    a = group.start_stuck("a", bootstrap, stuck_file, session_timeout=SESSION, max_poll_interval=max_poll)
    return cluster, bootstrap, admin, group, stuck_file, a


def _stuck(a: Member, stuck_file: Path) -> None:
    stuck_file.touch()
    wait_until(lambda: "stuck" in a.text().splitlines(), 30, message="the application is stuck")


def _a_dropped_after_unstuck(a: Member) -> bool:
    lines = a.text().splitlines()
    return "unstuck" in lines and any(line.startswith("revoked: ") for line in lines[lines.index("unstuck") :])


def test_a_member_stuck_in_a_revocation_is_fenced_after_the_rebalance_timeout(
    cluster_factory, members, tmp_path
) -> None:
    """a owns every bucket, its application stops polling (heartbeats go on), b joins: a is asked to give
    up half and never does. Before: b owned nothing 20 s later and a's commit of the buckets being revoked
    was accepted. Now, after group.rebalance.timeout, a is fenced: removed from the group in ZooKeeper, b
    owns every bucket and reads their records, a's commit is refused and the offsets in ZooKeeper stay as
    they were; when a's application polls again it drops everything and joins again."""
    cluster, bootstrap, admin, group, stuck_file, a = _stuck_member(
        cluster_factory, members, tmp_path, **{"group.rebalance.timeout": f"{REBALANCE:g}s"}
    )
    produced = _produce(bootstrap, 0, 300)
    _settled(admin, [a])
    wait_until(lambda: _printed(group) >= produced, 60, message="a read the first records")
    table_id = next(iter(admin.describe_group_members(GROUP).members[0].assigned)).table_id
    wait_until(lambda: sum(_offsets_in_zookeeper(cluster, table_id).values()) == 300, 30, message="a committed")
    _stuck(a, stuck_file)
    _, a_buckets, a_id, a_epoch = [c for c in a.table_changes() if c[0] == "assigned"][-1]
    watched = lambda: [m for m in group.started if m is not a or _a_dropped_after_unstuck(a)]  # noqa: E731
    started = time.monotonic()
    with OwnershipSampler(bootstrap, GROUP, watched) as sampler:
        b = group.start("b", session_timeout=SESSION)
        wait_until(lambda: len(admin.describe_group_members(GROUP).members) == 2, 30, message="b joined")
        joined = time.monotonic()
        wait_until(lambda: b.owns() == set(range(BUCKETS)), REBALANCE + 30, interval=0.05,
                   message=lambda: f"b owns every bucket: {admin.describe_group_members(GROUP)}")  # fmt: skip
        took = time.monotonic() - joined
        print(f"a stuck mid-revocation -> fenced, b owns all {BUCKETS} buckets {took:.2f} s after joining "
              f"(rebalance timeout {REBALANCE:g} s, session {SESSION:g} s)")  # fmt: skip
        assert took >= REBALANCE - 0.5  # not before the timeout: until then the buckets were a's
        [b_member] = admin.describe_group_members(GROUP).members
        assert _members_in_zookeeper(cluster) == [b_member.member_id] and b_member.member_id != a_id
        # the zombie's commit of what it was asked to give up: refused, ZooKeeper's offsets unchanged
        committed = _offsets_in_zookeeper(cluster, table_id)
        with pytest.raises(UnknownMemberIdError, match="rebalance timeout"):
            commit_as(bootstrap, GROUP, {tb: 0 for tb in a_buckets}, a_id, a_epoch)
        assert _offsets_in_zookeeper(cluster, table_id) == committed
        produced |= _produce(bootstrap, 300, 300)
        wait_until(lambda: {v for _, _, v in b.records()} >= produced - {v for _, _, v in a.records()}, 60,
                   message="b read every record a had not")  # fmt: skip
        stuck_file.unlink()  # a's application polls again: it drops everything and joins again
        view = _settled(admin, [a, b])
    _check_sampler(sampler, time.monotonic() - started)
    assert sorted(len(m.assigned) for m in view.members) == [6, 6]
    _read_nothing_while_out(a, "stuck")
    assert not [line for line in a.text().splitlines() if line.startswith("commit refused")]  # it never tried
    wait_until(lambda: _printed(group) >= produced, 60, message="every record read")
    coordinator = "".join(cluster.log_text(n) for n in cluster.names(COORDINATOR))
    assert f"member {a_id} removed: it did not acknowledge the revocation" in coordinator


def test_a_member_whose_application_stops_polling_leaves_after_max_poll_interval(
    cluster_factory, members, tmp_path
) -> None:
    """a and b share the buckets; a's application stops polling (its heartbeats go on, no rebalance is in
    progress, the rebalance timeout is the default 60 s). Before: a held its buckets for ever and their new
    records were read by nobody. Now a leaves after max_poll_interval, b owns every bucket and reads them;
    when a polls again it drops its buckets (no commit) and joins again."""
    _, bootstrap, admin, group, stuck_file, a = _stuck_member(cluster_factory, members, tmp_path, max_poll=MAX_POLL)
    b = group.start("b", session_timeout=SESSION)
    _settled(admin, [a, b])
    produced = _produce(bootstrap, 0, 300)
    wait_until(lambda: _printed(group) >= produced, 60, message="the first records read")
    a_buckets = {TableBucket(tb.table_id, tb.bucket) for tb in a.owns_table_buckets()}
    _stuck(a, stuck_file)
    watched = lambda: [m for m in group.started if m is not a or _a_dropped_after_unstuck(a)]  # noqa: E731
    started = time.monotonic()
    with OwnershipSampler(bootstrap, GROUP, watched) as sampler:
        stuck_at = time.monotonic()
        produced |= _produce(bootstrap, 300, 300)  # half of them in a's buckets
        wait_until(lambda: b.owns() == set(range(BUCKETS)), MAX_POLL + 30, interval=0.05,
                   message=lambda: f"b owns every bucket: {admin.describe_group_members(GROUP)}")  # fmt: skip
        print(f"a stopped polling -> left, b owns all {BUCKETS} buckets {time.monotonic() - stuck_at:.2f} s later "
              f"(max_poll_interval {MAX_POLL:g} s)")  # fmt: skip
        wait_until(lambda: _printed(group) >= produced, 60, message="b read a's buckets' records")
        assert {bucket for bucket, _, v in b.records() if int(v[1:]) >= 300} >= {tb.bucket for tb in a_buckets}
        stuck_file.unlink()
        view = _settled(admin, [a, b])
    _check_sampler(sampler, time.monotonic() - started)
    assert sorted(len(m.assigned) for m in view.members) == [6, 6]
    assert "poll() was not called for more than max_poll_interval" in a.text()
    _read_nothing_while_out(a, "stuck")
