"""Consumer groups that share the work, on real processes (docs/consumer-groups.md).

Real ZooKeeper, real coordinators and tablet servers, and ``fluss-py consume --group`` member processes
(tests/fault/group_support.py) killed with real signals. Ownership is checked twice: the coordinator's
view (``describe_group_members``) and each process's own account (its ``assigned:``/``revoked:`` lines):
no bucket may ever be read by two live members at once once the group settled, and every record produced
must be printed by some member (at-least-once: nothing between the last commit and a kill is skipped).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from fluss_py.client import SyncAdmin
from fluss_py.client.groups import GroupMembers
from fluss_py.errors import FencedMemberEpochError, UnknownMemberIdError
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.procs import wait_until
from tests.fault.group_support import FLUSS_PY, Member, Members, commit_as, produce, setup_group

pytestmark = pytest.mark.fault

TABLE = "fluss.shared"
BUCKETS = 12
GROUP = "workers"
SESSION = 3.0
# acceptance: a killed member's buckets owned by the others within its session timeout + 1 s (the session
# from its last heartbeat, then up to two heartbeat intervals of 0.5 s: docs/consumer-groups.md, "Measured")
OWNED_WITHIN_S = SESSION + 1.0


def _setup(cluster_factory, made: list[Members], tmp_path: Path, coordinators: int = 1):
    return setup_group(cluster_factory, made, tmp_path, TABLE, GROUP, BUCKETS, coordinators)


def _produce(bootstrap: str, start: int, count: int) -> set[str]:
    return produce(bootstrap, TABLE, start, count)


def _describe(admin: SyncAdmin) -> GroupMembers:
    return admin.describe_group_members(GROUP)


def _one_owner_each(view: GroupMembers, n_members: int) -> bool:
    """The coordinator's view: ``n_members`` members, every bucket owned by exactly one, group stable."""
    owned = [tb.bucket for m in view.members for tb in m.assigned]
    return len(view.members) == n_members and view.state == "STABLE" and sorted(owned) == list(range(BUCKETS))


def _processes_agree(live: list[Member], view: GroupMembers) -> bool:
    """The processes' own accounts: disjoint, together every bucket, each as the coordinator says."""
    accounts = [m.owns() for m in live]
    together = sorted(b for a in accounts for b in a)
    server = sorted(sorted(tb.bucket for tb in m.assigned) for m in view.members)
    return together == list(range(BUCKETS)) and sorted(sorted(a) for a in accounts) == server


def _settled(admin: SyncAdmin, live: list[Member], timeout: float = 60.0) -> GroupMembers:
    def check() -> GroupMembers | None:
        view = _describe(admin)
        return view if _one_owner_each(view, len(live)) and _processes_agree(live, view) else None

    return wait_until(check, timeout, interval=0.1, message=lambda: f"group settled: {_describe(admin)}")  # type: ignore[return-value]


