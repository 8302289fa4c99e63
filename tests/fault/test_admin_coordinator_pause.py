"""An admin client leaves a coordinator leader that stops answering (docs/client.md "Admin").

Two coordinators; the leader is SIGSTOPped while an admin client (request timeout 2 s) asks the coordinator
leader for the cluster's metadata every 300 ms. The standby takes over once the leader's ZooKeeper session
expires. Calls must then succeed, answered by the new leader, while the old one is still stopped, and keep
succeeding. Printed: the election time (pause until the new leader reports itself) and how long after it the
first call succeeded (the target is within a second; not asserted as a time, the behaviour is).
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass

import pytest

from fluss_py.client import Admin
from fluss_py.testing.faults import pause, resume
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.procs import wait_until
from tests.fault.replication_support import bootstrap

pytestmark = pytest.mark.fault

REQUEST_TIMEOUT_S = 2.0
INTERVAL_S = 0.3


@dataclass
class AdminCall:
    start: float
    end: float
    answered_by: int | None  # the port of the coordinator that answered (it names itself), None on failure
    error: str | None


class PeriodicAdmin:
    """Calls ``describe_cluster`` every ``INTERVAL_S`` on its own thread and loop; ``calls`` grows."""

    def __init__(self, servers: str) -> None:
        self.servers = servers
        self.calls: list[AdminCall] = []
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: self._main(), name="periodic-admin", daemon=True)

    def start(self) -> PeriodicAdmin:
        self._thread.start()
        return self

    def stop(self) -> list[AdminCall]:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the admin caller did not stop"
        if self.failure is not None:
            raise self.failure
        return self.calls

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:
            self.failure = e

    async def _run(self) -> None:
        async with Admin(self.servers, request_timeout=REQUEST_TIMEOUT_S) as admin:
            while not self._stop.is_set():
                start = time.monotonic()
                try:
                    md = await admin.describe_cluster()
                    self.calls.append(AdminCall(start, time.monotonic(), md.coordinator.port, None))
                except Exception as e:  # a failed call is a result of the experiment
                    self.calls.append(AdminCall(start, time.monotonic(), None, f"{type(e).__name__}: {e}"))
                await asyncio.sleep(INTERVAL_S)


def test_admin_calls_reach_the_new_coordinator_leader_while_the_old_one_is_stopped(cluster_factory) -> None:
    cluster = cluster_factory(coordinators=2, tablet_servers=3)
    old = cluster.wait_for_leader(15)
    caller = PeriodicAdmin(bootstrap(cluster)).start()
    old_port = int(cluster.get(old).rpc_address.rsplit(":", 1)[1])
    try:
        wait_until(lambda: any(c.answered_by == old_port for c in caller.calls), 15, message="a first answer")
        t_pause = pause(cluster, old)
        try:
            new = cluster.wait_for_leader(SESSION_TIMEOUT_S + 15, exclude=[old])
            t_elected = time.monotonic()
            new_port = int(cluster.get(new).rpc_address.rsplit(":", 1)[1])

            def answered_by_new(n: int) -> bool:
                return sum(1 for c in caller.calls if c.answered_by == new_port) >= n

            wait_until(lambda: answered_by_new(1), 20, message="a call answered by the new leader")
            first_ok = next(c for c in caller.calls if c.answered_by == new_port)
            mark = len(caller.calls)
            wait_until(lambda: len(caller.calls) >= mark + 5, 20, message="five more calls")
            after = caller.calls[mark : mark + 5]
            assert cluster.paused(old), "the old leader was stopped throughout"
        finally:
            resume(cluster, old)
    finally:
        calls = caller.stop()
    assert all(c.answered_by == new_port for c in after), [c.error for c in after]  # and keep succeeding
    failed = [c for c in calls if c.error is not None]
    print(
        f"\nelection (pause -> new leader reports itself): {t_elected - t_pause:.2f}s; first call answered by the "
        f"new leader ended {first_ok.end - t_elected:+.2f}s after it (started {first_ok.start - t_elected:+.2f}s); "
        f"{len(failed)} call(s) failed meanwhile"
    )
