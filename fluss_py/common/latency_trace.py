"""Latency tracing of the acks=all and produce->consume paths (docs/performance.md "Where the latency goes").

Off unless the environment names a directory in ``FLUSS_LATENCY_TRACE`` (set by the latency probe,
``python -m tests.bench.latency_probe``, for the servers it starts and for itself). Then every process appends
``event bucket offset t_ns`` lines to ``<dir>/<pid>.trace``, ``t_ns`` from ``time.monotonic_ns`` — one clock
for every process on the machine, so legs are differences across processes. When off, ``mark`` is a global
flag check and costs nothing measurable; the probe measures the traced run next to an untraced one.
"""

from __future__ import annotations

import os
import time
from typing import IO

_DIR = os.environ.get("FLUSS_LATENCY_TRACE", "")
ENABLED = bool(_DIR)
_out: IO[str] | None = None


def _file() -> IO[str]:
    global _out
    if _out is None:  # (servers are started, never forked: one file per process)
        _out = open(os.path.join(_DIR, f"{os.getpid()}.trace"), "a", buffering=1)  # noqa: SIM115 (process-long)
    return _out


def mark(event: str, bucket: object, offset: int) -> None:
    """Record ``event`` for ``bucket`` at ``offset`` now (no-op unless tracing is on)."""
    if ENABLED:
        t = time.monotonic_ns()
        key = str(bucket).replace(" ", "")
        _file().write(f"{event} {key} {offset} {t}\n")  # line-buffered: a killed server loses nothing
