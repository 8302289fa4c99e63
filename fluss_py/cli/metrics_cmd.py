"""``fluss-py metrics``: every Prometheus metric of every process, from the catalogue.

    fluss-py metrics                                  a table for people (name, type, labels, process)
    fluss-py metrics --markdown                       the list docs/observability.md holds
    fluss-py metrics --update-doc docs/observability.md   rewrite that list in place (make metrics-doc)

The text comes from ``fluss_py/metric_catalogue.py`` alone, where every metric is declared; a unit test fails
when docs/observability.md's list differs from it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fluss_py import metric_catalogue as mc
from fluss_py.metric_spec import SECTIONS

GENERATED = "<!-- generated from fluss_py/metric_catalogue.py by `make metrics-doc`: edit the catalogue -->"
END = "<!-- end of the generated metric list -->"


def reference_markdown() -> str:
    """docs/observability.md's metric list: one table per section, in declaration order."""
    out = [f"{GENERATED}\n"]
    for section in SECTIONS:
        out.append(f"\n### {section}\n\n| metric | type | labels | meaning |\n|---|---|---|---|\n")
        for m in (m for m in mc.CATALOGUE if m.section == section):
            labels = ", ".join(f"`{label}`" for label in m.labels)
            meaning = m.doc or (m.help[0].lower() + m.help[1:] if m.help[1:2].islower() else m.help)
            meaning = meaning.replace("|", "\\|")
            out.append(f"| `{m.name}` | {m.kind} | {labels} | {meaning} |\n")
    out.append(f"\n{END}\n")
    return "".join(out)


def with_reference(page: str) -> str:
    """``page`` (docs/observability.md) with its generated list replaced by ``reference_markdown()``
    (ValueError when the page lacks the markers)."""
    start, end = page.find(GENERATED), page.find(END)
    if start < 0 or end < start:
        raise ValueError("the page has no generated metric list (its first and last lines are the markers)")
    return page[:start] + reference_markdown() + page[end + len(END) + 1 :]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("metrics", help="list every Prometheus metric with its type, labels and meaning")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--markdown", action="store_true", help="print the metric list of docs/observability.md")
    out.add_argument("--update-doc", metavar="PAGE", type=Path, help="rewrite the generated metric list of PAGE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.markdown:
        print(reference_markdown(), end="")
        return 0
    if args.update_doc is not None:
        try:
            page = args.update_doc.read_text(encoding="utf-8")
            updated = with_reference(page)
        except (OSError, ValueError) as e:  # nothing written
            print(f"fluss-py: {args.update_doc}: {e}", file=sys.stderr)
            return 2
        if updated != page:
            args.update_doc.write_text(updated, encoding="utf-8")
        print(f"{args.update_doc}: {'updated' if updated != page else 'up to date'}")
        return 0
    from rich.table import Table

    from fluss_py.cli.common import console

    table = Table(title="metrics")
    for column in ("metric", "type", "labels", "exported by"):
        table.add_column(column, no_wrap=column == "metric")
    for m in mc.CATALOGUE:
        table.add_row(m.name, m.kind, ", ".join(m.labels), m.section)
    console().print(table)
    return 0
