"""``fluss-py cluster ...``: a local cluster of real processes (ZooKeeper, coordinators, tablet servers).

    fluss-py cluster up [--dir DIR] [--coordinators 3] [--tablet-servers 3] [--zookeeper N|HOST:PORT[,...]]
                        [--netns] [--secure] [-D k=v] [--supervise [--restart-initial-delay S]
                        [--restart-max-delay S] [--restart-limit N] [--restart-window S]]
    fluss-py cluster status [--dir DIR] [--json]
    fluss-py cluster down [--dir DIR] [--timeout 15]
    fluss-py cluster stop|start NAME [--dir DIR]
    fluss-py cluster kill NAME [--signal KILL|TERM|STOP|CONT] [--dir DIR]
    fluss-py cluster servers [--json]     (live servers as the cluster sees them: fluss_py.cli.cluster_servers)
    fluss-py cluster partition|isolate|heal|netem ...   (network faults on a --netns cluster: cluster_net.py)

``--zookeeper 3`` runs an ensemble of 3 ZooKeeper members (``zookeeper-1..3``); ``--zookeeper HOST:PORT``
uses an existing ZooKeeper. ``--netns`` puts every process on its own test host (network namespace,
198.18.0.0/15 address on a private bridge; see fluss_py/testing/netns.py).

``up --secure`` makes the cluster's CA, certificates, an admin user with an ACL allowing it everything and
``DIR/security/client.properties``, which every client command run with ``--dir DIR`` reads by default
(testing/secure.py, docs/security.md): TLS with client certificates on every port, passwords, ACLs,
ZooKeeper ACLs. ``up`` starts the processes detached (they outlive this command), waits until the cluster is ready and
writes ``DIR/cluster.json``; every other subcommand reads that file. NAME is ``zookeeper``,
``coordinator-<id>`` or ``tablet-server-<id>`` (see ``status``). The machinery is ``fluss_py.testing``.

``up --supervise`` starts each coordinator and tablet server under a supervisor process of its own
(fluss_py/testing/supervisor.py) that restarts it when it crashes (exponential backoff, a crash-loop limit;
not after exit 0 or exit 2); ``status`` shows each one's supervisor state, restarts and last exit; ``stop``
and ``down`` stop on purpose (never restarted); ``kill`` is a crash; ``start`` starts a new supervisor.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from fluss_py.cli.args import bootstrap_servers, config_override, finite, int_in
from fluss_py.cli.console import console_url
from fluss_py.config import parse_overrides
from fluss_py.testing.cluster import CLIENT, DEFAULT_DIR, ClusterError, LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR
from fluss_py.testing.netns import NetnsError
from fluss_py.testing.supervision import RestartPolicy
from fluss_py.testing.zookeeper import ZKCLI, ZooKeeperUnavailable

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
SIGNALS = {"KILL": signal.SIGKILL, "TERM": signal.SIGTERM, "STOP": signal.SIGSTOP, "CONT": signal.SIGCONT}
CLI_TICK_TIME = 2000  # ms: sessions of 4..40 s, so the yaml's 15 s session timeout is allowed


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("cluster", help="start, inspect and stop a local cluster of real processes")
    sub = parser.add_subparsers(dest="cluster_command", metavar="SUBCOMMAND", required=True)

    def with_dir(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="cluster directory (default: %(default)s)")
        return p

    up = with_dir(sub.add_parser("up", help="start ZooKeeper, coordinators and tablet servers; wait until ready"))
    up.add_argument("--coordinators", type=int_in(0, 9), default=3,
                    help="number of coordinators (default: %(default)s)")  # fmt: skip
    up.add_argument("--tablet-servers", type=int_in(0, 99), default=3,
                    help="number of tablet servers (default: %(default)s)")  # fmt: skip
    up.add_argument("--zookeeper", type=zookeeper_spec, metavar="N|HOST:PORT", default="1",
                    help="N (1..9): start an ensemble of N ZooKeeper nodes (default 1); "
                         "HOST:PORT[,...]: use that ZooKeeper")  # fmt: skip
    up.add_argument("--netns", action="store_true",
                    help="every process on its own network namespace (test hosts; root needed)")  # fmt: skip
    up.add_argument("--timeout", type=finite(0.0, 3600.0), default=60.0,
                    help="seconds to wait for readiness (default: 60)")  # fmt: skip
    up.add_argument("-D", dest="overrides", action="append", default=[], metavar="KEY=VALUE", type=config_override,
                    help="config override for every server (repeatable)")  # fmt: skip
    up.add_argument("--secure", action="store_true",
                    help="TLS + client certificates, passwords, ACLs, ZooKeeper ACLs (docs/security.md)")  # fmt: skip
    up.add_argument("--supervise", action="store_true",
                    help="run each server under a supervisor that restarts it when it crashes")  # fmt: skip
    up.add_argument("--restart-initial-delay", type=finite(0.0, 3600.0, lo_open=False), metavar="S",
                    help="--supervise: first backoff in seconds, doubled per restart within the window "
                         f"(default: {RestartPolicy.initial_delay:g})")  # fmt: skip
    up.add_argument("--restart-max-delay", type=finite(0.0, 3600.0, lo_open=False), metavar="S",
                    help=f"--supervise: longest backoff in seconds (default: {RestartPolicy.max_delay:g})")  # fmt: skip
    up.add_argument("--restart-limit", type=int_in(1, 1000), metavar="N",
                    help="--supervise: give up after N restarts within the window "
                         f"(default: {RestartPolicy.max_restarts})")  # fmt: skip
    up.add_argument("--restart-window", type=finite(0.0, 86400.0), metavar="S",
                    help="--supervise: the crash-loop window in seconds "
                         f"(default: {RestartPolicy.window:g})")  # fmt: skip
    up.set_defaults(func=cmd_up)

    status = with_dir(sub.add_parser("status", help="table of processes: alive, role, state, leader"))
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
    status.set_defaults(func=cmd_status)

    down = with_dir(sub.add_parser("down", help="stop every process (SIGTERM, then SIGKILL after --timeout)"))
    down.add_argument("--timeout", type=finite(0.0, 3600.0), default=15.0, help="grace period in seconds (default: 15)")
    down.set_defaults(func=cmd_down)

    stop = with_dir(sub.add_parser("stop", help="stop one process gracefully (SIGKILL after --timeout)"))
    stop.add_argument("name")
    stop.add_argument("--timeout", type=finite(0.0, 3600.0), default=15.0)
    stop.set_defaults(func=cmd_stop)

    start = with_dir(sub.add_parser("start", help="start one stopped process again (same id, ports, dirs)"))
    start.add_argument("name")
    start.add_argument("--timeout", type=finite(0.0, 3600.0), default=60.0, help="seconds to wait for readiness")
    start.add_argument("--no-wait", action="store_true", help="do not wait until it is ready")
    start.set_defaults(func=cmd_start)

    kill = with_dir(sub.add_parser("kill", help="send a signal to one process (default KILL)"))
    kill.add_argument("name")
    kill.add_argument("--signal", choices=sorted(SIGNALS), default="KILL")
    kill.set_defaults(func=cmd_kill)

    from fluss_py.cli.cluster_servers import register_subcommand  # a client command: see that module

    register_subcommand(sub)
    from fluss_py.cli.cluster_net import register_subcommands as register_net

    register_net(sub, with_dir)


def zookeeper_spec(text: str) -> str:
    """``--zookeeper``: a number of members to start (1..9), or HOST:PORT[,HOST:PORT...] of a ZooKeeper to use."""
    if text.strip().isdigit():
        return str(int_in(1, 9)(text))
    return bootstrap_servers(text)


def _err(message: str) -> None:
    print(f"fluss-py cluster: {message}", file=sys.stderr)


def _open(directory: Path) -> LocalCluster | None:
    if not LocalCluster.exists(directory):
        _err(f"no cluster in {directory} (no cluster.json): run `fluss-py cluster up --dir {directory}`")
        return None
    return LocalCluster.open(directory)


def restart_policy(args: argparse.Namespace) -> RestartPolicy | None:
    """``up``'s restart policy (None without --supervise); ValueError for a bad combination."""
    given = {
        key: value
        for key, value in (
            ("initial_delay", args.restart_initial_delay),
            ("max_delay", args.restart_max_delay),
            ("max_restarts", args.restart_limit),
            ("window", args.restart_window),
        )
        if value is not None
    }
    if not args.supervise:
        if given:
            raise ValueError("--restart-initial-delay, --restart-max-delay, --restart-limit and --restart-window "
                             "need --supervise")  # fmt: skip
        return None
    return RestartPolicy(**given)


