"""Fault injection on a LocalCluster's processes: kill -9, SIGSTOP/SIGCONT, and timed pauses.

    leader = cluster.wait_for_leader(10)
    with paused(cluster, leader):           # SIGSTOP now, SIGCONT on exit (even when the test fails)
        cluster.wait_for_leader(10, exclude=[leader])

All helpers return only once the kernel shows the new state (killed and reaped, stopped, running).
Who may call: the test's thread.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from fluss_py.testing.cluster import LocalCluster


def kill9(cluster: LocalCluster, name: str) -> float:
    """SIGKILL ``name`` and wait until it is gone; returns the monotonic time of the kill."""
    t = time.monotonic()
    cluster.kill(name)
    return t


def pause(cluster: LocalCluster, name: str) -> float:
    """SIGSTOP ``name`` (returns the monotonic time once it shows as stopped)."""
    cluster.pause(name)
    return time.monotonic()


def resume(cluster: LocalCluster, name: str) -> float:
    """SIGCONT ``name`` (returns the monotonic time once it runs again)."""
    cluster.resume(name)
    return time.monotonic()


@contextmanager
def paused(cluster: LocalCluster, name: str) -> Iterator[float]:
    """SIGSTOP for the duration of the block; SIGCONT afterwards if the process still exists."""
    t = pause(cluster, name)
    try:
        yield t
    finally:
        if cluster.alive(name):
            resume(cluster, name)
