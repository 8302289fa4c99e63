"""Every metric is declared in fluss_py/metric_catalogue.py and built from its declaration; docs/observability.md's
metric list is the catalogue's own rendering (``make metrics-doc``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from fluss_py import metric_catalogue as mc
from fluss_py.cli.main import main as cli_main
from fluss_py.cli.metrics_cmd import END, GENERATED, reference_markdown, with_reference
from fluss_py.metric_spec import COORDINATOR, TABLET, MetricSpec

pytestmark = pytest.mark.unit

PACKAGE = Path(mc.__file__).resolve().parent
DOC = PACKAGE.parent / "docs" / "observability.md"
# the declarations and their builder
ALLOWED = {PACKAGE / "metric_spec.py", PACKAGE / "metric_catalogue.py", PACKAGE / "metric_catalogue_coordinator.py"}
# what builds a metric; CollectorRegistry, Collector and generate_latest are not metrics
METRIC_CLASSES = {
    "Counter", "Gauge", "Histogram", "Summary", "Info", "Enum",
    "CounterMetricFamily", "GaugeMetricFamily", "HistogramMetricFamily", "SummaryMetricFamily",
    "InfoMetricFamily", "StateSetMetricFamily", "UnknownMetricFamily", "GaugeHistogramMetricFamily", "Metric",
}  # fmt: skip
# exposition text written by hand: a declared name alone or with labels, or a HELP/TYPE line of any name
NAME_IN_TEXT = re.compile(rf"({'|'.join(sorted(mc.BY_NAME, key=len, reverse=True))})(\{{|$)|# (HELP|TYPE) fluss_")


def _modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py")) if "pb" not in p.relative_to(PACKAGE).parts[:2]]


def _where(path: Path) -> str:
    """``fluss_py/tablet/metrics.py`` for a module of the package, the file name for anything else."""
    parts = path.parts
    if "fluss_py" not in parts:
        return path.name
    return "/".join(parts[len(parts) - 1 - parts[::-1].index("fluss_py") :])


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def metrics_built_outside_the_catalogue(paths: list[Path]) -> list[str]:
    """file:line of every import of a prometheus-client metric class, and of every string that is a metric
    name (or a name with labels, as exposition text written by hand), outside the allowed modules."""
    found = []
    for path in paths:
        if path in ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = _where(path)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prometheus_client"):
                for alias in node.names:
                    if alias.name in METRIC_CLASSES:
                        found.append(f"{where}:{node.lineno} imports {alias.name}")
            elif _is_text(node) and id(node) not in docstrings and NAME_IN_TEXT.match(node.value):
                found.append(f"{where}:{node.lineno} spells {node.value!r}")
    return found


def test_no_module_builds_a_metric_without_the_catalogue():
    found = metrics_built_outside_the_catalogue(_modules())
    assert not found, "metrics built outside fluss_py/metric_catalogue.py (declare them there):\n" + "\n".join(found)


def test_the_check_finds_a_metric_built_by_hand(tmp_path: Path):
    module = tmp_path / "rogue.py"
    module.write_text(
        '"""fluss_replica_leader_count in a docstring is prose."""\n'
        "from prometheus_client import CollectorRegistry, Gauge\n"
        "from prometheus_client.core import GaugeMetricFamily as G\n"
        'LINE = "fluss_log_end_offset{bucket=\\"0\\"} 3"\n'
        'HEAD = "# TYPE fluss_new_thing gauge"\n'
        'NAME = "fluss_log_size_bytes"\n'
        'OTHER = "fluss_call_metadata"\n'
        'LOGGER = "fluss_py.tablet"\n'
    )
    assert metrics_built_outside_the_catalogue([module]) == [
        "rogue.py:2 imports Gauge",
        "rogue.py:3 imports GaugeMetricFamily",
        "rogue.py:4 spells 'fluss_log_end_offset{bucket=\"0\"} 3'",
        "rogue.py:5 spells '# TYPE fluss_new_thing gauge'",
        "rogue.py:6 spells 'fluss_log_size_bytes'",
    ]


def test_docs_observability_lists_the_catalogue():
    page = DOC.read_text(encoding="utf-8")
    assert with_reference(page) == page, "docs/observability.md's metric list is stale: run `make metrics-doc`"
    for spec in mc.CATALOGUE:
        assert f"| `{spec.name}` | {spec.kind} |" in page


def test_metrics_doc_rewrites_only_the_generated_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    page = tmp_path / "observability.md"
    page.write_text(f"# Title\n\nprose before\n\n{GENERATED}\nan old list\n{END}\n\nprose after\n")
    assert cli_main(["metrics", "--update-doc", str(page)]) == 0
    text = page.read_text()
    assert text == f"# Title\n\nprose before\n\n{reference_markdown()}\nprose after\n"
    assert cli_main(["metrics", "--update-doc", str(page)]) == 0
    assert capsys.readouterr().out.endswith("up to date\n")
    unmarked = tmp_path / "other.md"
    unmarked.write_text("# no list here\n")
    assert cli_main(["metrics", "--update-doc", str(unmarked)]) == 2
    assert unmarked.read_text() == "# no list here\n"  # refused, nothing written


def test_a_declaration_is_checked_and_builds_what_it_declares():
    with pytest.raises(ValueError, match="ends in _total"):
        MetricSpec("fluss_x", "counter", "h", TABLET)
    with pytest.raises(ValueError, match="has buckets"):
        MetricSpec("fluss_x_seconds", "histogram", "h", TABLET)
    with pytest.raises(ValueError, match="kind"):
        MetricSpec("fluss_x", "meter", "h", COORDINATOR)
    gauge = MetricSpec("fluss_x", "gauge", "An x", TABLET, ("server",))
    with pytest.raises(TypeError, match="declared a gauge"):
        gauge.counter(None)
    registry = CollectorRegistry()
    gauge.gauge(registry).labels("1").set(2)
    MetricSpec("fluss_y_total", "counter", "A y", TABLET).counter(registry).inc(3)
    text = generate_latest(registry).decode()
    assert '# TYPE fluss_x gauge\nfluss_x{server="1"} 2.0\n' in text
    assert "# TYPE fluss_y_total counter\nfluss_y_total 3.0\n" in text
    assert gauge.head() == "# HELP fluss_x An x\n# TYPE fluss_x gauge\n"


def test_the_catalogue_holds_what_the_dashboards_and_alerts_read():
    names = set(mc.BY_NAME)
    assert len(names) == len(mc.CATALOGUE) > 60
    for must in ("fluss_coordinator_offline_buckets", "fluss_replica_under_replicated", "fluss_log_dir_online"):
        assert must in names
