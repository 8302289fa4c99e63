"""A stopping server ends its liveness streams (tablet/liveness.py ``LivenessBeacon.close``): an open stream is
an RPC in flight, and the RPC server's stop waited its whole grace for the coordinator's."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.rpc.pb import tablet_pb2
from fluss_py.tablet.liveness import LivenessBeacon

pytestmark = pytest.mark.unit


async def test_close_ends_a_waiting_stream_without_waiting_for_the_next_beat() -> None:
    beacon = LivenessBeacon(1, "inc")
    beats = beacon.stream(tablet_pb2.WatchLivenessRequest(coordinator_id=0, interval_ms=600_000))
    first = await anext(beats)
    assert first.sequence == 0
    rest = asyncio.ensure_future(anext(beats))
    await asyncio.sleep(0)
    assert not rest.done() and beacon.streams == 1
    beacon.close()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(rest, 10)  # ten minutes between beats: only the close can end it
    assert beacon.streams == 0


async def test_a_stream_opened_after_close_ends_after_its_first_beat() -> None:
    beacon = LivenessBeacon(1, "inc")
    beacon.close()
    stream = beacon.stream(tablet_pb2.WatchLivenessRequest(coordinator_id=0, interval_ms=600_000))

    async def drain() -> list[int]:
        return [b.sequence async for b in stream]

    assert await asyncio.wait_for(drain(), 10) == [0]