def cmd_up(args: argparse.Namespace) -> int:
    overrides = parse_overrides(args.overrides)
    try:
        policy = restart_policy(args)
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    if LocalCluster.exists(args.dir):
        old = LocalCluster.open(args.dir)
        old.detach()
        running = [n for n in old.names() if old.active(n)]
        if running and len(running) == len(old.names()):
            print(f"a local cluster is already running in {old.directory}:")
            if policy is not None and old.record.supervise is None:
                print("(it is not supervised: `cluster down`, then `cluster up --supervise`)")
            _print_table(old.status_rows())
            _print_next_steps(old, args.dir)
            return EXIT_OK
        if running:
            _err(f"part of a cluster is running in {args.dir} ({', '.join(running)}): `cluster down` first")
            return EXIT_FAILED
    external, count = (None, int(args.zookeeper)) if args.zookeeper.isdigit() else (args.zookeeper, 1)
    try:
        cluster = LocalCluster(
            args.dir,
            args.coordinators,
            args.tablet_servers,
            zookeeper=external,
            zookeepers=count,
            netns=args.netns,
            tick_time=CLI_TICK_TIME,
            overrides=overrides,
            secure=args.secure,
            supervise=policy,
        )
    except (ClusterError, NetnsError) as e:
        _err(f"cannot lay out the cluster: {e}")
        return EXIT_FAILED
    print(f"starting a local cluster in {cluster.directory} ...", flush=True)
    try:
        cluster.start(timeout=args.timeout)
        if args.coordinators:
            cluster.wait_for_leader(args.timeout)
    except (ClusterError, ZooKeeperUnavailable, AssertionError) as e:
        cluster.close(grace=0.0)
        _err(f"the cluster did not start: {e}")
        return EXIT_FAILED
    cluster.detach()
    _print_table(cluster.status_rows())
    _print_next_steps(cluster, args.dir)
    return EXIT_OK


