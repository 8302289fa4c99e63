"""Helpers of the consumer-group fault tests: ``fluss-py consume --group`` member processes and their logs.

Each member is a real CLI process (own session, killed by PID at teardown even when the test fails). Its
log holds stdout (``<bucket>\\t<offset>\\t<value>`` per record, ``--print-offsets``) and stderr
(``assigned: 5-0 5-3 (member M epoch E)`` / ``revoked: ...``), from which the test rebuilds what the
process read and which buckets it believes it owns. ``Members.start_stuck`` starts a member whose
application can be made to stop polling (tests/fault/stuck_member.py), with the same log format.

``OwnershipSampler`` looks every 100 ms, in a thread of its own, at who owns which bucket: the coordinator's
ownership (each member's assigned buckets) and each process's own account.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fluss_py.client import ProducerOptions, SyncAdmin, SyncProducer
from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.groups import commit_offsets, raise_refused
from fluss_py.client.metadata import ClusterMetadata
from fluss_py.client.transport import GrpcTransport
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.procs import ProcessHandle, wait_until
from fluss_py.types import TableBucket

FLUSS_PY = str(Path(sys.executable).parent / "fluss-py")
STUCK_MEMBER = str(Path(__file__).with_name("stuck_member.py"))


def cli(cluster: Any, *argv: str) -> subprocess.CompletedProcess[str]:
    """``fluss-py ARGV --dir <the cluster's directory>``: its exit code and output (never raises on failure)."""
    return subprocess.run([FLUSS_PY, *argv, "--dir", str(cluster.directory)], capture_output=True, text=True,
                          timeout=60, check=False)  # fmt: skip


_CHANGE = re.compile(r"^(assigned|revoked): ([0-9\- ]*?)(?: \(member (\w*) epoch (-?\d+)\))?$")


@dataclass
class Member:
    name: str
    handle: ProcessHandle
    log: Path

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def records(self) -> list[tuple[int, int, str]]:
        out = []
        for line in self.text().splitlines():
            parts = line.split("\t")
            if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
                out.append((int(parts[0]), int(parts[1]), parts[2]))
        return out

    def table_changes(self) -> list[tuple[str, set[TableBucket], str, int]]:
        """(assigned|revoked, table buckets, member id, member epoch) in order."""
        out = []
        for line in self.text().splitlines():
            m = _CHANGE.match(line.strip())
            if m:
                buckets = {TableBucket(*map(int, tb.split("-"))) for tb in m.group(2).split()}
                out.append((m.group(1), buckets, m.group(3) or "", int(m.group(4) or 0)))
        return out

    def changes(self) -> list[tuple[str, set[int], str, int]]:
        """(assigned|revoked, bucket numbers, member id, member epoch) in order (one table)."""
        return [(what, {tb.bucket for tb in tbs}, mid, epoch) for what, tbs, mid, epoch in self.table_changes()]

    def owns_table_buckets(self) -> set[TableBucket]:
        """The table buckets the process reads now, by its own account."""
        owned: set[TableBucket] = set()
        for what, buckets, _, _ in self.table_changes():
            owned = owned | buckets if what == "assigned" else owned - buckets
        return owned

    def owns(self) -> set[int]:
        """The buckets the process reads now, by its own account."""
        owned: set[int] = set()
        for what, buckets, _, _ in self.changes():
            owned = owned | buckets if what == "assigned" else owned - buckets
        return owned


class Members:
    """Starts member processes; ``close`` kills every one still running (by PID)."""

    def __init__(self, directory: Path, cluster_dir: Path, table: str, group: str) -> None:
        self._dir = directory
        self._cluster_dir = cluster_dir
        self._table = table
        self._group = group
        self.started: list[Member] = []

    def start(self, name: str, *extra: str, session_timeout: float = 3.0) -> Member:
        log = self._dir / f"{name}.{len(self.started)}.log"
        argv = [
            FLUSS_PY, "consume", self._table, "--group", self._group, "--from-beginning", "--print-offsets",
            "--session-timeout", str(session_timeout), "--dir", str(self._cluster_dir), *extra,
        ]  # fmt: skip
        return self._spawn(name, argv, log)

    def start_stuck(self, name: str, bootstrap: str, stuck_file: Path, *, session_timeout: float,
                    max_poll_interval: float = 300.0) -> Member:  # fmt: skip
        """A member whose application stops polling while ``stuck_file`` exists (tests/fault/stuck_member.py)."""
        log = self._dir / f"{name}.{len(self.started)}.log"
        argv = [
            sys.executable, STUCK_MEMBER, "--bootstrap", bootstrap, "--table", self._table, "--group", self._group,
            "--stuck-file", str(stuck_file), "--session-timeout", str(session_timeout),
            "--max-poll-interval", str(max_poll_interval),
        ]  # fmt: skip
        return self._spawn(name, argv, log)

    def _spawn(self, name: str, argv: list[str], log: Path) -> Member:
        member = Member(name, ProcessHandle.spawn(argv, log_file=log, die_with_parent=True), log)
        self.started.append(member)
        return member

    def close(self) -> None:
        for member in self.started:
            if member.handle.alive():
                member.handle.kill()
                member.handle.wait_exit(10.0)


