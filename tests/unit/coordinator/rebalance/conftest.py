"""Fixtures of the rebalance tests."""

import pytest

from .rig import make


@pytest.fixture
async def grown():
    """3 servers, 30 buckets RF 3, then servers 4 and 5 join."""
    rig, table_id = await make()
    await rig.join(4, 5)
    rig.gateway.clear()
    yield rig, table_id
    await rig.channel.close()
