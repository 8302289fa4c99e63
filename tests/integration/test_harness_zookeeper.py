"""The harness itself: the port allocator and a real ZooKeeperProcess (start, 4lw, stop, restart)."""

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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.listen()
        assert not port_is_free(port)
        alloc = PortAllocator(low=port, high=port + 2)
        got = alloc.allocate()
        assert got == port + 1 or not port_is_free(port + 1)
        assert got != port


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
