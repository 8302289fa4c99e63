"""The server-tag room on the coordinator harness (in-memory ZooKeeper, recording gateway; docs/rebalance.md §12):
fenced writes of the tags node, refusals that leave every node as it was, the replacement of a dead server back
to RF with I3 checked after each step, replace-dead-after, temporary-offline, cancel, a new leader keeping tags.
"""

from collections import Counter

import pytest

from fluss_py.coordinator.events import (
    AlterTableBuckets,
    CancelRebalance,
    CreateTable,
    DescribeServerTags,
    SetServerTag,
    StartRebalance,
)
from fluss_py.coordinator.rebalance.progress import RebalanceStatus
from fluss_py.coordinator.table_alter import TableAlter
from fluss_py.coordinator.tag_room import ServerTagRoom
from fluss_py.errors import (
    ErrorCode,
    InvalidRebalancePlanError,
    InvalidRequestError,
    InvalidServerTagError,
    TabletServerNotExistError,
)
from fluss_py.types import TablePath
from fluss_py.zk.paths import ServerTagsZNode
from fluss_py.zk.values import ZkError

from .harness import ROOT, Harness, fresh_zk
from .rebalance.rig import Rig, adjust, make

PERM, TEMP = "permanent-offline", "temporary-offline"


class _Loop:
    def register(self, *_a) -> None:
        pass

    def put(self, _e) -> None:
        pass


async def room_on(rig: Rig, **kw) -> ServerTagRoom:
    room = ServerTagRoom(rig.proc, rig.ex, clock=rig.clock, **kw)
    room.install(_Loop())
    await room.on_started()
    return room


def stored(rig: Harness) -> dict:
    data = rig.zk.nodes.get(ServerTagsZNode.path(ROOT))
    return ServerTagsZNode.decode(data[0]) if data else {}


def serving(rig: Rig) -> dict:
    """Per bucket: its replicas on live untagged servers that are in its ISR (what acks=all counts)."""
    live, tagged = rig.proc.live(), rig.proc.view.tagged
    out = {}
    for tb, b in rig.proc.view.buckets.items():
        isr = b.leader_and_isr.isr
        out[tb] = sum(1 for r in b.replicas if r in live and r not in tagged and r in isr)
    return out


async def replace_to_end(rig: Rig, room: ServerTagRoom, limit: int = 300) -> int:
    """Drive the replacement: targets catch up (their leader's AdjustIsr), ticks and checks run; I3 after every
    step (no bucket's serving count ever drops). Returns the steps taken."""
    before = serving(rig)
    for step in range(limit):
        if not rig.ex.running:
            return step
        if await rig.catch_up() == 0:
            await rig.ex.tick()
            await room.check()
        now = serving(rig)
        assert all(now[tb] >= before[tb] for tb in now), "a bucket lost a serving replica"
        before = now
    raise AssertionError("the replacement did not finish")


@pytest.fixture
async def four():
    """4 servers, 24 buckets RF 3 (each server holds 18 replicas)."""
    rig, table_id = await make(servers=(1, 2, 3, 4), buckets=24)
    rig.gateway.clear()
    yield rig, table_id
    await rig.channel.close()


# ---------------------------------------------------------------- refusals write nothing


async def test_refusals_leave_every_node_unchanged(four):
    rig, _ = four
    room = await room_on(rig)
    await rig.kill(3)
    await rig.kill(4)  # 1 and 2 serve every bucket holding 3 or 4
    before = rig.zk.snapshot()
    with pytest.raises(TabletServerNotExistError):
        await room.set_tag(SetServerTag(9, PERM))
    with pytest.raises(TabletServerNotExistError):
        await room.set_tag(SetServerTag(9, "none"))
    with pytest.raises(InvalidServerTagError, match="min ISR") as e:
        await room.set_tag(SetServerTag(1, TEMP))  # buckets on 1, 2 and a dead one: 2 -> 1 serving
    assert e.value.code is ErrorCode.INVALID_SERVER_TAG
    with pytest.raises(InvalidRequestError):
        await room.set_tag(SetServerTag(3, "gone"))
    assert rig.zk.snapshot() == before and room.tags == {} and rig.proc.view.tagged == {}


async def test_the_last_live_server_is_refused():
    zk, fence = fresh_zk()
    rig = Rig(zk, {1: "", 2: ""}, fence)  # no table: only the "last live server" rule can refuse
    await rig.start()
    room = await room_on(rig)
    await room.set_tag(SetServerTag(2, TEMP))
    before = rig.zk.snapshot()
    with pytest.raises(InvalidServerTagError, match="last live"):
        await room.set_tag(SetServerTag(1, PERM))
    assert rig.zk.snapshot() == before
    await rig.channel.close()


# ---------------------------------------------------------------- a dead server replaced


