"""``fluss-py bench [WORKLOAD ...]``: the benchmark suite (the runner of ``make bench``, tests/bench/).

    fluss-py bench                 # every workload
    fluss-py bench cluster scale   # modules whose name contains "cluster" or "scale"

The suite lives in the source checkout (tests/bench/), next to the installed package; each cluster workload
starts a fresh local cluster (and a NATS JetStream peer when nats-server is installed). Results go to
``bench-results/<timestamp>.json`` and a table. Exit 0 unless a workload raised; 2 without a checkout.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("bench", help="run the benchmark suite", description=__doc__.split("\n")[0])
    p.add_argument("workloads", nargs="*", metavar="WORKLOAD", help="cluster, produce, scale, log, replica, ...")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not (CHECKOUT / "tests" / "bench" / "__main__.py").exists():
        print(f"fluss-py bench: no tests/bench in {CHECKOUT} (needs a source checkout)", file=sys.stderr)
        return 2
    if str(CHECKOUT) not in sys.path:
        sys.path.insert(0, str(CHECKOUT))
    runner = importlib.import_module("tests.bench.__main__")
    unknown = [w for w in args.workloads if not runner.modules([w])]
    if unknown:
        known = ", ".join(m.removeprefix("bench_") for m in runner.modules([]))
        print(f"fluss-py bench: no workload matches {', '.join(unknown)} (known: {known})", file=sys.stderr)
        return 2
    if args.list:
        for name in runner.modules(args.workloads):
            print(name.removeprefix("bench_"))
        return 0
    return runner.main(list(args.workloads))
