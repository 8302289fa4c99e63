"""``fluss-py cluster partition|isolate|heal|netem``: network faults on a local cluster started with ``--netns``.

    fluss-py cluster partition tablet-server-1 --from zookeeper,coordinator-1   # both ways, silent drops
    fluss-py cluster partition tablet-server-1 --from zookeeper --one-way       # only zookeeper -> ts-1
    fluss-py cluster isolate tablet-server-2 [--keep client]                    # cut from everyone else
    fluss-py cluster netem tablet-server-2 --delay 50ms [--jitter 10ms] --loss 10%
    fluss-py cluster heal                                                       # every rule and netem gone
    fluss-py cluster netns-clean                      # namespaces of crashed runs (also done by every new run)

Names are process names (see ``cluster status``), a role (``zookeeper``, ``coordinator``, ``tablet-server``:
every process of it) or ``client`` (the host for your own commands: ``ip netns exec <prefix>-client ...``).
The machinery is ``fluss_py.testing.nemesis``.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

from fluss_py.testing import nemesis
from fluss_py.testing.cluster import ClusterError, LocalCluster
from fluss_py.testing.netns import NetnsError, remove_stale

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def register_subcommands(sub: argparse._SubParsersAction, with_dir: Callable[..., argparse.ArgumentParser]) -> None:
    p = with_dir(sub.add_parser("partition", help="drop every packet between NAME and --from (test hosts)"))
    p.add_argument("name")
    p.add_argument("--from", dest="from_", required=True, metavar="A,B,...", help="names or roles, comma-separated")
    p.add_argument("--one-way", action="store_true", help="drop only packets from --from to NAME")
    p.set_defaults(func=cmd_partition)

    p = with_dir(sub.add_parser("isolate", help="cut NAME off from every other process (test hosts)"))
    p.add_argument("name")
    p.add_argument("--keep", default="", metavar="A,B,...", help="hosts it still reaches, e.g. client")
    p.set_defaults(func=cmd_isolate)

    p = with_dir(sub.add_parser("netem", help="latency, jitter and loss on NAME's link (test hosts)"))
    p.add_argument("name")
    p.add_argument("--delay", type=parse_ms, default=0.0, metavar="MS", help="e.g. 50ms")
    p.add_argument("--jitter", type=parse_ms, default=0.0, metavar="MS", help="e.g. 10ms")
    p.add_argument("--loss", type=parse_percent, default=0.0, metavar="PCT", help="e.g. 10%%")
    p.set_defaults(func=cmd_netem)

    p = with_dir(sub.add_parser("heal", help="remove every partition and netem of the cluster"))
    p.set_defaults(func=cmd_heal)

    p = sub.add_parser("netns-clean", help="delete the test hosts of crashed runs (owner gone, not a CLI cluster)")
    p.set_defaults(func=cmd_netns_clean)


def parse_ms(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 50ms, 0.2s)")
    return float(m.group(1)) * (1000.0 if m.group(2) == "s" else 1.0)


def parse_percent(text: str) -> float:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%?\s*", text)
    if not m or not 0 <= float(m.group(1)) <= 100:
        raise argparse.ArgumentTypeError(f"not a percentage in 0..100: {text!r} (e.g. 10%)")
    return float(m.group(1))


def _names(text: str) -> list[str]:
    return [n for n in text.split(",") if n.strip()]


def _with_cluster(args: argparse.Namespace, action: Callable[[LocalCluster], str]) -> int:
    directory: Path = args.dir
    if not LocalCluster.exists(directory):
        print(f"fluss-py cluster: no cluster in {directory}: run `fluss-py cluster up --netns`", file=sys.stderr)
        return EXIT_FAILED
    cluster = LocalCluster.open(directory)
    try:
        print(action(cluster))
    except KeyError as e:
        print(f"fluss-py cluster: {e.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    except (ClusterError, NetnsError) as e:
        print(f"fluss-py cluster: {e}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        cluster.detach()
    return EXIT_OK


def cmd_partition(args: argparse.Namespace) -> int:
    def act(cluster: LocalCluster) -> str:
        name = cluster.get(args.name).name
        others = nemesis.resolve(cluster, _names(args.from_))
        if args.one_way:
            nemesis.one_way(cluster, name, others)
            return f"{name}: dropping packets from {', '.join(others)}"
        nemesis.partition(cluster, name, others)
        return f"{name}: partitioned from {', '.join(others)}"

    return _with_cluster(args, act)


def cmd_isolate(args: argparse.Namespace) -> int:
    def act(cluster: LocalCluster) -> str:
        name = cluster.get(args.name).name
        nemesis.isolate(cluster, name, keep=_names(args.keep))
        return f"{name}: isolated" + (f" (still reaches {args.keep})" if args.keep else "")

    return _with_cluster(args, act)


def cmd_netem(args: argparse.Namespace) -> int:
    def act(cluster: LocalCluster) -> str:
        name = cluster.get(args.name).name
        nemesis.netem(cluster, name, args.delay, args.jitter, args.loss)
        return f"{name}: delay {args.delay:g}ms ± {args.jitter:g}ms, loss {args.loss:g}%"

    return _with_cluster(args, act)


def cmd_heal(args: argparse.Namespace) -> int:
    def act(cluster: LocalCluster) -> str:
        nemesis.heal(cluster)
        return "healed: every partition and netem removed"

    return _with_cluster(args, act)


def cmd_netns_clean(args: argparse.Namespace) -> int:
    removed = remove_stale()
    print(f"removed the test hosts of {', '.join(removed)}" if removed else "no leftovers of crashed runs")
    return EXIT_OK