async def test_a_dead_server_tagged_permanent_offline_is_replaced_to_rf(four):
    rig, table_id = four
    room = await room_on(rig)
    await rig.kill(3)
    answer = await room.set_tag(SetServerTag(3, PERM))
    assert answer["tag"] == PERM and "18 replica(s) to move" in answer["message"]
    node = stored(rig)["3"]
    assert node["tag"] == PERM and node["by"] == "operator" and node["since_ms"] > 0
    assert rig.ex.running and rig.ex.progress.replacing == (3,)
    assert rig.node()["replacing"] == [3] and rig.node()["status"] == "REBALANCING"
    moves = rig.ex.progress.plan.moves
    assert {m.from_server for m in moves} == {3} and not {m.to_server for m in moves} & {3}
    await replace_to_end(rig, room)
    assert rig.ex.progress.status is RebalanceStatus.COMPLETED
    for tb, b in rig.proc.view.buckets.items():  # I5
        assert sorted(b.replicas) == [1, 2, 4] and sorted(b.leader_and_isr.isr) == [1, 2, 4], tb
        assert rig.zk_assignment(table_id)[tb.bucket] == b.replicas
    assert room.to_replace() == 0
    view = await room.describe(DescribeServerTags())
    three = next(s for s in view["servers"] if s["id"] == 3)
    assert three == {"id": 3, "tag": PERM, "by": "operator", "since_ms": node["since_ms"], "reason": "",
                     "live": False, "replicas": 0, "leaders": 0}  # fmt: skip
    assert view["replacement"]["status"] == "COMPLETED" and view["to_replace"] == 0


async def test_a_rebalance_is_refused_while_a_tagged_server_holds_replicas(four):
    rig, _ = four
    room = await room_on(rig)
    await room.set_tag(SetServerTag(2, TEMP))
    with pytest.raises(InvalidRebalancePlanError, match="tagged temporary-offline"):
        await rig.ex.start_rebalance(StartRebalance())


async def test_replace_dead_after_tags_and_replaces_by_itself(four):
    rig, _ = four
    room = await room_on(rig, replace_dead_after=600.0)
    await rig.kill(4)
    rig.clock.now += 599
    await room.check()
    assert room.tags == {} and not rig.ex.running
    rig.clock.now += 2
    await room.check()
    entry = stored(rig)["4"]
    assert entry["by"] == "auto" and "dead for 601s" in entry["reason"] and room.auto_tagged == 1
    assert rig.ex.running and rig.ex.progress.replacing == (4,)
    await replace_to_end(rig, room)
    assert all(4 not in b.replicas and len(b.replicas) == 3 for b in rig.proc.view.buckets.values())


async def test_a_server_back_before_the_deadline_is_not_tagged(four):
    rig, _ = four
    room = await room_on(rig, replace_dead_after=600.0)
    await rig.kill(4)
    rig.clock.now += 300
    await rig.revive(4)
    rig.clock.now += 400
    await room.check()
    assert room.tags == {} and stored(rig) == {}


async def test_cancel_stops_the_replacement_until_the_server_is_tagged_again(four):
    rig, _ = four
    room = await room_on(rig)
    await rig.kill(3)
    await room.set_tag(SetServerTag(3, PERM))
    await rig.ex.cancel_rebalance(CancelRebalance())
    assert rig.ex.progress.status is RebalanceStatus.CANCELED
    rig.clock.now += 100
    await room.check()
    assert not rig.ex.running  # not restarted by itself
    answer = await room.set_tag(SetServerTag(3, PERM))
    assert "already tagged" in answer["message"] and rig.ex.running


async def test_untagging_a_server_being_replaced_cancels_the_replacement(four):
    rig, _ = four
    room = await room_on(rig)
    await rig.kill(3)
    await room.set_tag(SetServerTag(3, PERM))
    await room.set_tag(SetServerTag(3, "none"))
    assert rig.ex.progress.status is RebalanceStatus.CANCELED and "no longer tagged" in rig.ex.progress.message
    assert stored(rig) == {} and rig.proc.view.tagged == {}
    assert all(len(b.replicas) == 3 for b in rig.proc.view.buckets.values())  # open moves rolled back


# ---------------------------------------------------------------- temporary-offline