def _print_next_steps(cluster: LocalCluster, directory: Path) -> None:
    me = sys.argv[0] if Path(sys.argv[0]).name == "fluss-py" else "fluss-py"
    d = "" if directory == DEFAULT_DIR else f" --dir {directory}"
    leader = cluster.coordinator_leader()
    print(f"\nZooKeeper: {cluster.zookeeper_address}   cluster file: {cluster.record_path()}")
    if cluster.record.supervise is not None:
        policy = RestartPolicy.from_dict(cluster.record.supervise)
        print(f"Supervised: each server restarts when it crashes ({policy.describe()}); "
              f"supervisor logs: {cluster.directory}/<name>/supervisor.log")  # fmt: skip
    print(f"Console: {console_url(cluster) or 'no coordinator leader yet (fluss-py console prints it)'}")
    if cluster.security is not None:
        print(f"Secure: TLS with client certificates; clients use {cluster.security.client_config} (user admin)")
    print("Next, try:")
    print(f"  {me} cluster status{d}")
    run = " ".join(cluster.net.exec_prefix(CLIENT)) + " " if cluster.net is not None else ""
    print(f"  {run}{ZKCLI} -server {cluster.zookeeper_address} get {cluster.zk_root}/coordinator/leader")
    if leader and cluster.security is not None:
        url = f"https://{cluster.get(leader).http_address}/metrics"  # the admin's credentials: docs/security.md
        print(f"  {run}curl -s -K {cluster.security.curl_config} {url} | head")
    elif leader:
        print(f"  {run}curl -s http://{cluster.get(leader).http_address}/metrics | head")
        print(f"  {me} cluster kill {leader}{d}     # kill -9 the leader, then `cluster status` again")
    if cluster.net is not None:
        print(f"  {me} cluster partition {cluster.names()[-1]} --from zookeeper{d}   # then: cluster heal{d}")
    print(f"  {me} cluster down{d}                  # or: make down")


def cmd_status(args: argparse.Namespace) -> int:
    cluster = _open(args.dir)
    if cluster is None:
        return EXIT_FAILED
    rows = cluster.status_rows()
    cluster.detach()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        _print_table(rows)
    return EXIT_OK


