"""The harness itself: the port allocator and a real ZooKeeperProcess (start, 4lw, stop, restart)."""

import random
import socket

import pytest

from fluss_py.testing.ports import PortAllocator, port_is_free
from fluss_py.testing.zookeeper import ZooKeeperProcess, zookeeper_installed

pytestmark = pytest.mark.integration


def test_allocator_never_repeats_and_skips_busy_ports():
    alloc = PortAllocator(seed=1)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy_port = busy.getsockname()[1]
        alloc.reserve(busy_port)
        ports = alloc.allocate_many(200)
    assert len(set(ports)) == 200
    assert busy_port not in ports
    assert all(alloc.low <= p < alloc.high for p in ports)


def test_allocator_skips_a_listening_port():
    # Two adjacent ports below the ephemeral range: one held by a listener, the other free. Whatever the
    # allocator's random start, it must hand out the free one. (A range over an ephemeral port raced with
    # other processes' outgoing connections.)
    for base in random.Random().sample(range(20000, 30000), 50):
        with socket.socket() as busy, socket.socket() as probe:
            try:
                busy.bind(("127.0.0.1", base))
                busy.listen()
                probe.bind(("127.0.0.1", base + 1))
            except OSError:
                continue
            probe.close()
            assert not port_is_free(base)
            for seed in range(4):
                assert PortAllocator(low=base, high=base + 2, seed=seed).allocate() == base + 1
            return
    pytest.fail("found no pair of adjacent loopback ports with the second one free")


@pytest.mark.skipif(not zookeeper_installed(), reason="ZooKeeper is not installed (make install)")
def test_zookeeper_process_starts_answers_4lw_and_stops(tmp_path):
    zk = ZooKeeperProcess(tmp_path / "zk", tick_time=500)
    with zk:
        assert zk.alive()
        assert "Mode: standalone" in zk.four_letter("srvr")
        assert zk.four_letter("ruok") == "imok"
        assert "not in the whitelist" not in zk.four_letter("wchc")
        pid = zk.pid
    assert not zk.alive()
    assert pid is not None
    zk.start()  # restart on the same port and data dir
    try:
        assert "Mode: standalone" in zk.four_letter("srvr")
    finally:
        zk.kill()
    assert not zk.alive()
