"""Values of secret keys (``cfg.is_secret``: the passwords) never appear in a message: a refused value's
ConfigError (which the CLI prints and servers log), a broken rule's message, ``Config.explicit`` (the start-up
log line), and the CLI's ``config describe`` (the coordinator's answers: tests/unit/test_dynamic_config.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fluss_py import config as cfg
from fluss_py import config_load
from fluss_py.cli import dynconfig
from fluss_py.common import dynamic_config as dyn
from fluss_py.config_values import Constraint
from fluss_py.errors import ConfigError, InvalidConfigError

pytestmark = pytest.mark.unit

SECRET = "hunter2-TOPSECRET"
SECRET_OPTIONS = [o for o in cfg.OPTIONS.values() if cfg.is_secret(o.key)]
CASES = [(o.key, role) for o in SECRET_OPTIONS for role in o.roles]


def test_the_passwords_are_secret() -> None:
    assert {cfg.AUTH_PASSWORD.key, cfg.ZK_AUTH_PASSWORD.key} <= {o.key for o in SECRET_OPTIONS}


@pytest.mark.parametrize("key, role", CASES)
@pytest.mark.parametrize("bad", [f"{SECRET}\n", f"{SECRET}\x00", SECRET * 100])  # a YAML block scalar, $(cat f)
def test_a_refused_secret_value_is_not_in_the_error(key: str, role: str, bad: str) -> None:
    with pytest.raises(ConfigError) as refused:
        cfg.Config(role, {key: bad})
    message = str(refused.value)
    assert "TOPSECRET" not in message and "hunter" not in message, message
    assert refused.value.key == key and "not shown" in message  # still says which key and why
    assert cfg.OPTIONS[key].allowed_text() in message


def test_a_refused_ordinary_value_is_still_shown() -> None:
    with pytest.raises(ConfigError, match="'1' is out of range"):
        cfg.Config(cfg.TABLET, {"log.segment.file-size": "1"})


def test_a_broken_rule_does_not_show_a_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    rule = Constraint("a test rule on a password", (cfg.AUTH_PASSWORD,), lambda password: password == "")
    monkeypatch.setattr(config_load, "CONSTRAINTS", [*cfg.CONSTRAINTS, rule])  # the list the loader checks
    with pytest.raises(ConfigError, match="a test rule") as refused:
        cfg.Config(cfg.CLIENT, {cfg.AUTH_PASSWORD.key: SECRET})
    assert SECRET not in str(refused.value)


def test_explicit_and_masked_hide_secret_values() -> None:
    config = cfg.Config(cfg.TABLET, {cfg.ZK_AUTH_PASSWORD.key: SECRET, "zookeeper.auth.user": "fluss"})
    assert config.explicit() == {cfg.ZK_AUTH_PASSWORD.key: "***", "zookeeper.auth.user": "fluss"}
    assert cfg.masked({"security.password": SECRET, "table.log.ttl": "1h"}) == {
        "security.password": "***",
        "table.log.ttl": "1h",
    }


def test_no_secret_key_is_dynamic_or_a_table_property() -> None:
    for option in SECRET_OPTIONS:
        assert option.key not in dyn.DYNAMIC_KEYS and cfg.TABLE not in option.roles, option.key
    with pytest.raises(InvalidConfigError) as refused:
        dyn.validate("cluster", {cfg.AUTH_PASSWORD.key: SECRET})
    assert SECRET not in str(refused.value)


@pytest.mark.parametrize("as_json", [False, True])
def test_the_cli_masks_a_secret_in_a_describe_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], as_json: bool
) -> None:
    answer = {"entity_type": "cluster", "name": "", "dynamic": {cfg.AUTH_PASSWORD.key: SECRET}}
    monkeypatch.setattr(dynconfig, "call_leader", lambda *_args, **_kw: dict(answer))
    args = argparse.Namespace(
        config_command="describe", entity="cluster", name="", coordinator_http="127.0.0.1:1", json=as_json,
        command_config=None, dir=Path("/nonexistent"),
    )  # fmt: skip
    assert dynconfig.cmd_config(args) == 0
    out = capsys.readouterr().out
    assert SECRET not in out and cfg.AUTH_PASSWORD.key in out and "***" in out
