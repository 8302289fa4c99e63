import pytest

from fluss_py import config as cfg
from fluss_py.config import (
    COORDINATOR,
    REPLICA_LAG_TIME_MAX,
    TABLET,
    ZK_SESSION_TIMEOUT,
    load_config,
    parse_overrides,
)
from fluss_py.config_values import parse_duration, parse_size
from fluss_py.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "ms_key", "seconds"),
    [
        ("15s", False, 15),
        ("500ms", False, 0.5),
        ("5min", False, 300),
        ("2h", False, 7200),
        ("30000", True, 30),
        (30000, True, 30),
        (10, False, 10),
        ("1d", False, 86400),
    ],
)
def test_durations(text, ms_key, seconds):
    assert parse_duration(text, bare_unit_ms=ms_key) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("10MB", 10 << 20),
        ("1KB", 1024),
        ("64KiB", 65536),
        ("1GiB", 1 << 30),
        (4096, 4096),
        ("512", 512),
        ("1.5MB", 1572864),
    ],
)
def test_sizes(text, size):
    assert parse_size(text) == size


def test_yaml_and_overrides(tmp_path):
    f = tmp_path / "tablet-server.yaml"
    f.write_text("zookeeper.session-timeout: 15s\nreplica.lag.time.max.ms: 30000\nreplica.fetch.max.bytes: 10MB\n")
    cfg = load_config(TABLET, f, parse_overrides(["zookeeper.session-timeout=4s"]))
    assert cfg[ZK_SESSION_TIMEOUT] == 4
    assert cfg[REPLICA_LAG_TIME_MAX] == 30
    assert cfg["replica.fetch.max.bytes"] == 10 << 20


def test_unknown_key_names_it():
    with pytest.raises(ConfigError) as e:
        load_config(COORDINATOR, None, {"zookeeper.sesion-timeout": "4s"})
    assert e.value.key == "zookeeper.sesion-timeout"


def test_bad_value_names_key():
    with pytest.raises(ConfigError) as e:
        load_config(COORDINATOR, None, {"zookeeper.session-timeout": "soon"})
    assert e.value.key == "zookeeper.session-timeout"


def test_option_of_other_role_is_refused():
    with pytest.raises(ConfigError, match="not a coordinator option"):
        load_config(COORDINATOR, None, {"data.dir": "/tmp/x"})


def test_override_without_equals():
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


# ---------------------------------------------------------------- deprecated spellings (seed key names)
def test_seed_key_names_are_accepted_as_aliases(tmp_path):
    path = tmp_path / "tablet-server.yaml"
    path.write_text(
        "tablet-server.replica.fetch.max.bytes: 5MB\ntablet-server.rebalance.max.concurrent.migrations: 3\n"
    )
    config = cfg.load_config("tablet-server", path)
    assert config[cfg.REPLICA_FETCH_MAX_BYTES] == 5 * 1024**2
    assert config[cfg.REBALANCE_MAX_CONCURRENT] == 3
    assert config.deprecations == [
        "tablet-server.replica.fetch.max.bytes -> replica.fetch.max.bytes",
        "tablet-server.rebalance.max.concurrent.migrations -> tablet-server.rebalance.max-concurrent-migrations",
    ]
    seed = {"tablet-server.rebalance.check.interval": "5min", "tablet-server.rebalance.trigger.threshold": "0.2"}
    coordinator = cfg.load_config("coordinator", None, seed)
    assert coordinator[cfg.REBALANCE_CHECK_INTERVAL] == 300.0
    assert coordinator[cfg.REBALANCE_TRIGGER_THRESHOLD] == 0.2


def test_the_canonical_key_wins_and_other_roles_ignore_an_alias():
    config = cfg.load_config(
        "tablet-server", None, {"replica.fetch.max.bytes": "2MB", "tablet-server.replica.fetch.max.bytes": "5MB"}
    )
    assert config[cfg.REPLICA_FETCH_MAX_BYTES] == 2 * 1024**2
    assert config.deprecations == ["tablet-server.replica.fetch.max.bytes ignored: replica.fetch.max.bytes is set"]
    # a coordinator key spelled tablet-server.* (rebalance): a tablet server reading it ignores it, with a notice
    ts = cfg.load_config("tablet-server", None, {"tablet-server.rebalance.check.interval": "5min"})
    assert ts.deprecations and "ignored: read by coordinator only" in ts.deprecations[0]
    assert cfg.load_config("tablet-server").deprecations == []


def test_every_alias_names_a_registered_key():
    for alias, canonical in cfg.DEPRECATED_ALIASES.items():
        assert canonical in cfg.OPTIONS and alias not in cfg.OPTIONS


def test_an_alias_given_with_d_beats_the_files_canonical_key(tmp_path):
    path = tmp_path / "tablet-server.yaml"
    path.write_text("replica.fetch.max.bytes: 2MB\n")
    config = cfg.load_config("tablet-server", path, {"tablet-server.replica.fetch.max.bytes": "5MB"})
    assert config[cfg.REPLICA_FETCH_MAX_BYTES] == 5 * 1024**2


def test_a_config_file_that_is_not_utf8_is_a_config_error_naming_it(tmp_path):
    f = tmp_path / "server.yaml"
    f.write_bytes(b"data.dir: /srv/fluss\xe9\n")  # a latin-1 byte (edited on another machine)
    with pytest.raises(ConfigError, match="not UTF-8") as e:
        cfg.load_config(cfg.TABLET, f)
    assert e.value.key == str(f) and "line 1" in str(e.value)
