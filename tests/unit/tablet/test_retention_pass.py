"""The retention pass (tablet/retention.py): it deletes what retention allows, skips a log that left during
the pass, survives a failing log, and gives the loop back every ``YIELD_EVERY`` idle logs and after every
log that deleted segments (not once per log: 20,000 idle logs were 20,000 loop turns a minute)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fluss_py import config as cfg
from fluss_py.log.manager import LogManager
from fluss_py.tablet.retention import YIELD_EVERY, retention_pass
from fluss_py.types import TableBucket
from tests.unit.log.helpers import SMALL, batch

pytestmark = pytest.mark.unit


async def test_a_pass_deletes_what_retention_allows_and_yields_per_batch_of_idle_logs(tmp_path: Path) -> None:
    lm = LogManager(tmp_path, cfg.Config(cfg.TABLET))
    lm.load_logs()
    idle = 2 * YIELD_EVERY + 10
    for b in range(idle):
        lm.get_or_create(TableBucket(1, b), SMALL)
    big = lm.get_or_create(TableBucket(2, 0), dataclasses.replace(SMALL, retention_bytes=1))
    for i in range(40):
        big.append_as_leader(batch(3, ts=1_000 + i), 0)
    big.update_high_watermark(big.log_end_offset)
    segments = len(big.segments)
    assert segments > 2
    broken = lm.get_or_create(TableBucket(3, 0), SMALL)

    def fail(now_ms: int) -> int:
        raise RuntimeError("boom")

    broken.apply_retention = fail  # type: ignore[method-assign]
    pauses = 0

    async def pause() -> None:
        nonlocal pauses
        pauses += 1
        if pauses == 1:
            lm.delete(TableBucket(1, idle - 1))  # a StopReplica during the pass: that log is not visited

    deleted = await retention_pass(lm, 10_000, pause)
    assert deleted == segments - 1 and len(big.segments) == 1
    logs = idle + 2 - 1  # the idle ones, the big one and the broken one, less the one deleted meanwhile
    assert pauses == logs // YIELD_EVERY + 1  # one per YIELD_EVERY logs, and one after the deleting log


async def test_the_log_of_a_primary_key_bucket_keeps_every_segment(tmp_path: Path) -> None:
    """Its log is the changelog its KV is rebuilt from (docs/primary-key-tables.md §3.5): only idle writers
    expire."""
    from fluss_py.record.batch import CHANGELOG, RecordBatchBuilder

    lm = LogManager(tmp_path, cfg.Config(cfg.TABLET))
    lm.load_logs()
    config = dataclasses.replace(SMALL, segment_bytes=1024, retention_bytes=1, writer_expiration_s=1)
    pk = lm.get_or_create(TableBucket(4, 0), config)
    pk.holds_changelog = True
    for i in range(40):
        b = RecordBatchBuilder(writer_id=7, writer_epoch=0, base_sequence=i, attributes=CHANGELOG)
        b.append(b"\x03", b"k", 1_000 + i)
        pk.append_as_leader(b.build(), 0)
    pk.update_high_watermark(pk.log_end_offset)
    segments = len(pk.segments)
    assert segments > 2 and pk.writer_state(7) is not None
    assert await retention_pass(lm, 10_000_000) == 0
    assert len(pk.segments) == segments and pk.log_start_offset == 0
    assert pk.writer_state(7) is None  # idle for longer than writer.expiration
