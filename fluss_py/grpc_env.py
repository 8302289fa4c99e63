"""gRPC core's I/O engine for this process: the classic poller unless the user chose otherwise.

grpcio 1.85 runs its sockets on the EventEngine by default. A message received then crosses three threads
before Python sees it (EventEngine's epoll thread, its worker pool that parses HTTP/2, grpc.aio's completion
queue poller) and the asyncio loop is woken by the last. With the EventEngine experiments off, gRPC falls
back to the classic iomgr, where the thread that polls the completion queue reads the socket itself: one
thread hop per message instead of three. Measured on two cores (docs/performance.md "gRPC's I/O engine"):
a bidirectional-stream round trip between two processes p50 91-143 µs instead of 183-221 µs, and 60-99 µs of
CPU per round trip on either side instead of 96-140 µs — the cost every produce, fetch and replication
message pays.

gRPC reads ``GRPC_EXPERIMENTS`` once, when ``grpc`` is first imported, so ``apply`` runs from the package's
``__init__`` (every ``fluss_py`` import runs it first) and must not import gRPC. It changes nothing when:
- ``GRPC_EXPERIMENTS`` is already set, even to the empty string (the user's choice; empty = gRPC's defaults);
- ``grpc`` is already imported (too late to matter; a program that imports gRPC before ``fluss_py`` keeps
  gRPC's defaults);
- the installed grpcio is not a version the names were tested with (``TESTED_GRPCIO``): a later grpcio may
  drop or rename the experiments, and gRPC logs an error for every name it does not know.
Who may call: the package's ``__init__``; idempotent.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

ENV = "GRPC_EXPERIMENTS"

CLASSIC_IO = (
    "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints,-event_engine_callback_cq"
)
"""The EventEngine experiments switched off: client and server sockets, every other endpoint, and the
completion queue's callbacks. Off one by one they gain little (each leaves the EventEngine's threads in the
path of the others); off together, the figures above."""

TESTED_GRPCIO = ("1.85",)
"""``major.minor`` releases of grpcio whose experiment names are the four above."""


def choice(environ: dict[str, str] | os._Environ[str], grpc_imported: bool, grpcio_version: str | None) -> str | None:
    """The value to give ``GRPC_EXPERIMENTS``, or None to leave the environment alone. Pure."""
    if ENV in environ or grpc_imported or grpcio_version is None:
        return None
    if ".".join(grpcio_version.split(".")[:2]) not in TESTED_GRPCIO:
        return None
    return CLASSIC_IO


_VERSION = re.compile(r'__version__\s*=\s*"""([0-9][^"]*)"""')


def _installed_grpcio() -> str | None:
    """grpcio's version from its ``_grpcio_metadata.py``, without importing ``grpc`` (which would read the
    environment) or ``importlib.metadata`` (30 ms of imports at every start)."""
    spec = importlib.util.find_spec("grpc")
    if spec is None or spec.origin is None:
        return None
    try:
        found = _VERSION.search((Path(spec.origin).parent / "_grpcio_metadata.py").read_text())
    except OSError:
        return None
    return found.group(1) if found else None


def apply() -> None:
    """Set ``GRPC_EXPERIMENTS`` for this process (and the processes it starts) when ``choice`` says so."""
    if ENV in os.environ or "grpc" in sys.modules:
        return  # decided without the metadata lookup
    value = choice(os.environ, False, _installed_grpcio())
    if value is not None:
        os.environ[ENV] = value