def _print_table(rows: list[dict[str, Any]]) -> None:
    table = Table(title="fluss_py local cluster")
    supervised = any(r.get("supervisor") for r in rows)
    columns = ["name", "role", "pid", "alive", "state", "leader", "epoch", "rpc", "http"]
    for col in columns + (["supervisor", "restarts", "last exit"] if supervised else []):
        table.add_column(col, no_wrap=col != "supervisor")
    for r in rows:
        alive = "[yellow]paused[/]" if r["paused"] else ("[green]yes[/]" if r["alive"] else "[red]no[/]")
        leader = "[bold]LEADER[/]" if r["leader"] else ("" if r["role"] != COORDINATOR else "-")
        epoch = "" if r["coordinator_epoch"] is None else str(r["coordinator_epoch"])
        cells = [
            r["name"], r["role"], str(r["pid"] or ""), alive, str(r["state"] or ""), leader, epoch,
            r["rpc_address"], r["http_address"] or "",
        ]  # fmt: skip
        if supervised:
            cells += _supervision_cells(r.get("supervisor"))
        table.add_row(*cells)
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    console.print(table)
    for r in rows:  # a final state other than a requested stop: say why, in full
        s = r.get("supervisor")
        if s and s["state"] in ("given-up", "bad-config", "exited"):
            console.print(f"{r['name']}: {s['state']}: {s['reason']}", soft_wrap=True)


def _supervision_cells(s: dict[str, Any] | None) -> list[str]:
    if s is None:
        return ["", "", ""]
    colour = {"running": "green", "backoff": "yellow", "given-up": "red", "bad-config": "red"}.get(s["state"])
    state = f"[{colour}]{s['state']}[/]" if colour else s["state"]
    return [state, str(s["restarts"]), s["last_exit"]]


def cmd_down(args: argparse.Namespace) -> int:
    if not LocalCluster.exists(args.dir):
        print(f"no cluster in {args.dir}: nothing to stop")
        return EXIT_OK
    cluster = LocalCluster.open(args.dir)
    result = cluster.down(timeout=args.timeout)
    if cluster.net is not None:
        cluster.remove_netns()
        cluster.record.netns = None
        cluster.save()
        print(f"test hosts {cluster.net.prefix}-*: removed")
        cluster.net = None
    cluster.detach()
    for name, how in result.items():
        print(f"{name}: {how}")
    if not result:
        print("nothing was running")
    return EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    cluster = _open(args.dir)
    if cluster is None:
        return EXIT_FAILED
    try:
        how = cluster.stop_process(args.name, timeout=args.timeout)
    except KeyError as e:
        _err(str(e.args[0]))
        return EXIT_USAGE
    finally:
        cluster.detach()
    print(f"{args.name}: {how}")
    return EXIT_OK


def cmd_start(args: argparse.Namespace) -> int:
    cluster = _open(args.dir)
    if cluster is None:
        return EXIT_FAILED
    try:
        handle = cluster.start_process(args.name, wait=not args.no_wait, timeout=args.timeout)
    except KeyError as e:
        _err(str(e.args[0]))
        return EXIT_USAGE
    except ClusterError as e:
        _err(str(e))
        return EXIT_FAILED
    finally:
        cluster.detach()
    if cluster.supervised(args.name):
        print(
            f"{args.name}: started (pid {handle.pid}) under a supervisor (pid {cluster.get(args.name).supervisor_pid})"
        )
    else:
        print(f"{args.name}: started (pid {handle.pid})")
    return EXIT_OK


def cmd_kill(args: argparse.Namespace) -> int:
    cluster = _open(args.dir)
    if cluster is None:
        return EXIT_FAILED
    try:
        cluster.get(args.name)
        pid = cluster.pid(args.name)
        sent = cluster.signal(args.name, SIGNALS[args.signal])
    except KeyError as e:
        _err(str(e.args[0]))
        return EXIT_USAGE
    finally:
        cluster.detach()
    if not sent:
        _err(f"{args.name} is not running")
        return EXIT_FAILED
    supervised = (
        "; its supervisor restarts it (see `cluster status`)"
        if args.signal == "KILL" and cluster.supervised(args.name)
        else ""
    )
    print(f"{args.name}: sent SIG{args.signal} to pid {pid}{supervised}")
    return EXIT_OK
