"""Every znode codec round-trips and every path sits under the configured root."""

from fluss_py.types import CoordinatorLeaderInfo, LeaderAndIsr
from fluss_py.zk import codecs
from fluss_py.zk import paths as p


def test_fixed_paths_match_design():
    root = "/fluss"
    assert p.CoordinatorServerZNode.prefix_path(root) == "/fluss/coordinator/servers/server_"
    assert p.CandidateZNode.prefix_path(root) == "/fluss/coordinator/election/candidate_"
    assert p.CoordinatorLeaderZNode.path(root) == "/fluss/coordinator/leader"
    assert p.CoordinatorEpochZNode.path(root) == "/fluss/coordinator/epoch"
    assert p.TabletServerZNode.path(root, 3) == "/fluss/tabletservers/ids/3"


def test_declared_paths_use_root():
    root = "/other"
    for path in [
        p.DatabaseZNode.path(root, "fluss"),
        p.TableZNode.path(root, "fluss", "t"),
        p.TableIdCounterZNode.path(root),
        p.WriterIdCounterZNode.path(root),
        p.TableAssignmentZNode.path(root, 7),
        p.LeaderIsrZNode.path(root, 7, 0),
        p.ConsumerOffsetZNode.path(root, "g", 7, 0),
        p.RebalanceZNode.path(root),
        *p.persistent_parents(root),
    ]:
        assert path.startswith("/other/")
    assert p.LeaderIsrZNode.path(root, 7, 2) == "/other/tabletservers/tables/7/buckets/2/leader_isr"


def test_codecs_round_trip():
    leader = CoordinatorLeaderInfo(2, 5, "127.0.0.1", 9123, 9124)
    assert p.CoordinatorLeaderZNode.decode(p.CoordinatorLeaderZNode.encode(leader)) == leader
    assert b'"address":"127.0.0.1:9123"' in p.CoordinatorLeaderZNode.encode(leader)
    assert p.CoordinatorEpochZNode.decode(p.CoordinatorEpochZNode.encode(12)) == 12
    assert p.CoordinatorEpochZNode.encode(3) == b"3"
    reg = codecs.TabletServerRegistration("127.0.0.1", 9122, 9125, "r1", 1234)
    assert p.TabletServerZNode.decode(p.TabletServerZNode.encode(reg)) == reg
    creg = codecs.CoordinatorRegistration(1, "h", 1, 2)
    assert p.CoordinatorServerZNode.decode(p.CoordinatorServerZNode.encode(creg)) == creg
    lai = LeaderAndIsr(1, 3, (1, 2, 3), 5, 7)
    assert p.LeaderIsrZNode.decode(p.LeaderIsrZNode.encode(lai)) == lai
    assign = {0: (1, 2, 3), 1: (2, 3, 1)}
    assert p.TableAssignmentZNode.decode(p.TableAssignmentZNode.encode(assign)) == assign
    assert p.ConsumerOffsetZNode.decode(p.ConsumerOffsetZNode.encode(42, 99)) == (42, 99)
    assert p.DatabaseZNode.decode(p.DatabaseZNode.encode(77)) == 77
    assert p.TableZNode.decode(p.TableZNode.encode({"table_id": 1})) == {"table_id": 1}


def test_sequence_of():
    assert codecs.sequence_of("candidate_0000000042") == 42
    assert codecs.sequence_of("server_0000000001") == 1


def test_leader_isr_bytes_are_those_of_the_json_codec():
    """The leader_isr record is formatted directly (hot in a failover); its bytes stay dump_json's."""
    for lai in [
        LeaderAndIsr(1, 3, (1, 2, 3), 5, 7),
        LeaderAndIsr(-1, 0, (), 0, 0),
        LeaderAndIsr(-1, 12, (3,), 2**31, 2**40),
        LeaderAndIsr(10_000, 2**62, (10_000, 1, 7), 1, 0),
    ]:
        expected = codecs.dump_json({"version": 1, "leader": lai.leader, "leader_epoch": lai.leader_epoch,
                                     "isr": list(lai.isr), "coordinator_epoch": lai.coordinator_epoch,
                                     "bucket_epoch": lai.bucket_epoch})  # fmt: skip
        assert p.LeaderIsrZNode.encode(lai) == expected
        assert p.LeaderIsrZNode.decode(expected) == lai
