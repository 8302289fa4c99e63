"""``MetricSpec``: one metric's declaration, and the prometheus-client objects built from it.

The declarations themselves are in ``metric_catalogue.py`` (every metric of every process); a module that
exports a metric builds it from its spec:

    spec.gauge(registry) / spec.counter(registry) / spec.histogram(registry) / spec.enum(registry, states)
    spec.family()  or  spec.family(value)    a scrape-time GaugeMetricFamily / CounterMetricFamily
    spec.head()                              the # HELP / # TYPE lines of exposition text written by hand

Who may call: anyone (pure constructors; no I/O).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

TABLET, COORDINATOR, SECURITY, EVERY = "Tablet server", "Coordinator", "Every server: security", "Every process"
SECTIONS = (TABLET, COORDINATOR, SECURITY, EVERY)
KINDS = ("gauge", "counter", "histogram", "enum")
Family = GaugeMetricFamily | CounterMetricFamily  # what a collector yields at scrape time


@dataclass(frozen=True)
class MetricSpec:
    """One metric family: ``name`` as scraped, ``kind`` (gauge, counter, histogram, enum), ``labels`` in the
    order values are given, ``help`` (the ``# HELP`` line), ``section`` (which processes export it) and
    ``doc`` (its meaning in docs/observability.md, Markdown; empty: the help says it)."""

    name: str
    kind: str
    help: str
    section: str
    labels: tuple[str, ...] = ()
    doc: str = ""
    buckets: tuple[float, ...] = ()  # a histogram's upper bounds

    def __post_init__(self) -> None:
        if self.kind not in KINDS or self.section not in SECTIONS:
            raise ValueError(f"{self.name}: kind {self.kind!r} / section {self.section!r}")
        if self.kind == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"{self.name}: a counter's name ends in _total")
        if (self.kind == "histogram") != bool(self.buckets):
            raise ValueError(f"{self.name}: a histogram, and only a histogram, has buckets")

    def gauge(self, registry: CollectorRegistry) -> Gauge:
        self._expect("gauge")
        return Gauge(self.name, self.help, list(self.labels), registry=registry)

    def counter(self, registry: CollectorRegistry | None) -> Counter:
        self._expect("counter")
        return Counter(self.name, self.help, list(self.labels), registry=registry)

    def histogram(self, registry: CollectorRegistry) -> Histogram:
        self._expect("histogram")
        return Histogram(self.name, self.help, list(self.labels), buckets=self.buckets, registry=registry)

    def enum(self, registry: CollectorRegistry, states: list[str]) -> Enum:
        self._expect("enum")
        return Enum(self.name, self.help, states=states, registry=registry)

    def family(self, value: float | None = None) -> Family:
        """A scrape-time family (``GaugeMetricFamily``/``CounterMetricFamily``): with ``value`` for a family of
        one unlabelled sample, else empty for ``add_metric(label_values, value)``."""
        if self.kind == "gauge":
            if value is not None:
                return GaugeMetricFamily(self.name, self.help, value=value)
            return GaugeMetricFamily(self.name, self.help, labels=list(self.labels))
        self._expect("counter")
        if value is not None:
            return CounterMetricFamily(self.name, self.help, value=value)
        return CounterMetricFamily(self.name, self.help, labels=list(self.labels))

    def head(self) -> str:
        """The ``# HELP``/``# TYPE`` lines of exposition text written without prometheus-client objects."""
        self._expect("gauge", "counter")
        return f"# HELP {self.name} {self.help}\n# TYPE {self.name} {self.kind}\n"

    def _expect(self, *kinds: str) -> None:
        if self.kind not in kinds:
            raise TypeError(f"{self.name} is declared a {self.kind}, not a {' or '.join(kinds)}")


_DECLARED: list[MetricSpec] = []


def declare(name: str, kind: str, help_: str, section: str, *labels: str, **more: Any) -> MetricSpec:
    """Declare one metric: its spec, kept in declaration order (only the catalogue modules call it)."""
    spec = MetricSpec(name, kind, help_, section, labels, **more)
    _DECLARED.append(spec)
    return spec


def declared() -> tuple[MetricSpec, ...]:
    """Every metric declared so far, in declaration order (``metric_catalogue.CATALOGUE``)."""
    return tuple(_DECLARED)