async def test_temporary_offline_moves_leaderships_and_places_nothing_new(four):
    rig, _ = four
    room = await room_on(rig)
    assert rig.proc.view.buckets_led_by(2)
    await room.set_tag(SetServerTag(2, TEMP))
    assert rig.proc.view.buckets_led_by(2) == []
    for b in rig.proc.view.buckets.values():  # ISRs unchanged: 2 still follows
        assert sorted(b.leader_and_isr.isr) == sorted(b.replicas)
    table_id = await rig.proc.create_table(CreateTable(TablePath("fluss", "fresh"), num_buckets=12,
                                                       replication_factor=3))  # fmt: skip
    placed = Counter(s for tb, b in rig.proc.view.buckets.items() if tb.table_id == table_id for s in b.replicas)
    assert placed[2] == 0 and set(placed) == {1, 3, 4}
    await TableAlter(rig.proc).alter(AlterTableBuckets(TablePath("fluss", "fresh"), 24))  # added buckets too
    added = [b.replicas for tb, b in rig.proc.view.buckets.items() if tb.table_id == table_id and tb.bucket >= 12]
    assert len(added) == 12 and all(2 not in r for r in added)
    # an election after a failure may pick it; the next check moves it off again
    await rig.kill(1)
    await room.check()
    assert rig.proc.view.buckets_led_by(2) == []
    await room.set_tag(SetServerTag(2, "none"))
    assert stored(rig) == {} and rig.proc.view.tagged == {}


async def test_a_tagged_server_does_not_take_back_a_leadership_it_may_not_hold(four):
    rig, _ = four
    room = await room_on(rig)
    await room.set_tag(SetServerTag(1, TEMP))
    led = rig.proc.view.buckets_led_by(1)
    assert led == []
    # an AdjustIsr from the current leader is still accepted (1 keeps replicating while up)
    tb, b = next((tb, b) for tb, b in rig.proc.view.buckets.items() if 1 in b.replicas)
    lai = b.leader_and_isr
    resp = await rig.proc.adjust_isr(adjust(lai.leader, tb, lai.leader_epoch, lai.bucket_epoch, list(lai.isr)))
    assert resp.buckets[0].error.code == ErrorCode.NONE


# ---------------------------------------------------------------- durability


async def test_a_new_leader_keeps_the_tags_and_the_replacement(four):
    rig, _ = four
    room = await room_on(rig)
    await rig.kill(3)
    await room.set_tag(SetServerTag(3, PERM))
    await rig.catch_up()
    # a new leadership on the same ZooKeeper: a new fence, processor, executor and room
    fence = rig.zk.fence(2)
    servers = {s: "" for s in rig.ctx.tablet_servers}
    rig2 = Rig(rig.zk, servers, fence, clock=rig.clock)
    room2 = ServerTagRoom(rig2.proc, rig2.ex, clock=rig2.clock)
    room2.install(_Loop())
    await rig2.start()
    assert room2.loaded and room2.tags[3].tag.value == PERM and rig2.proc.view.tagged == {3: PERM}
    assert rig2.ex.running and rig2.ex.progress.replacing == (3,)
    await replace_to_end(rig2, room2)
    assert all(3 not in b.replicas for b in rig2.proc.view.buckets.values())
    await rig2.channel.close()


async def test_an_unreadable_tags_node_is_never_written_over(four, caplog):
    rig, _ = four
    path = ServerTagsZNode.path(ROOT)
    rig.zk.put(path, b'{"version":1,"tags":{"3":{"tag":"gone"}}}')  # a hand edit gone wrong
    room = await room_on(rig)
    assert not room.loaded and rig.proc.view.tagged == {}
    await room.check()
    assert sum("does not decode" in r.message for r in caplog.records) == 1  # logged once, not every check
    before = rig.zk.snapshot()
    with pytest.raises(ZkError, match="does not decode"):
        await room.set_tag(SetServerTag(2, TEMP))
    assert rig.zk.snapshot() == before
    rig.zk.put(path, ServerTagsZNode.encode({"2": {"tag": TEMP}}))  # fixed by the operator
    await room.check()
    assert room.loaded and rig.proc.view.tagged == {2: TEMP} and rig.proc.view.buckets_led_by(2) == []


async def test_an_operators_untag_is_not_undone_by_replace_dead_after(four):
    rig, _ = four
    room = await room_on(rig, replace_dead_after=600.0)
    await rig.kill(4)
    rig.clock.now += 601
    await room.check()
    assert room.tags[4].by == "auto" and rig.ex.running
    await room.set_tag(SetServerTag(4, "none"))  # the operator expects it back: stop replacing it
    assert rig.ex.progress.status is RebalanceStatus.CANCELED
    rig.clock.now += 300
    await room.check()
    assert 4 not in room.tags  # its clock restarted at the operator's word
    rig.clock.now += 301
    await room.check()
    assert room.tags[4].by == "auto"  # dead for 600 s after it: tagged again


async def test_an_emptied_dead_server_is_never_tagged_again(four):
    rig, _ = four
    room = await room_on(rig, replace_dead_after=600.0)
    await rig.kill(4)
    rig.clock.now += 601
    await room.check()
    await replace_to_end(rig, room)
    await room.set_tag(SetServerTag(4, "none"))
    rig.clock.now += 10_000
    await room.check()
    assert 4 not in room.tags and stored(rig) == {}  # it holds nothing: nothing to replace
