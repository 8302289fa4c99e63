"""The config registry's ranges: every key has one, every default is inside it, the values issue 13 found
accepted are refused with the key, the value and the allowed range named; table properties and the rules
between keys; docs/configuration.md is the registry's own rendering."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fluss_py import config as cfg
from fluss_py.cli.config_cmd import reference_markdown
from fluss_py.coordinator.tables import validate_properties
from fluss_py.errors import ConfigError, ErrorCode, FlussError
from fluss_py.log.config import LogConfig

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def _refused(role: str, key: str, value: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        cfg.load_config(role, None, {key: value})
    assert e.value.key == key and e.value.code == ErrorCode.INVALID_CONFIG
    return e.value


# ---------------------------------------------------------------- the registry itself
def test_every_option_has_a_range_and_its_default_is_inside_it():
    for o in cfg.OPTIONS.values():
        assert o.type == "bool" or o.allowed is not None, f"{o.key} declares no allowed values"
        assert o.default is None or o.admits(o.default), o.key
        assert o.roles and set(o.roles) <= set(cfg.SCOPES), o.key
        assert o.allowed_text()


def test_a_default_outside_its_range_is_a_declaration_bug():
    with pytest.raises(RuntimeError, match="outside"):
        cfg.option("test.only.key", "int", 0, [cfg.TABLET], "a test", cfg.Range(1, 10))
    assert "test.only.key" not in cfg.OPTIONS
    with pytest.raises(RuntimeError, match="unknown scopes"):
        cfg.option("test.only.key", "int", 1, ["tablet"], "a test", cfg.Range(1, 10))
    assert "test.only.key" not in cfg.OPTIONS


# keys a rule relates, set where any value of the other key passes
RELAXED = {
    "replica.lag.time.max.ms": "1d",
    "replica.fetch.wait.max.ms": "1ms",
    "replica.fetch.max.bytes": "48MB",
    "replica.fetch.min.bytes": "1",
    "client.retry.backoff": "1ms",
    "client.retry.backoff-max": "10min",
    "group.min-session-timeout": "100ms",
    "group.max-session-timeout": "1h",
}


@pytest.mark.parametrize("option", [o for o in cfg.OPTIONS.values() if isinstance(o.allowed, cfg.Range)],
                         ids=lambda o: o.key)  # fmt: skip
def test_range_boundaries(option: cfg.ConfigOption):
    """The bounds themselves are accepted (a closed lower bound), one step beyond them is refused. The other
    keys are set so that no rule between keys gets in the way."""
    r = option.allowed
    assert isinstance(r, cfg.Range)
    scope = option.roles[0]
    relaxed = {k: v for k, v in RELAXED.items() if k != option.key and scope in cfg.OPTIONS[k].roles}

    def load(value: str) -> cfg.Config:
        return cfg.Config(scope, {**relaxed, option.key: value})

    def refused(value: str) -> str:
        with pytest.raises(ConfigError) as e:
            load(value)
        assert e.value.key == option.key
        return str(e.value)

    step = 1 if option.type in ("int", "size") else 0.001

    def write(v: float) -> str:
        if option.type == "duration":
            return f"{round(v * 1000)}ms"
        return repr(v) if option.type == "float" else str(int(v))

    if r.lo is not None:
        if not r.lo_open:
            assert load(write(r.lo))[option] == pytest.approx(r.lo)
        below = r.lo if r.lo_open else r.lo - step
        if option.type != "duration" or below >= 0:  # a negative duration does not even parse
            refused(write(below))
    if r.hi is not None:
        assert load(write(r.hi))[option] == pytest.approx(r.hi)
        assert "out of range" in refused(write(r.hi + step))


# ---------------------------------------------------------------- the values issue 13 found accepted
@pytest.mark.parametrize(
    ("role", "key", "value", "allowed"),
    [
        (cfg.TABLET, "log.segment.file-size", "0", "1 KiB .. 1 GiB"),
        (cfg.TABLET, "log.segment.file-size", "1", "1 KiB .. 1 GiB"),
        (cfg.TABLET, "log.index.interval-size", "0", "64 B .. 64 MiB"),
        (cfg.TABLET, "log.max-batch-size", "0", "1 KiB .. 48 MiB"),
        (cfg.TABLET, "log.flush.interval", "0", "10 ms .. 1 h"),
        (cfg.TABLET, "replica.fetch.max.bytes", "0", "1 KiB .. 48 MiB"),
        (cfg.TABLET, "tablet-server.min.insync.replicas", "-3", "1 .. 32767"),
        (cfg.TABLET, "tablet-server.id", "-1", "0 .. 2147483647"),
        (cfg.TABLET, "tablet-server.id", "2147483648", "0 .. 2147483647"),
        (cfg.TABLET, "data.dir", "", "not empty"),
        (cfg.TABLET, "data.dir", "   ", "not empty"),
        (cfg.COORDINATOR, "tablet-server.rebalance.batch.ratio", "0", "above 0, up to 1"),
        (cfg.COORDINATOR, "tablet-server.rebalance.batch.ratio", "1.5", "above 0, up to 1"),
        (cfg.COORDINATOR, "tablet-server.rebalance.max-concurrent-migrations", "0", "1 .. 10000"),
        (cfg.COORDINATOR, "coordinator.rebalance.trigger-threshold", "-0.1", "0 .. 100"),
        (cfg.COORDINATOR, "coordinator.rebalance.check-interval", "0", "1 s .. 1 d"),
        (cfg.COORDINATOR, "rpc.port", "70000", "0 .. 65535"),
        (cfg.COORDINATOR, "zookeeper.address", "localhost", "host:port"),
        (cfg.COORDINATOR, "zookeeper.address", "h:0", "host:port"),
        (cfg.COORDINATOR, "zookeeper.root", "fluss", "an absolute znode path"),
        (cfg.COORDINATOR, "zookeeper.root", "/", "an absolute znode path"),
        (cfg.COORDINATOR, "log.level", "LOUD", "one of CRITICAL"),
        (cfg.COORDINATOR, "default.bucket.number", "4097", "1 .. 4096"),
        (cfg.CLIENT, "client.writer.max-inflight-requests-per-bucket", "6", "1 .. 5"),
    ],
)
def test_out_of_range_values_are_refused_naming_key_value_and_range(role, key, value, allowed):
    e = _refused(role, key, value)
    text = str(e)
    assert text.startswith(f"INVALID_CONFIG: {key}: {value!r} is ") and f"(allowed: {allowed}" in text, text
    assert "out of range" in text or "not allowed" in text


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", float("nan"), math.inf])
def test_non_finite_numbers_are_refused(value):
    e = _refused(cfg.COORDINATOR, "tablet-server.rebalance.batch.ratio", value)
    assert "not a finite number" in str(e)


def test_sizes_may_be_negative_only_where_the_range_says_so():
    assert cfg.Config(cfg.TABLE, {"table.log.retention-bytes": "-1"})[cfg.TABLE_LOG_RETENTION_BYTES] == -1
    _refused(cfg.TABLET, "table.log.retention-bytes", "-2")
    _refused(cfg.TABLET, "log.segment.file-size", "-1MB")


def test_yaml_values_are_checked_as_well(tmp_path):
    f = tmp_path / "tablet-server.yaml"
    f.write_text("tablet-server.id: -1\n")
    with pytest.raises(ConfigError, match=r"tablet-server.id: -1 is out of range"):
        cfg.load_config(cfg.TABLET, f)
    f.write_text("data.dir:\n")  # YAML null: an empty data directory
    with pytest.raises(ConfigError, match=r"data.dir: None is not allowed \(allowed: not empty\)"):
        cfg.load_config(cfg.TABLET, f)


# ---------------------------------------------------------------- rules between keys
def test_constraints_between_keys():
    with pytest.raises(ConfigError, match=r"replica.fetch.wait.max.ms < replica.lag.time.max.ms .* must hold"):
        cfg.Config(cfg.TABLET, {"replica.fetch.wait.max.ms": "40s"})  # lag time 30 s by default
    cfg.Config(cfg.TABLET, {"replica.fetch.wait.max.ms": "40s", "replica.lag.time.max.ms": "41s"})
    with pytest.raises(ConfigError, match=r"replica\.fetch\.min\.bytes <= replica\.fetch\.max\.bytes"):
        cfg.Config(cfg.TABLET, {"replica.fetch.min.bytes": "2MB", "replica.fetch.max.bytes": "1MB"})
    with pytest.raises(ConfigError, match=r"client\.retry\.backoff <= client\.retry\.backoff-max"):
        cfg.Config(cfg.CLIENT, {"client.retry.backoff": "1s"})


# ---------------------------------------------------------------- table properties
def test_table_properties_must_be_table_options_in_range():
    assert validate_properties({"log.segment.file-size": "16KB", "min.insync.replicas": "2"}, 3) == {
        "log.segment.file-size": "16KB",
        "min.insync.replicas": "2",
    }
    for props, message in (
        ({"log.segment.file-size": "1"}, r"log.segment.file-size: '1' is out of range"),
        ({"log.index.interval-size": "0"}, r"log.index.interval-size: '0' is out of range"),
        ({"table.log.ttl": "soon"}, r"table.log.ttl: invalid duration"),
        ({"min.insync.replicas": "-3"}, r"min.insync.replicas: '-3' is out of range \(allowed: 1 \.\. 32767\)"),
        ({"min.insync.replicas": "4"}, r"min.insync.replicas=4 must be between 1 and the replication factor 3"),
        ({"zookeeper.address": "h:1"}, r"zookeeper.address: not a table option"),
        ({"tablet-server.id": "7"}, r"tablet-server.id: not a table option"),
        ({"log.segment.filesize": "1GB"}, r"log.segment.filesize: unknown configuration key"),
    ):
        with pytest.raises(FlussError, match=message) as e:
            validate_properties(props, 3)
        assert e.value.code == ErrorCode.INVALID_CONFIG


def test_a_stored_property_out_of_range_falls_back_to_the_server_value(caplog):
    """A table created before the check with log.segment.file-size=1 does not get 1-byte segments."""
    server = cfg.Config(cfg.TABLET, {"log.segment.file-size": "64MB"})
    assert LogConfig.from_config(server, {"log.segment.file-size": "1"}).segment_bytes == 64 << 20
    assert "Ignoring table property" in caplog.text and "log.segment.file-size" in caplog.text
    assert LogConfig.from_config(server, {"log.segment.file-size": "16KB"}).segment_bytes == 16 << 10


# ---------------------------------------------------------------- host:port
@pytest.mark.parametrize("text", ["localhost", ":abc", "h:", "h:0", "h:70000", "h:-1", "", "a b:1", "h:1,h:2"])
def test_split_host_port_refuses(text):
    with pytest.raises(ValueError):
        cfg.split_host_port(text)


def test_split_host_port_accepts():
    assert cfg.split_host_port(" localhost:9123 ") == ("localhost", 9123)
    assert cfg.split_host_port("[::1]:1") == ("[::1]", 1)
    assert cfg.split_host_port("10.0.0.1:65535") == ("10.0.0.1", 65535)


# ---------------------------------------------------------------- the generated reference
def test_configuration_doc_is_generated_from_the_registry():
    assert DOC.read_text() == reference_markdown(), "docs/configuration.md is stale: run `make config-doc`"
    for o in cfg.OPTIONS.values():
        assert f"`{o.key}`" in DOC.read_text()


def test_list_options_check_their_items_and_count():
    """What a list key such as data.dirs declares: Items(NON_EMPTY) refuses an empty list and empty items."""
    opt = cfg.ConfigOption("test.dirs", "list", ("a",), (cfg.TABLET,), "a test", cfg.Items(cfg.NON_EMPTY))
    assert opt.parse("a, b") == ("a", "b")
    for bad in ("", " , ", []):
        with pytest.raises(ConfigError, match=r"not allowed \(allowed: 1 or more items, each not empty\)"):
            opt.parse(bad)
    capped = cfg.ConfigOption("test.dirs", "list", ("a",), (cfg.TABLET,), "a test", cfg.Items(cfg.NON_EMPTY, 1, 2))
    with pytest.raises(ConfigError, match=r"1\.\.2 items"):
        capped.parse("a,b,c")
