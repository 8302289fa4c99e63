"""``fluss-py verify``: run a workload under a seeded random schedule of faults, heal, and check the result.

    fluss-py verify [--time 120] [--seed 1] [--faults kill,pause,term,partition,netem,zookeeper]
                    [--zookeepers 3] [--coordinators 3] [--tablet-servers 5] [--producers 3] [--rate 30]
                    [--buckets 3] [--workload log|kv] [--keys 300] [--no-netns] [--cluster DIR]
                    [--out verify-out] [-D key=value]

Starts its own cluster on test hosts (root needed; ``--no-netns``: loopback, process faults only) unless
``--cluster DIR`` names one started by ``fluss-py cluster up --netns``. ``--workload kv``: a primary-key table
instead of a log table — ``--producers`` clients upsert and delete ``--keys`` random keys (acks=all, one write
at a time each) while one more looks them up; the verdict compares every key's final row with its last
acknowledged write, every lookup with the writes acknowledged before it and with the committed changelog, and
every replica's KV with the final rows and with its own log's replay (``fluss_py/verify/kv_checker.py``).
Writes ``OUT/report.json``, ``history.jsonl``, ``faults.json``, ``timeline.svg``. Exit 0: no violation; 1: a
violation, a process that exited by itself (a crash: restarted, and reported), or the run failed; 2: usage.
The machinery is ``fluss_py.verify`` (docs/fault-testing.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fluss_py.config import parse_overrides
from fluss_py.verify.runner import Verify, VerifyOptions
from fluss_py.verify.schedule import KINDS

EXIT_OK, EXIT_VIOLATION, EXIT_USAGE = 0, 1, 2


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("verify", help="check a cluster under faults (lost, duplicated, reordered, ...)")
    p.add_argument("--time", type=float, default=120.0, help="seconds of faults (default: %(default)s)")
    p.add_argument("--seed", type=int, default=1, help="seed of the fault schedule (default: %(default)s)")
    p.add_argument("--faults", default=",".join(KINDS), help="kinds, comma-separated (default: all)")
    p.add_argument("--zookeepers", type=int, default=3)
    p.add_argument("--coordinators", type=int, default=3)
    p.add_argument("--tablet-servers", type=int, default=5)
    p.add_argument("--producers", type=int, default=3)
    p.add_argument("--rate", type=float, default=30.0, help="records per second per producer")
    p.add_argument("--buckets", type=int, default=3)
    p.add_argument("--workload", choices=("log", "kv"), default="log", help="a log table, or a primary-key table")
    p.add_argument("--keys", type=int, default=300, help="keys of the kv workload (default: %(default)s)")
    p.add_argument("--no-netns", action="store_true", help="loopback cluster (process faults only)")
    p.add_argument("--cluster", type=Path, metavar="DIR", help="attach to this cluster instead of starting one")
    p.add_argument("--out", type=Path, default=Path("verify-out"), help="output directory")
    p.add_argument("-D", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=cmd_verify)


def cmd_verify(args: argparse.Namespace) -> int:
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        print(f"fluss-py verify: --faults takes {','.join(KINDS)}", flush=True)
        return EXIT_USAGE
    if args.workload == "kv" and not args.producers <= args.keys <= 1_000_000:
        print("fluss-py verify: --keys must be at least --producers (each writer owns keys) and at most 1000000")
        return EXIT_USAGE
    options = VerifyOptions(
        time=args.time,
        seed=args.seed,
        faults=kinds,
        zookeepers=args.zookeepers,
        coordinators=args.coordinators,
        tablet_servers=args.tablet_servers,
        producers=args.producers,
        rate=args.rate,
        buckets=args.buckets,
        workload=args.workload,
        keys=args.keys,
        table="fluss.verify_kv" if args.workload == "kv" else "fluss.verify",
        netns=not args.no_netns,
        cluster_dir=args.cluster,
        overrides={k: str(v) for k, v in parse_overrides(args.overrides).items()},
    )
    report = Verify(options, args.out).run()
    summary = json.loads((args.out / "report.json").read_text())
    keys = ("ok", "violations", "faults_by_kind", "longest_stall_s_by_kind", "crashes")
    print(json.dumps({k: summary[k] for k in keys}))
    print(
        f"sends {report.sends}, acked {report.acked}, failed {report.failed} ({report.failed_landed} landed anyway), "
        f"reads {report.reads}; report: {args.out / 'report.json'}, timeline: {args.out / 'timeline.svg'}"
    )
    if not report.ok or summary["crashes"]:
        for kind, examples in report.examples.items():
            for example in examples[:5]:
                print(f"VIOLATION {kind}: {example}")
        for crash in summary["crashes"]:
            print(f"CRASH {crash['process']} at {crash['t']}s (exit code {crash['exit_code']})")
        return EXIT_VIOLATION
    return EXIT_OK
