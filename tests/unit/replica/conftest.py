"""Fixtures of the replica tests (builders live in harness.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.replica.fakes import FakeClock
from tests.unit.replica.harness import ReplicaCluster


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def cluster3(clock: FakeClock, tmp_path: Path):
    c = ReplicaCluster(3, clock, tmp_path)
    yield c
    await c.close()
