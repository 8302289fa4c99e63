"""Pure parts of the test hosts: addresses, names, the ensemble's zoo.cfg, a server's host and command prefix."""

import argparse
from pathlib import Path

import pytest

from fluss_py.cli.cluster_net import parse_ms, parse_percent
from fluss_py.testing.cluster_file import ClusterRecord
from fluss_py.testing.layout import server_record
from fluss_py.testing.netns import NETWORK, HostNetwork, host_address, new_prefix
from fluss_py.testing.zookeeper import EnsembleMember, zoo_cfg


def test_host_addresses_stay_inside_the_benchmarking_range():
    import ipaddress

    assert host_address(0) == "198.18.0.10"
    assert ipaddress.ip_address(host_address(5000)) in NETWORK
    with pytest.raises(ValueError):
        host_address(NETWORK.num_addresses)


def test_prefixes_are_per_run_and_names_carry_them():
    a, b = new_prefix(), new_prefix()
    assert a != b and a.startswith("fpy") and len(a) == 9
    net = HostNetwork(a, {"zookeeper-1": "198.18.0.10"})
    assert net.ns("zookeeper-1") == f"{a}-zookeeper-1"
    assert net.exec_prefix("zookeeper-1") == ["ip", "netns", "exec", f"{a}-zookeeper-1"]
    assert HostNetwork.from_dict(net.to_dict()) == net


def test_ensemble_zoo_cfg_lists_every_member_and_binds_the_members_address():
    members = [EnsembleMember(i, f"198.18.0.{9 + i}", 2888, 3888) for i in (1, 2, 3)]
    text = zoo_cfg(Path("/d"), 2181, 500, host="198.18.0.10", ensemble=members)
    lines = dict(line.split("=", 1) for line in text.splitlines() if line)
    assert lines["clientPortAddress"] == "198.18.0.10"
    assert lines["server.3"] == "198.18.0.12:2888:3888"
    assert {"initLimit", "syncLimit"} <= set(lines)
    assert "server.1" not in zoo_cfg(Path("/d"), 2181, 500)


def test_a_server_on_a_test_host_binds_and_advertises_its_address_and_runs_in_its_namespace():
    rec = server_record(
        Path("/c"),
        "tablet-server",
        1,
        zookeeper="198.18.0.10:2181,198.18.0.11:2181",
        zk_root="/fluss",
        rpc_port=9123,
        http_port=9124,
        launcher=["py"],
        conf_dir=None,
        overrides={},
        host="198.18.0.12",
        exec_prefix=["ip", "netns", "exec", "fpyabcdef-tablet-server-1"],
    )
    assert rec.argv[:5] == ["ip", "netns", "exec", "fpyabcdef-tablet-server-1", "py"]
    assert "bind.host=198.18.0.12" in rec.argv and "advertised.host=198.18.0.12" in rec.argv
    assert rec.rpc_address == "198.18.0.12:9123"


def test_cluster_file_keeps_the_test_hosts():
    rec = ClusterRecord("/c", "a:1,b:1", "/fluss", netns={"prefix": "fpyabcdef", "hosts": {}, "detached": True})
    assert ClusterRecord.from_json(rec.to_json()).netns == rec.netns


def test_cli_netem_values():
    assert parse_ms("50ms") == 50 and parse_ms("0.2s") == 200
    assert parse_percent("10%") == 10
    with pytest.raises(argparse.ArgumentTypeError):
        parse_percent("101%")
