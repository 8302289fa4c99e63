"""``fluss-py config``: every configuration key and table property with its type, default and allowed values.

    fluss-py config [--scope coordinator|tablet-server|client|table]   a table for people
    fluss-py config --markdown                                          docs/configuration.md (make config-doc)
    fluss-py config describe|alter ...                                  dynamic configuration (cli/dynconfig.py)

The text comes from the registry in ``fluss_py.config`` alone, so the documented ranges are the enforced
ones; a unit test fails when docs/configuration.md differs from ``reference_markdown()``.
"""

from __future__ import annotations

import argparse

from fluss_py import config as cfg
from fluss_py.cli import dynconfig

_INTRO = """\
# Configuration reference

Generated from the registry in `fluss_py/config.py` by `make config-doc` (`fluss-py config --markdown`);
do not edit by hand. A unit test fails when this file and the registry differ.

Every value is checked against its range where it is loaded: a coordinator or tablet server refuses to start
(exit code 2, before it touches ZooKeeper or its directories) and a CreateTable is refused with
`INVALID_CONFIG`, with a message naming the key, the value (never a password's: keys ending in `password`
are secrets, masked in every message and log line) and what is allowed, e.g.

    fluss-py: configuration error: INVALID_CONFIG: log.segment.file-size: '1' is out of range (allowed: 1 KiB .. 1 GiB)

Sizes are bytes (`10MB`, `64KiB`; 1 KB = 1024 B); durations are `500ms`, `15s`, `5min`, `2h`, `7d` (a bare
number is milliseconds for keys ending in `.ms`, else seconds). Scope `table` means the key may be set as a
table property at CreateTable (`fluss-py table create --property KEY=VALUE`); it overrides the tablet
server's value for that table's buckets. Unknown table properties are refused.
"""


def reference_markdown() -> str:
    """docs/configuration.md: the intro, one table per scope, then the rules between keys."""
    out = [_INTRO]
    for scope in cfg.SCOPES:
        out.append(f"\n## {scope}\n\n| key | type | default | allowed | |\n|---|---|---|---|---|\n")
        for o in cfg.describe_options(scope):
            default = "—" if o.default is None else f"`{o.show(o.default)}`" if o.show(o.default) else "(empty)"
            doc = o.doc.replace("|", "\\|")
            out.append(f"| `{o.key}` | {o.type} | {default} | {o.allowed_text()} | {doc} |\n")
    out.append(
        "\n## Rules between keys\n\nChecked on a role's whole configuration at start, and on it with the dynamic "
        "values on top (docs/dynamic-config.md): `fluss-py config alter` refuses a value that breaks one over "
        "the defaults and the stored entities, and a server that would break one keeps its previous "
        "settings:\n\n"
    )
    out.extend(f"- {rule.rule}\n" for rule in cfg.CONSTRAINTS)
    return "".join(out)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "config", help="list the configuration keys with their defaults and ranges; describe/alter dynamic ones"
    )
    p.add_argument("--scope", choices=cfg.SCOPES, help="only the keys of this role, or table properties")
    p.add_argument("--markdown", action="store_true", help="print docs/configuration.md")
    p.set_defaults(func=run)
    dynconfig.add_subcommands(p)  # describe / alter: the dynamic configuration (docs/dynamic-config.md)


def run(args: argparse.Namespace) -> int:
    if args.markdown:
        print(reference_markdown(), end="")
        return 0
    from rich.table import Table

    from fluss_py.cli.common import console

    table = Table(title="configuration" + (f" ({args.scope})" if args.scope else ""))
    for column in ("key", "type", "default", "allowed", "scopes"):
        table.add_column(column, no_wrap=column != "allowed")
    for o in cfg.describe_options(args.scope):
        default = "" if o.default is None else o.show(o.default)
        table.add_row(o.key, o.type, default, o.allowed_text(), ",".join(o.roles))
    console().print(table)
    return 0
