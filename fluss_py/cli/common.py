"""What every client-side ``fluss-py`` command shares: where the cluster is, how to talk to it, how to print.

Bootstrap servers, first match wins:

1. ``--bootstrap-servers host:port,...``
2. the ``FLUSS_BOOTSTRAP_SERVERS`` environment variable
3. the local cluster's ``cluster.json`` in ``--dir`` (default ``./.fluss-cluster``): every coordinator and
   tablet server address it lists

Security settings (TLS files, user and password; docs/security.md), Kafka's convention, first match wins:

1. ``--command-config FILE``: a properties file of ``key=value`` lines (``security.tls.*``, ``security.user``,
   ``security.password``, and for ``user``/``acl`` the ``zookeeper.*`` keys)
2. the ``FLUSS_COMMAND_CONFIG`` environment variable naming such a file
3. ``DIR/security/client.properties`` of a local secure cluster (``cluster up --secure``)

then ``FLUSS_USER`` / ``FLUSS_PASSWORD`` override the user and password. Passwords are never printed.

``client_command(body)`` turns ``async def body(args, ctx) -> int`` into an argparse handler: it resolves
the bootstrap servers, runs the body on a fresh event loop, and maps failures to one line on stderr:
no bootstrap configured (exit 2), no server answering within ``--connect-timeout`` (exit 1), a FlussError
(exit 1). ``ctx.admin()`` returns the command's ``Admin``, connected (metadata fetched) on first use.

Output: ``emit_table`` prints a rich table for people or, with ``--json``, the JSON document the caller
built (machine-readable, stable keys).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import ssl
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from fluss_py import config as cfg
from fluss_py.cli import args as cli_args
from fluss_py.client import Admin
from fluss_py.errors import FlussError, RequestTimedOutError
from fluss_py.security.identity import PLAINTEXT, PeerIdentity, read_properties
from fluss_py.security.tls import client_ssl_context
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER, ClusterRecord
from fluss_py.testing.layout import DEFAULT_DIR
from fluss_py.types import TablePath

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
BOOTSTRAP_ENV = "FLUSS_BOOTSTRAP_SERVERS"
COMMAND_CONFIG_ENV = "FLUSS_COMMAND_CONFIG"
USER_ENV, PASSWORD_ENV = "FLUSS_USER", "FLUSS_PASSWORD"
DEFAULT_CONNECT_TIMEOUT = 5.0


class CliError(Exception):
    """A command failed with a message meant for the user (one line) and an exit code."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


# ---------------------------------------------------------------- arguments
def add_connection_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--bootstrap-servers, --dir and --connect-timeout (see module docstring)."""
    parser.add_argument(
        "--bootstrap-servers",
        type=cli_args.bootstrap_servers,
        metavar="HOST:PORT,...",
        help=f"servers to bootstrap from (default: ${BOOTSTRAP_ENV}, else the local cluster in --dir)",
    )
    parser.add_argument(
        "--dir", type=Path, default=DEFAULT_DIR, help="local cluster directory with cluster.json (default: %(default)s)"
    )
    parser.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help=f"client properties: TLS files, user, password (default: ${COMMAND_CONFIG_ENV}, else the local "
        "secure cluster's DIR/security/client.properties)",
    )
    parser.add_argument(
        "--connect-timeout",
        type=cli_args.finite(0.0, 3600.0),
        default=DEFAULT_CONNECT_TIMEOUT,
        metavar="S",
        help="seconds to wait for the first server to answer (default: %(default)s)",
    )
    return parser


def add_json_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def resolve_bootstrap(args: argparse.Namespace) -> tuple[str, str]:
    """(servers, where they came from); CliError(exit 2) when none is configured."""
    if getattr(args, "bootstrap_servers", None) is not None:  # checked by its type: never empty
        return args.bootstrap_servers, "--bootstrap-servers"
    env = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if env:
        try:
            return cli_args.bootstrap_servers(env), BOOTSTRAP_ENV
        except argparse.ArgumentTypeError as e:
            raise CliError(f"${BOOTSTRAP_ENV}: {e}", EXIT_USAGE) from None
    directory: Path = getattr(args, "dir", DEFAULT_DIR)
    try:
        record = ClusterRecord.load(directory)
    except FileNotFoundError:
        raise CliError(
            f"no bootstrap servers: pass --bootstrap-servers, set {BOOTSTRAP_ENV}, or start a local cluster "
            f"(`fluss-py cluster up --dir {directory}`)",
            EXIT_USAGE,
        ) from None
    except (ValueError, KeyError) as e:
        raise CliError(f"{directory}/cluster.json is unreadable: {e}", EXIT_USAGE) from None
    addresses = [p.rpc_address for p in record.by_role(COORDINATOR) + record.by_role(TABLET_SERVER)]
    if not addresses:
        raise CliError(f"{directory}/cluster.json lists no coordinator or tablet server", EXIT_USAGE)
    return ",".join(addresses), f"{directory}/cluster.json"


def client_settings(args: argparse.Namespace) -> tuple[dict[str, str], str]:
    """(client settings, where they came from): see the module docstring; ConfigError naming a bad key."""
    path: Path | None = getattr(args, "command_config", None)
    source = "--command-config"
    if path is None and os.environ.get(COMMAND_CONFIG_ENV, "").strip():
        path, source = Path(os.environ[COMMAND_CONFIG_ENV].strip()), COMMAND_CONFIG_ENV
    if path is None:
        local = Path(getattr(args, "dir", DEFAULT_DIR)) / "security" / "client.properties"
        if local.is_file():
            path, source = local, str(local)
    settings = read_properties(path) if path is not None else {}
    if path is None:
        source = "defaults (plaintext)"
    for env, key in ((USER_ENV, "security.user"), (PASSWORD_ENV, "security.password")):
        if os.environ.get(env):
            settings[key] = os.environ[env]
    cfg.Config(cfg.CLIENT, settings)  # unknown keys and bad values: ConfigError naming the key
    return settings, source


def resolve_security(args: argparse.Namespace) -> PeerIdentity:
    """What this command presents to the servers (TLS files, credentials)."""
    settings, _ = client_settings(args)
    return PeerIdentity.from_settings(settings)


def http_security(identity: PeerIdentity) -> tuple[ssl.SSLContext | None, dict[str, str]]:
    """(ssl context, headers) of an HTTP call to a server (HTTPS + Basic auth on a secure cluster)."""
    context = client_ssl_context(identity.tls) if identity.tls is not None else None
    if not identity.user:
        return context, {}
    token = base64.b64encode(f"{identity.user}:{identity.password}".encode()).decode()
    return context, {"Authorization": f"Basic {token}"}


def local_cluster(args: argparse.Namespace) -> ClusterRecord | None:
    """The local cluster's record when ``--dir`` holds one (for pids and coordinator addresses)."""
    try:
        return ClusterRecord.load(getattr(args, "dir", DEFAULT_DIR))
    except (FileNotFoundError, ValueError, KeyError):
        return None


