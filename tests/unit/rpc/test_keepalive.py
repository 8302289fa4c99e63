"""``rpc.keepalive.*``: the values every role accepts, ``Keepalive``'s own check, and the gRPC arguments they
become on channels and servers (docs/failure-detection.md "Vanished peers"). No sockets."""

from __future__ import annotations

import pytest

from fluss_py import config as cfg
from fluss_py.client.options import ConsumerOptions, ProducerOptions
from fluss_py.errors import ConfigError, ErrorCode
from fluss_py.rpc import channels
from fluss_py.rpc.keepalive import DEFAULT_KEEPALIVE, PERMITTED_PING_INTERVAL_S, Keepalive
from fluss_py.rpc.server import server_options


@pytest.mark.parametrize("role", cfg.ROLES)
@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("rpc.keepalive.time", "0", "1 s .. 2 h"),
        ("rpc.keepalive.time", "0s", "1 s .. 2 h"),
        ("rpc.keepalive.time", "999ms", "1 s .. 2 h"),
        ("rpc.keepalive.time", "3h", "1 s .. 2 h"),
        ("rpc.keepalive.timeout", "0ms", "1 s .. 10 min"),
        ("rpc.keepalive.timeout", "500ms", "1 s .. 10 min"),
        ("rpc.keepalive.timeout", "11min", "1 s .. 10 min"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_key(role, key, value, allowed):
    with pytest.raises(ConfigError) as e:
        cfg.load_config(role, None, {key: value})
    assert e.value.key == key and e.value.code == ErrorCode.INVALID_CONFIG
    assert f"{key}: {value!r} is out of range (allowed: {allowed})" in str(e.value)


@pytest.mark.parametrize("value", ["-1s", "soon", "nan"])
def test_values_that_are_no_duration_are_refused_naming_the_key(value):
    with pytest.raises(ConfigError, match=r"^INVALID_CONFIG: rpc\.keepalive\.time: ") as e:
        cfg.load_config(cfg.TABLET, None, {"rpc.keepalive.time": value})
    assert e.value.key == "rpc.keepalive.time"


def test_every_role_reads_the_keys_and_keepalive_takes_them():
    for role in cfg.ROLES:
        config = cfg.load_config(role, None, {"rpc.keepalive.time": "2s", "rpc.keepalive.timeout": "1500ms"})
        assert Keepalive.from_config(config) == Keepalive(2.0, 1.5)
        assert Keepalive.from_config(cfg.Config(role)) == DEFAULT_KEEPALIVE == Keepalive(10.0, 5.0)


TIME, TIMEOUT = "rpc.keepalive.time", "rpc.keepalive.timeout"


@pytest.mark.parametrize(
    ("time", "timeout", "key"),
    [(0, 5.0, TIME), (0.5, 5.0, TIME), (-1, 5.0, TIME), (float("inf"), 5.0, TIME), (True, 5.0, TIME),
     ("10s", 5.0, TIME), (10.0, 0, TIMEOUT), (10.0, 0.2, TIMEOUT), (10.0, float("nan"), TIMEOUT)],
)  # fmt: skip
def test_keepalive_built_in_code_is_checked_like_the_config(time, timeout, key):
    with pytest.raises(ConfigError) as e:
        Keepalive(time, timeout)
    assert e.value.key == key and "out of range" in str(e.value)


def test_client_options_carry_the_configured_keepalive():
    config = cfg.load_config(cfg.CLIENT, None, {"rpc.keepalive.time": "3s", "rpc.keepalive.timeout": "2s"})
    assert ProducerOptions.from_config(config).keepalive == Keepalive(3.0, 2.0)
    assert ConsumerOptions.from_config(config).keepalive == Keepalive(3.0, 2.0)
    assert ProducerOptions().keepalive == ConsumerOptions().keepalive == DEFAULT_KEEPALIVE


def test_channel_arguments():
    args = dict(Keepalive(2.0, 1.5).channel_args())
    assert args == {
        "grpc.keepalive_time_ms": 2000,
        "grpc.keepalive_timeout_ms": 1500,
        # grpcio 1.85 closes a connection on an unanswered ping only after the ping timeout (default 1 min)
        "grpc.http2.ping_timeout_ms": 1500,
        "grpc.keepalive_permit_without_calls": 1,
        "grpc.http2.max_pings_without_data": 0,
    }
    assert set(args.items()) <= set(channels.client_channel_options(Keepalive(2.0, 1.5)))


def test_a_server_permits_pings_from_any_valid_keepalive_time():
    """A peer with the shortest valid time (1 s) pings twice as slowly as any server permits, whatever the
    server's own time: no GOAWAY too_many_pings, in mixed configurations included."""
    assert PERMITTED_PING_INTERVAL_S * 2 <= cfg.MIN_RPC_KEEPALIVE_TIME
    for server in (Keepalive(1.0, 1.0), DEFAULT_KEEPALIVE, Keepalive(2 * cfg.HOUR, 10 * cfg.MINUTE)):
        options = dict(server_options(server))
        assert options["grpc.http2.min_ping_interval_without_data_ms"] == 500
        assert options["grpc.keepalive_time_ms"] == round(server.time * 1000)
        assert options["grpc.keepalive_permit_without_calls"] == 1


def test_the_servers_keepalive_is_on_its_channels_to_other_servers():
    assert dict(channels.server_channel_options())["grpc.keepalive_time_ms"] == 10_000
    channels.set_server_keepalive(Keepalive(1.0, 1.0))
    try:
        options = dict(channels.server_channel_options())
        assert options["grpc.keepalive_time_ms"] == 1000 and options["grpc.http2.ping_timeout_ms"] == 1000
    finally:
        channels.set_server_keepalive(DEFAULT_KEEPALIVE)
