"""deploy/prometheus/ and deploy/grafana/, checked with the real tool and against the metrics that exist:
promtool checks the scrape config and the alert rules and runs alerts_test.yml (each alert fires on the series
that should raise it, and not before its ``for``); every metric an alert or a dashboard panel reads is one the
servers export (declared in fluss_py/metric_catalogue.py, listed in docs/observability.md); the scrape targets
are the compose cluster's servers on their HTTP ports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from fluss_py.metric_catalogue import BY_NAME

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = ROOT / "deploy" / "prometheus"
DASHBOARDS = ROOT / "deploy" / "grafana" / "dashboards"
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")  # a histogram's samples; counters are documented with _total


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("promtool")
    if tool is None:
        pytest.fail("promtool is missing: run `make install` (deploy/install-test-tools.sh installs prometheus)")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=60, cwd=PROMETHEUS)


@pytest.mark.parametrize("args", [("check", "rules", "alerts.yml"), ("check", "config", "prometheus.yml"),
                                  ("test", "rules", "alerts_test.yml")], ids=" ".join)  # fmt: skip
def test_promtool_accepts_the_rules_config_and_rule_tests(args: tuple[str, ...]):
    done = _promtool(*args)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_broken_rule_test_fails_promtool(tmp_path: Path):
    """The rule test can fail: expecting an alert the series do not raise is reported."""
    tests = yaml.safe_load((PROMETHEUS / "alerts_test.yml").read_text())
    tests["rule_files"] = [str(PROMETHEUS / "alerts.yml")]
    first = tests["tests"][0]["alert_rule_test"][0]
    assert first["exp_alerts"] == []  # FlussOfflineBuckets at 1 min: not yet
    first["exp_alerts"] = [{"exp_labels": {"severity": "critical"}}]
    broken = tmp_path / "broken_test.yml"
    broken.write_text(yaml.safe_dump(tests))
    assert _promtool("test", "rules", str(broken)).returncode != 0


def _declared() -> set[str]:
    """Every metric name of fluss_py/metric_catalogue.py (docs/observability.md lists the same, generated)."""
    return set(BY_NAME)


def _metrics_in(expr: str) -> set[str]:
    names = set()
    for name in re.findall(r"\b(fluss_[a-z_]+)", expr):
        for suffix in HISTOGRAM_SUFFIXES:
            name = name.removesuffix(suffix)
        names.add(name)
    return names


def _exprs() -> list[tuple[str, str]]:
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text())
    out = [(r["alert"], r["expr"]) for g in rules["groups"] for r in g["rules"]]
    for path in sorted(DASHBOARDS.glob("*.json")):
        for panel in json.loads(path.read_text())["panels"]:
            out += [(f"{path.name}: {panel['title']}", t["expr"]) for t in panel["targets"]]
    return out


def test_every_alert_and_panel_reads_metrics_that_exist():
    declared = _declared()
    exprs = _exprs()
    assert len(exprs) > 10
    unknown = {name: _metrics_in(expr) - declared for name, expr in exprs if _metrics_in(expr) - declared}
    assert unknown == {}
    assert _metrics_in("fluss_nonexistent_metric_total") - declared  # the check can fail


def test_scrape_targets_are_the_compose_servers_http_ports():
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())["services"]
    targets = {t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]}
    servers = {n for n in compose if n.startswith(("coordinator-", "tablet-server-"))}
    port = {"coordinator": 9124, "tablet-server": 9125}
    assert targets == {f"{n}:{port[n.rsplit('-', 1)[0]]}" for n in servers}


def test_the_secure_scrape_config_authenticates_as_the_user_security_init_grants_describe_configs(tmp_path: Path):
    """prometheus-secure.yml: HTTPS with the client certificate and Basic credentials of the user that the
    secure compose's security-init creates with DESCRIBE_CONFIGS on the cluster (what /metrics needs); the
    same targets as the secure cluster's servers; promtool accepts it with the files make-secure.py writes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_secure", ROOT / "deploy" / "make-secure.py")
    assert spec is not None and spec.loader is not None
    make_secure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_secure)
    secure = tmp_path / "secure"
    assert make_secure.main(secure) == 0
    text = (PROMETHEUS / "prometheus-secure.yml").read_text()
    config = yaml.safe_load(text)
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.secure.yml").read_text())["services"]
    init = " ".join(compose["security-init"]["command"])
    for job in config["scrape_configs"]:
        assert job["scheme"] == "https"
        user = job["basic_auth"]["username"]
        assert f"user add {user} --password-file {job['basic_auth']['password_file']}" in init
        assert f"acl add --principal {user} --operation DESCRIBE_CONFIGS --cluster" in init
        assert (secure / Path(job["basic_auth"]["password_file"]).name).read_text().strip()
    plain = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text())
    assert [j["static_configs"] for j in config["scrape_configs"]] == [
        j["static_configs"] for j in plain["scrape_configs"]
    ]
    local = tmp_path / "prometheus"
    local.mkdir()
    (local / "alerts.yml").write_text((PROMETHEUS / "alerts.yml").read_text())
    (local / "prometheus-secure.yml").write_text(text.replace("/etc/fluss/secure", str(secure)))
    tool = shutil.which("promtool")
    assert tool is not None
    done = subprocess.run([tool, "check", "config", "prometheus-secure.yml"], capture_output=True, text=True,
                          timeout=60, cwd=local)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