def table_path(text: str) -> TablePath:
    """``db.table`` or ``table`` (database ``fluss``); a bad name is a usage error."""
    try:
        return TablePath.parse(text)
    except FlussError as e:
        raise CliError(str(e), EXIT_USAGE) from None


# ---------------------------------------------------------------- running
@dataclass
class Context:
    """One command run: the resolved bootstrap servers and the clients it opened (closed at the end)."""

    bootstrap: str
    source: str
    connect_timeout: float
    security: PeerIdentity = PLAINTEXT
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    _admin: Admin | None = None

    async def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(self.bootstrap, security=self.security)
            self.closers.append(self._admin.close)
            await self.connect(self._admin.metadata)
        return self._admin

    async def connect(self, metadata: Any) -> None:
        """Fetch metadata once; CliError naming the servers when none answers in time."""
        try:
            await metadata.update(timeout=self.connect_timeout)
        except RequestTimedOutError:
            raise CliError(
                f"cannot reach the cluster: no server at {self.bootstrap} (from {self.source}) answered "
                f"within {self.connect_timeout:g} s"
            ) from None

    def own(self, close: Callable[[], Awaitable[None]]) -> None:
        self.closers.append(close)

    async def close(self) -> None:
        for close in reversed(self.closers):
            try:
                await close()
            except Exception as e:  # closing must not hide the command's own result
                print(f"fluss-py: warning: closing a client failed: {e}", file=sys.stderr)
        self.closers.clear()


Body = Callable[[argparse.Namespace, Context], Awaitable[int]]


def client_command(body: Body) -> Callable[[argparse.Namespace], int]:
    """An argparse handler running ``body`` against the cluster (see module docstring)."""

    def handler(args: argparse.Namespace) -> int:
        try:
            bootstrap, source = resolve_bootstrap(args)
            timeout = getattr(args, "connect_timeout", DEFAULT_CONNECT_TIMEOUT)
            ctx = Context(bootstrap, source, timeout, resolve_security(args))
            return asyncio.run(_run(body, args, ctx))
        except CliError as e:
            print(f"fluss-py: {e}", file=sys.stderr)
            return e.code

    handler.__doc__ = body.__doc__
    return handler


async def _run(body: Body, args: argparse.Namespace, ctx: Context) -> int:
    try:
        return await body(args, ctx)
    except FlussError as e:
        raise CliError(str(e)) from None
    finally:
        await ctx.close()


# ---------------------------------------------------------------- output
def console() -> Console:
    c = Console()
    return c if c.is_terminal else Console(width=200)


def emit_table(
    args: argparse.Namespace,
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    document: Any,
) -> None:
    """Print ``document`` as JSON with ``--json``, else ``rows`` as a rich table."""
    if getattr(args, "json", False):
        print_json(document)
        return
    table = Table(title=title)
    for col in columns:
        table.add_column(col, no_wrap=True)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console().print(table)


def emit_names(args: argparse.Namespace, names: list[str]) -> None:
    """One name per line, or a JSON list with ``--json``."""
    if getattr(args, "json", False):
        print_json(names)
    else:
        for name in names:
            print(name)


def print_json(document: Any) -> None:
    print(json.dumps(document, indent=2, sort_keys=False))


def ids(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)
