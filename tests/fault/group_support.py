"""Helpers of the consumer-group fault tests: ``fluss-py consume --group`` member processes and their logs.

Each member is a real CLI process (own session, killed by PID at teardown even when the test fails). Its
log holds stdout (``<bucket>\\t<offset>\\t<value>`` per record, ``--print-offsets``) and stderr
(``assigned: 5-0 5-3 (member M epoch E)`` / ``revoked: ...``), from which the test rebuilds what the
process read and which buckets it believes it owns.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.groups import commit_offsets
from fluss_py.client.metadata import ClusterMetadata
from fluss_py.client.transport import GrpcTransport
from fluss_py.testing.procs import ProcessHandle
from fluss_py.types import TableBucket

FLUSS_PY = str(Path(sys.executable).parent / "fluss-py")


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
        member = Member(name, ProcessHandle.spawn(argv, log_file=log, die_with_parent=True), log)
        self.started.append(member)
        return member

    def close(self) -> None:
        for member in self.started:
            if member.handle.alive():
                member.handle.kill()
                member.handle.wait_exit(10.0)


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
            await commit_offsets(CoordinatorGateway(metadata, transport, request_timeout=20.0), group, offsets,
                                 member_id, epoch)  # fmt: skip
        finally:
            await metadata.close()
            await transport.close()

    asyncio.run(run())
