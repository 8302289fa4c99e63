"""Helpers shared by the benchmark modules and the peer workloads: result rows, percentiles, pacing."""

from __future__ import annotations

import asyncio
import os
import statistics
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager


def row(name: str, value: float, unit: str, target: str = "", ok: bool = True, peer: float | None = None) -> dict:
    """One result; ``ratio`` = value / peer (throughput: higher is better; latency and stalls: lower)."""
    out = dict(name=name, value=value, unit=unit, target=target, ok=ok)
    if peer is not None:
        out["peer"] = peer
        out["ratio"] = value / peer if peer else None
    return out


def p50_p99_ms(samples: list[float]) -> tuple[float, float]:
    """Median and 99th percentile of ``samples`` (seconds), in milliseconds."""
    s = sorted(samples)
    return statistics.median(s) * 1e3, s[min(len(s) - 1, int(len(s) * 0.99))] * 1e3


async def paced(rate: float, n: int) -> AsyncIterator[int]:
    """Yield 0..n-1, the i-th at start + i / rate (never early; late ones at once)."""
    start = time.perf_counter()
    for i in range(n):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        yield i


@contextmanager
def servers_from(tree: str | None, env: dict[str, str] | None = None) -> Iterator[None]:
    """Inside: processes started get ``PYTHONPATH=tree`` (servers running another checkout's code, for
    A/B runs) and the variables of ``env``; nothing changes when ``tree`` and ``env`` are None."""
    changes = ({"PYTHONPATH": tree} if tree else {}) | (env or {})
    before = {name: os.environ.get(name) for name in changes}
    os.environ.update(changes)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