def setup_group(cluster_factory: Callable[..., LocalCluster], made: list[Members], tmp_path: Path, table: str,
                group: str, buckets: int, coordinators: int = 1, **coordinator_overrides: str):  # fmt: skip
    """A cluster of ``coordinators`` and one tablet server, ``table`` with ``buckets`` buckets and their
    leaders, and the ``Members`` of ``group`` (appended to ``made``): (cluster, bootstrap, admin, members)."""
    cluster = cluster_factory(coordinators=coordinators, tablet_servers=1, coordinator_overrides=coordinator_overrides)
    cluster.wait_for_leader(30)
    bootstrap = cluster.get(cluster.names()[-1]).rpc_address
    admin = SyncAdmin(bootstrap, request_timeout=20.0)
    admin.create_table(table, num_buckets=buckets, replication_factor=1)
    wait_until(lambda: all(b.leader >= 0 for b in admin.get_table_placement(table)[1]), 30, message="leaders")
    members = Members(tmp_path, cluster.directory, table, group)
    made.append(members)
    return cluster, bootstrap, admin, members


def produce(bootstrap: str, table: str, start: int, count: int) -> set[str]:
    """Records ``v<i>`` (key ``k<i>``) for i in [start, start + count), acknowledged by all replicas."""
    with SyncProducer(bootstrap, ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)) as p:
        futures = [p.send(table, f"v{i:06d}".encode(), key=f"k{i}".encode()) for i in range(start, start + count)]
        p.flush()
        for f in futures:
            f.result(timeout=60)
    return {f"v{i:06d}" for i in range(start, start + count)}


@pytest.fixture
def members() -> Iterator[list[Members]]:
    """Member groups a test starts (append each ``Members``): every process killed at teardown."""
    made: list[Members] = []
    try:
        yield made
    finally:
        for m in made:
            m.close()


def commit_as(bootstrap: str, group: str, offsets: Mapping[TableBucket, int], member_id: str, epoch: int) -> None:
    """CommitOffsets with a member's credentials (as a zombie member would send it)."""

    async def run() -> None:
        transport = GrpcTransport()
        metadata = ClusterMetadata(bootstrap, transport, request_timeout=20.0)
        try:
            gateway = CoordinatorGateway(metadata, transport, request_timeout=20.0)
            raise_refused(group, await commit_offsets(gateway, group, offsets, member_id, epoch))
        finally:
            await metadata.close()
            await transport.close()

    asyncio.run(run())


@dataclass
class Sample:
    at: float  # time.monotonic()
    server: dict[str, set[TableBucket]]  # the coordinator's ownership: member id -> assigned buckets
    accounts: dict[str, set[TableBucket]] = field(default_factory=dict)  # process name -> its own account
    doubled: set[TableBucket] = field(default_factory=set)  # buckets two live processes read at once


class OwnershipSampler:
    """Samples ownership every ``interval`` s in a thread of its own until ``stop`` (a context manager).

    A process's account is read from its log twice per sample, around the others' (p1 p2 .. pn p1 p2 .. pn):
    a bucket is *doubled* only when process i had it at both of its reads and another process had it at a
    read made between them, so a bucket handed over between two reads is never counted as read twice.
    ``watched()`` names the processes whose accounts count (a stuck process, no longer a member by the
    coordinator's account, is left out by the caller)."""

    def __init__(self, bootstrap: str, group: str, watched: Callable[[], list[Member]], interval: float = 0.1) -> None:
        self._admin = SyncAdmin(bootstrap, request_timeout=20.0)
        self._group = group
        self._watched = watched
        self._interval = interval
        self.samples: list[Sample] = []
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ownership-sampler", daemon=True)

    def __enter__(self) -> OwnershipSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(30.0)
        self._admin.close()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.samples.append(self._sample())
            except Exception as e:  # kept; the test asserts there are none
                self.errors.append(e)

    def _sample(self) -> Sample:
        view = self._admin.describe_group_members(self._group)
        sample = Sample(time.monotonic(), {m.member_id: set(m.assigned) for m in view.members})
        procs = self._watched()
        first = [p.owns_table_buckets() for p in procs]
        second = [p.owns_table_buckets() for p in procs]
        for i, p in enumerate(procs):
            sample.accounts[p.name] = second[i]
            held = first[i] & second[i]
            for j in range(len(procs)):
                if j != i:
                    sample.doubled |= held & (first[j] if j > i else second[j])
        return sample

    def server_doubled(self) -> list[tuple[float, TableBucket]]:
        """(time, bucket) of every sample in which two members owned the bucket by the coordinator's account."""
        out = []
        for s in self.samples:
            seen: set[TableBucket] = set()
            for owned in s.server.values():
                out += [(s.at, tb) for tb in owned & seen]
                seen |= owned
        return out