def _cli(cluster: LocalCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLUSS_PY, *argv, "--dir", str(cluster.directory)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


def _cli_shows_the_members(cluster: LocalCluster, view: GroupMembers) -> None:
    """group describe / list / delete on the live group (docs/consumer-groups.md, Tools)."""
    described = json.loads(_cli(cluster, "group", "describe", GROUP, "--json").stdout)
    assert {m["member_id"]: sorted(m["assigned"]) for m in described["members"]} == {
        m.member_id: sorted(str(tb) for tb in m.assigned) for m in view.members
    }
    assert all(m["client_host"].startswith("ipv4:127.0.0.1:") and m["last_heartbeat_s"] < SESSION
               for m in described["members"])  # fmt: skip
    assert {b["bucket"] for b in described["buckets"]} == set(range(BUCKETS))  # offsets and lag beside them
    text = _cli(cluster, "group", "describe", GROUP)
    assert text.returncode == 0 and all(m.member_id in text.stdout for m in view.members), text
    listed = json.loads(_cli(cluster, "group", "list", "--json").stdout)
    assert listed == [{"group": GROUP, "state": "STABLE", "members": 3}]
    refused = _cli(cluster, "group", "delete", GROUP)
    assert refused.returncode == 1 and "GROUP_NOT_EMPTY" in refused.stderr, refused


def _printed(group: Members) -> set[str]:
    return {value for m in group.started for _, _, value in m.records()}


def test_three_members_split_and_a_killed_members_buckets_move_without_a_gap(
    cluster_factory, members, tmp_path
) -> None:
    cluster, bootstrap, admin, group = _setup(cluster_factory, members, tmp_path)
    produced = _produce(bootstrap, 0, 600)
    a, b, c = (group.start(name, session_timeout=SESSION) for name in "abc")
    view = _settled(admin, [a, b, c])
    assert sorted(len(m.assigned) for m in view.members) == [4, 4, 4]
    wait_until(lambda: _printed(group) >= produced, 60, message="the first 600 records read")
    _cli_shows_the_members(cluster, view)

    # kill -9 c while records keep coming; its buckets must go to a and b, nothing it did not commit lost
    more = _produce(bootstrap, 600, 300)
    c_buckets = c.owns()
    committed_before = {r.table_bucket.bucket: r.committed for r in admin.describe_group(GROUP)}  # <= c's last
    killed_at = time.monotonic()
    c.handle.kill()
    # the coordinator's view (the ownership): a and b own all 12 within c's session timeout + 1 s
    wait_until(lambda: _one_owner_each(_describe(admin), 2), OWNED_WITHIN_S, interval=0.02,
               message=lambda: f"c's buckets owned by a and b: {_describe(admin)}")  # fmt: skip
    took = time.monotonic() - killed_at
    print(f"kill -9 of a member -> its {len(c_buckets)} buckets owned by the others in {took:.2f} s "
          f"(session {SESSION:g} s)")  # fmt: skip
    view = _settled(admin, [a, b])  # and the processes' own accounts agree
    assert sorted(len(m.assigned) for m in view.members) == [6, 6]
    produced |= more | _produce(bootstrap, 900, 300)
    wait_until(lambda: _printed(group) >= produced, 60, message=lambda: f"missing {len(produced - _printed(group))}")
    # duplicates only where c had not committed: its buckets, from (at least) its last commit on
    read = Counter((bucket, offset) for m in group.started for bucket, offset, _ in m.records())
    twice = sorted(key for key, n in read.items() if n > 1)
    assert all(b in c_buckets and o >= committed_before.get(b, 0) for b, o in twice), (twice, committed_before)

    def all_committed() -> bool:
        rows = admin.describe_group(GROUP)
        return len(rows) == BUCKETS and all(r.committed == r.high_watermark for r in rows)

    wait_until(all_committed, 30, message="every bucket committed up to its high watermark")


def test_a_member_paused_past_its_session_is_fenced_and_rejoins(cluster_factory, members, tmp_path) -> None:
    _, bootstrap, admin, group = _setup(cluster_factory, members, tmp_path)
    produced = _produce(bootstrap, 0, 300)
    a, b, c = (group.start(name, session_timeout=SESSION) for name in "abc")
    _settled(admin, [a, b, c])
    wait_until(lambda: _printed(group) >= produced, 60, message="records read")
    _, _, c_id, c_epoch = [ch for ch in c.changes() if ch[0] == "assigned"][-1]
    c_owned = {tb for m in _describe(admin).members if m.member_id == c_id for tb in m.assigned}
    assert {tb.bucket for tb in c_owned} == c.owns()

    c.handle.pause()
    try:
        wait_until(lambda: _one_owner_each(_describe(admin), 2), SESSION + 30, message="c expired")
        produced |= _produce(bootstrap, 300, 300)  # records in c's old buckets, read by their new owners
        # the zombie's credentials: its commit is refused, nothing is written
        with pytest.raises(UnknownMemberIdError):
            commit_as(bootstrap, GROUP, {tb: 0 for tb in c_owned}, c_id, c_epoch)
    finally:
        c.handle.resume()
    # after SIGCONT: its commit is still refused (UNKNOWN_MEMBER_ID, or FENCED_MEMBER_EPOCH once c joined again
    # under its own member id: the zombie's epoch is not the new member's); c learns it was fenced, drops its
    # buckets, joins again
    with pytest.raises((UnknownMemberIdError, FencedMemberEpochError)):
        commit_as(bootstrap, GROUP, {tb: 0 for tb in c_owned}, c_id, c_epoch)
    view = _settled(admin, [a, b, c])
    assert "fenced" in c.text() or "commit refused" in c.text(), c.text()[-2000:]  # by its own account
    rejoined = [ch for ch in c.changes() if ch[0] == "assigned"][-1]
    assert rejoined[2] == c_id and rejoined[2] in {m.member_id for m in view.members}  # the id the client made
    assert rejoined[3] > c_epoch
    wait_until(lambda: _printed(group) >= produced, 60, message="every record read")
    committed = {r.table_bucket.bucket: r.committed for r in admin.describe_group(GROUP)}
    assert all(committed[tb.bucket] > 0 for tb in c_owned)  # the new owners' commits stand, not the zombie's 0


def test_coordinator_kill_mid_rebalance_keeps_one_owner_per_bucket(cluster_factory, members, tmp_path) -> None:
    cluster, bootstrap, admin, group = _setup(cluster_factory, members, tmp_path, coordinators=3)
    produced = _produce(bootstrap, 0, 300)
    live = [group.start(name, session_timeout=10.0) for name in "abc"]
    before = {m.member_id for m in _settled(admin, live).members}
    leader = cluster.coordinator_leader()
    assert leader is not None
    # a rebalance that cannot finish yet: a is paused, so it cannot acknowledge giving up a bucket to d
    live[0].handle.pause()
    try:
        live.append(group.start("d", session_timeout=10.0))
        wait_until(lambda: len(_describe(admin).members) == 4, 30, message="d joined")
        assert _describe(admin).state == "RECONCILING"
        cluster.kill(leader)  # kill -9 with the revocation in flight
    finally:
        live[0].handle.resume()
    view = _settled(admin, live, timeout=90)
    assert sorted(len(m.assigned) for m in view.members) == [3, 3, 3, 3]
    # the new leader continued the group from ZooKeeper: nobody was fenced and had to join again
    assert before <= {m.member_id for m in view.members}
    assert not any("fenced" in m.text() for m in live)
    produced |= _produce(bootstrap, 300, 300)
    wait_until(lambda: _printed(group) >= produced, 60, message="every record read")


def test_a_static_member_restarting_in_time_keeps_its_buckets(cluster_factory, members, tmp_path) -> None:
    _, _, admin, group = _setup(cluster_factory, members, tmp_path)
    s1 = group.start("s1", "--instance-id", "s1", session_timeout=15.0)
    others = [group.start(name, session_timeout=15.0) for name in "ab"]
    before = _settled(admin, [s1, *others])
    by_instance = {m.instance_id: set(m.assigned) for m in before.members}
    dynamic = sorted(sorted(m.assigned, key=str) for m in before.members if not m.instance_id)

    seen = [len(m.changes()) for m in others]
    assert s1.handle.stop(timeout=20.0) == "stopped"  # SIGTERM: it leaves with -2 (kill -9 holds the id: fencing)
    s1_again = group.start("s1", "--instance-id", "s1", session_timeout=15.0)
    after = _settled(admin, [s1_again, *others])
    assert after.group_epoch == before.group_epoch  # no rebalance
    assert {m.instance_id: set(m.assigned) for m in after.members}["s1"] == by_instance["s1"]
    assert sorted(sorted(m.assigned, key=str) for m in after.members if not m.instance_id) == dynamic
    assert not [c for m, n in zip(others, seen, strict=True) for c in m.changes()[n:]]  # the others saw nothing
