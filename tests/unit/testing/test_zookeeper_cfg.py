"""Pure parts of the harness: zoo.cfg text, the JVM command line, wait_until."""

from pathlib import Path

import pytest

from fluss_py.testing.procs import WaitTimeout, wait_until
from fluss_py.testing.zookeeper import ZooKeeperProcess, zoo_cfg


def test_zoo_cfg_is_loopback_only_without_admin_server_and_with_watch_4lw():
    text = zoo_cfg(Path("/d/data"), 21811, 500)
    lines = dict(line.split("=", 1) for line in text.splitlines() if line)
    assert lines["tickTime"] == "500"
    assert lines["clientPort"] == "21811"
    assert lines["clientPortAddress"] == "127.0.0.1"
    assert lines["admin.enableServer"] == "false"
    assert {"srvr", "wchc", "wchs", "ruok", "mntr"} <= set(lines["4lw.commands.whitelist"].split(","))
    assert lines["dataDir"] == "/d/data"


def test_command_line_uses_serial_gc_bounded_heap_and_quorum_peer_main(tmp_path):
    zk = ZooKeeperProcess(tmp_path, port=21812)
    argv = zk.command()
    assert "-Xmx256m" in argv and "-XX:+UseSerialGC" in argv
    assert argv[-2:] == ["org.apache.zookeeper.server.quorum.QuorumPeerMain", str(tmp_path / "zoo.cfg")]
    assert argv[argv.index("-cp") + 1].startswith("/usr/share/java/zookeeper.jar")
    assert zk.address == "127.0.0.1:21812"


def test_wait_until_returns_the_value_and_times_out_with_the_last_error():
    calls = iter([0, None, 7])
    assert wait_until(lambda: next(calls), 2.0, interval=0.001) == 7

    def boom():
        raise ValueError("not yet")

    with pytest.raises(WaitTimeout, match="boom") as info:
        wait_until(boom, 0.05, interval=0.01)
    assert isinstance(info.value.__cause__, ValueError)
