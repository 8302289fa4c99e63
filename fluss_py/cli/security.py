"""``fluss-py user ...`` and ``fluss-py acl ...``: users and ACLs, kept in ZooKeeper (docs/security.md).

    fluss-py user add NAME [--password-file FILE]    (else $FLUSS_NEW_PASSWORD, else asked twice on the tty)
    fluss-py user list [--json]
    fluss-py user remove NAME
    fluss-py acl add    --principal P --operation OP[,OP] (--cluster | --database D | --table DB.T | --group G)
                        [--prefixed] [--deny]
    fluss-py acl list   [--principal P] [--json]
    fluss-py acl remove (same selection as add)

Like Kafka's ``kafka-acls --authorizer-properties``, these commands write ZooKeeper directly: they need
the servers' ZooKeeper credentials (``zookeeper.auth.user`` / ``.password``) from the command config
(``--command-config FILE``, ``$FLUSS_COMMAND_CONFIG``, or a local secure cluster's client.properties) and
ZooKeeper's address (``zookeeper.address`` / ``.root`` there, else the local cluster's cluster.json).
Every server sees a change within a watch round trip. A password is never taken from the command line
(``ps`` shows it), never printed; only its salted keys reach ZooKeeper.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from fluss_py import config as cfg
from fluss_py.cli.common import CliError, client_settings, emit_table, local_cluster
from fluss_py.errors import ConfigError
from fluss_py.security.scram import make_credential
from fluss_py.security.store import add_acls, delete_user, list_acls, list_users, put_user, remove_acls
from fluss_py.security_types import CLUSTER_NAME, Acl, Operation, PatternType, Permission, ResourceType
from fluss_py.testing.layout import DEFAULT_DIR
from fluss_py.zk.client import ZkClient
from fluss_py.zk.credentials import zk_credentials
from fluss_py.zk.values import ZkError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
NEW_PASSWORD_ENV = "FLUSS_NEW_PASSWORD"


def _common(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="local cluster directory (default: %(default)s)")
    p.add_argument("--command-config", type=Path, metavar="FILE", help="properties with the zookeeper.* keys")
    return p


def _resource_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--principal", required=True, help="user name or certificate CN; * for everyone")
    p.add_argument("--operation", required=True, help="READ, WRITE, CREATE, DROP, ALTER, DESCRIBE (comma list)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--cluster", action="store_true", help="the cluster (covers every database and table)")
    what.add_argument("--database", metavar="DB", help="a database (covers its tables)")
    what.add_argument("--table", metavar="DB.TABLE", help="a table")
    what.add_argument("--group", metavar="GROUP", help="a consumer group")
    p.add_argument("--prefixed", action="store_true", help="the name is a prefix (e.g. --table 'sales.')")
    p.add_argument("--deny", action="store_true", help="a DENY rule (wins over every ALLOW)")


def register(subparsers: argparse._SubParsersAction) -> None:
    user = subparsers.add_parser("user", help="users and their salted password keys (in ZooKeeper)")
    usub = user.add_subparsers(dest="user_command", metavar="SUBCOMMAND", required=True)
    add = _common(usub.add_parser("add", help="create a user or change its password"))
    add.add_argument("name")
    add.add_argument("--password-file", type=Path, help=f"read the password from FILE (else ${NEW_PASSWORD_ENV})")
    add.set_defaults(func=_zk_command(_user_add))
    ls = _common(usub.add_parser("list", help="user names"))
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=_zk_command(_user_list))
    rm = _common(usub.add_parser("remove", help="remove a user"))
    rm.add_argument("name")
    rm.set_defaults(func=_zk_command(_user_remove))

    acl = subparsers.add_parser("acl", help="access control lists (in ZooKeeper)")
    asub = acl.add_subparsers(dest="acl_command", metavar="SUBCOMMAND", required=True)
    aadd = _common(asub.add_parser("add", help="allow (or --deny) operations on a resource"))
    _resource_args(aadd)
    aadd.set_defaults(func=_zk_command(_acl_add))
    als = _common(asub.add_parser("list", help="every ACL"))
    als.add_argument("--principal")
    als.add_argument("--json", action="store_true")
    als.set_defaults(func=_zk_command(_acl_list))
    arm = _common(asub.add_parser("remove", help="remove ACLs (the same selection as add)"))
    _resource_args(arm)
    arm.set_defaults(func=_zk_command(_acl_remove))


Action = Callable[[argparse.Namespace, ZkClient, str], Awaitable[int]]


def _zk_command(action: Action) -> Callable[[argparse.Namespace], int]:
    def handler(args: argparse.Namespace) -> int:
        try:
            settings, _ = client_settings(args)
            config = cfg.Config(cfg.CLIENT, settings)
            address, root = _zookeeper(args, config, settings)
            return asyncio.run(_run(action, args, address, root, zk_credentials(config)))
        except CliError as e:
            print(f"fluss-py: {e}", file=sys.stderr)
            return e.code
        except ConfigError as e:
            print(f"fluss-py: configuration error: {e}", file=sys.stderr)
            return EXIT_USAGE

    return handler


def _zookeeper(args: argparse.Namespace, config: cfg.Config, settings: dict[str, str]) -> tuple[str, str]:
    if cfg.ZK_ADDRESS.key in settings:
        return config[cfg.ZK_ADDRESS], config[cfg.ZK_ROOT]
    record = local_cluster(args)
    if record is None:
        raise CliError("no ZooKeeper: set zookeeper.address in --command-config, or use --dir of a local cluster", 2)
    return record.zookeeper, record.zk_root


async def _run(action: Action, args: argparse.Namespace, address: str, root: str, auth: Any) -> int:
    zk = ZkClient(address, root, session_timeout=10.0, connection_timeout=10.0, auth=auth)
    try:
        await zk.start()
        return await action(args, zk, zk.root)
    except ZkError as e:
        raise CliError(f"ZooKeeper: {e}") from None
    finally:
        await zk.close()


# ---------------------------------------------------------------- users
def _new_password(args: argparse.Namespace) -> str:
    if args.password_file is not None:
        try:
            return args.password_file.read_text().rstrip("\n")
        except OSError as e:
            raise CliError(f"cannot read --password-file: {e}", EXIT_USAGE) from None
    if os.environ.get(NEW_PASSWORD_ENV):
        return os.environ[NEW_PASSWORD_ENV]
    if not sys.stdin.isatty():
        raise CliError(f"no password: pass --password-file or set {NEW_PASSWORD_ENV}", EXIT_USAGE)
    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        raise CliError("the passwords differ", EXIT_USAGE)
    return first


async def _user_add(args: argparse.Namespace, zk: ZkClient, root: str) -> int:
    if not args.name or "/" in args.name:
        raise CliError(f"invalid user name {args.name!r}", EXIT_USAGE)
    try:
        credential = make_credential(_new_password(args))
    except ValueError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    await put_user(zk, root, args.name, credential)
    print(f"user {args.name} saved (SCRAM-SHA-256, {credential.iterations} iterations)")
    return EXIT_OK


async def _user_list(args: argparse.Namespace, zk: ZkClient, root: str) -> int:
    names = await list_users(zk, root)
    emit_table(args, "users", ["name"], [[n] for n in names], names)
    return EXIT_OK


async def _user_remove(args: argparse.Namespace, zk: ZkClient, root: str) -> int:
    if not await delete_user(zk, root, args.name):
        raise CliError(f"no user {args.name}")
    print(f"user {args.name} removed")
    return EXIT_OK


# ---------------------------------------------------------------- ACLs
def _selected(args: argparse.Namespace) -> list[Acl]:
    if args.cluster:
        kind, name = ResourceType.CLUSTER, CLUSTER_NAME
    elif args.database:
        kind, name = ResourceType.DATABASE, args.database
    elif args.table:
        kind, name = ResourceType.TABLE, args.table
    else:
        kind, name = ResourceType.GROUP, args.group
    try:
        ops = [Operation(o.strip().upper()) for o in args.operation.split(",") if o.strip()]
    except ValueError:
        raise CliError(f"unknown operation in {args.operation!r}", EXIT_USAGE) from None
    pattern = PatternType.PREFIXED if args.prefixed else PatternType.LITERAL
    permission = Permission.DENY if args.deny else Permission.ALLOW
    return [Acl(args.principal, kind, pattern, name, op, permission) for op in ops]


async def _acl_add(args: argparse.Namespace, zk: ZkClient, root: str) -> int:
    acls = _selected(args)
    await add_acls(zk, root, acls)
    for a in acls:
        print(f"added: {a}")
    return EXIT_OK


async def _acl_remove(args: argparse.Namespace, zk: ZkClient, root: str) -> int:
    acls = _selected(args)
    await remove_acls(zk, root, acls)
    for a in acls:
        print(f"removed: {a}")
    return EXIT_OK


async def _acl_list(args: argparse.Namespace, zk: ZkClient, root: str) -> int:
    acls = [a for a in await list_acls(zk, root) if args.principal in (None, a.principal)]
    rows = [
        [a.principal, a.permission.value, a.operation.value, a.resource_type.value, a.pattern.value, a.name]
        for a in acls
    ]
    doc = [dict(zip(["principal", "permission", "operation", "resource_type", "pattern", "name"], r, strict=True))
           for r in rows]  # fmt: skip
    emit_table(args, "ACLs", ["principal", "permission", "operation", "resource", "pattern", "name"], rows, doc)
    return EXIT_OK
