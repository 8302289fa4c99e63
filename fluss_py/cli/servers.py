"""``fluss-py coordinator`` and ``fluss-py tablet-server``: run one server process in the foreground.

    fluss-py coordinator   [--config PATH] [-D key=value ...]
    fluss-py tablet-server [--config PATH] [-D key=value ...]

Logs go to ``<log.dir>/coordinator-server.log`` / ``<log.dir>/tablet-server.log``. SIGTERM or SIGINT stops
gracefully (exit 0). Exit 2: unknown config key, bad value or one out of its range (the message names the
key, the value and the allowed range; nothing was written to ZooKeeper or the data directory), a config
file that cannot be read or is not UTF-8, a log.dir or log file that cannot be created. Exit 1: the
server failed (ZooKeeper unreachable within zookeeper.connection-timeout, duplicate tablet-server id, a
port that cannot be bound, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import threading
from functools import partial
from pathlib import Path
from typing import Any

import uvloop

from fluss_py import config as cfg
from fluss_py.common.gc_guard import GcGuard
from fluss_py.common.logging import setup_logging
from fluss_py.errors import ConfigError, FlussError

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction) -> None:
    for name, role, text in (
        ("coordinator", cfg.COORDINATOR, "run a coordinator server (Standby until elected Leader)"),
        ("tablet-server", cfg.TABLET, "run a tablet server"),
    ):
        parser = subparsers.add_parser(name, help=text, description=text)
        parser.add_argument(
            "--config", metavar="PATH", action="append", help="YAML file of key: value settings (repeatable)"
        )
        parser.add_argument(
            "-D", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override one setting"
        )
        parser.set_defaults(func=partial(_run, role))


def load_server_config(role: str, path: str | list[str] | None, overrides: list[str]) -> cfg.Config:
    """The role's config: every value checked against its range in the registry (ConfigError naming the
    key, the value and what is allowed), before the server touches ZooKeeper or its directories."""
    return cfg.load_config(role, path, cfg.parse_overrides(overrides))


def _run(role: str, args: argparse.Namespace) -> int:
    config = load_server_config(role, args.config, args.overrides)
    if role == cfg.COORDINATOR:
        from fluss_py.coordinator.server import CoordinatorServer

        log_file = start_logging(config, "coordinator-server.log")
        server: Any = CoordinatorServer(config)
    else:
        from fluss_py.tablet.server import TabletServer

        log_file = start_logging(config, "tablet-server.log")
        server = TabletServer(config)
    explicit = ", ".join(f"{k}={v}" for k, v in sorted(config.explicit().items()))
    log.info("fluss-py %s starting; log file %s; settings: %s", role, log_file, explicit or "defaults")
    if config.deprecations:
        log.warning("Deprecated configuration key(s), accepted for now (use the new names): %s",
                    "; ".join(config.deprecations))  # fmt: skip
    return serve(server)


def start_logging(config: cfg.Config, file_name: str) -> Path:
    """Create ``log.dir`` and open the log file in it: the only paths a server creates before it can log
    (data directories come later, with their failures in the log). One that cannot be created or opened (a
    file in the way, no permission, a read-only disk) is a ConfigError naming log.dir: exit 2, one line."""
    try:
        return setup_logging(config[cfg.LOG_DIR], file_name, config[cfg.LOG_LEVEL])
    except OSError as e:
        where = e.filename or Path(config[cfg.LOG_DIR]) / file_name
        raise ConfigError(cfg.LOG_DIR.key, f"cannot create or open {where} (the log): {e.strerror or e}") from None


GC_THRESHOLDS = (50_000, 20, 10)
"""The cyclic collector's thresholds in a server process (CPython's default: 700, 10, 10). A collection of
the youngest generation promotes whatever is still alive at that moment: with 700 that is most of any
request being built or applied (a fetch request of thousands of buckets, a NotifyLeaderAndIsr of 6667), and
every object promoted counts towards a full collection (one each time a quarter of the long-lived heap is
new), a pass over every object of every replica: 1-3 s at 20,000 buckets, pauses that landed in the middle
of failovers (docs/performance.md). With 50,000 such temporaries are freed by their reference counts before
the next young collection; cycles are still collected, later. The allocation counts miss garbage whose
weight is in bytes (a cycle holding a megabyte): ``GcGuard`` (common/gc_guard.py) runs a young collection
each time the resident set grew by 32 MiB, which bounds it."""


def serve(server: Any) -> int:
    """Run ``server.run()`` on a uvloop loop with SIGTERM/SIGINT wired to ``server.request_stop``."""
    gc.set_threshold(*GC_THRESHOLDS)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, server.request_stop)
        if hasattr(server, "reload_certificates"):
            loop.add_signal_handler(signal.SIGHUP, server.reload_certificates)  # docs/security.md
        guard = loop.create_task(GcGuard().run(), name="gc-guard")  # garbage the thresholds do not count
        guard.add_done_callback(_report_failure)
        try:
            await server.run()
        finally:
            guard.cancel()

    try:
        uvloop.run(main())
    except asyncio.CancelledError:
        log.info("Stopped before start-up completed")
        log.info("Server exited cleanly")
        return 0
    except FlussError as e:
        log.error("Server failed: %s", e)
        raise
    except Exception:
        log.exception("Server crashed")
        print("fluss-py: server crashed; see the log file", file=sys.stderr)
        return 1
    log.info("Server exited cleanly")
    exit_without_teardown(0)
    return 0


def _report_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("%s failed: %r (memory-driven collections stopped)", task.get_name(), task.exception())


def exit_without_teardown(code: int) -> None:
    """End the process now, skipping the interpreter's teardown, when nothing is left for it to do.

    The teardown frees every object one by one (a tablet server of 20,000 replicas: ~1 s of a core, the
    tail of a SIGTERM; docs/performance.md) and runs the ``atexit`` hooks. Called only after the server's
    ``run()`` returned without an error: every log is flushed, fsynced and closed and the clean-shutdown
    marker is written (``LogManager.shutdown``), the ZooKeeper session, RPC and HTTP servers are closed, and
    the event loop's default executor was joined by ``uvloop.run``. What the teardown would still do, done
    here: flush and close the log handlers (``logging.shutdown``, an ``atexit`` hook) and the standard
    streams. What only it can do, checked: join non-daemon threads (thread-pool workers among them; their
    ``atexit`` hook joins them) — if any is alive, this returns and the normal exit runs."""
    others = [t.name for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if others:
        log.info("Exiting through the interpreter's teardown: thread(s) %s still running", ", ".join(others))
        return
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or gone: nothing left to write
            pass
    os._exit(code)
