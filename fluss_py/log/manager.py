"""LogManager: every bucket log of one data dir, plus the per-dir checkpoints and clean-shutdown marker.

Data dir layout::

    <data_dir>/
      .fluss_cleanshutdown                 present only between a clean shutdown and the next start
      high-watermark-checkpoint            0 / count / "<table_id> <bucket> <hw>" lines
      recovery-point-offset-checkpoint     same format: offsets below which everything was fsynced
      log-start-offset-checkpoint          same format
      <table_id>-<bucket>/                 one LogTablet (see tablet.py)
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path

from fluss_py import config as cfg
from fluss_py.log.checkpoint import (
    HIGH_WATERMARK_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    OffsetCheckpoint,
    take_clean_shutdown_marker,
    write_clean_shutdown_marker,
)
from fluss_py.log.config import LogConfig
from fluss_py.log.results import FlushJob
from fluss_py.log.tablet import LogTablet
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

_BUCKET_DIR = re.compile(r"^(\d+)-(\d+)$")


def sync_and_close(jobs: list[FlushJob]) -> None:
    """The thread half of a flush off the loop (``begin_flush_all``): fsync every job's descriptors, close them all."""
    try:
        for job in jobs:
            job.sync()
    finally:
        for job in jobs:
            job.close()


def bucket_dir_name(tb: TableBucket) -> str:
    return f"{tb.table_id}-{tb.bucket}"


class LogManager:
    """Owns the logs of one data dir. Synchronous; the tablet server calls it from one task (or an
    executor thread it serialises), at start (``load_logs``), on replica creation/deletion, from the
    periodic flush/checkpoint loop and at shutdown."""

    def __init__(
        self, data_dir: Path, config: cfg.Config, on_io_error: Callable[[Path, BaseException], None] | None = None
    ) -> None:
        self.data_dir = Path(data_dir)
        self.config = config
        self.on_io_error = on_io_error  # told (data dir, error) when a log of this dir fails a disk operation
        self.verified_bytes = 0  # CRC-checked at the last load (unclean start)
        self.logs: dict[TableBucket, LogTablet] = {}
        self.hw_checkpoint = OffsetCheckpoint(self.data_dir / HIGH_WATERMARK_CHECKPOINT)
        self.recovery_checkpoint = OffsetCheckpoint(self.data_dir / RECOVERY_POINT_CHECKPOINT)
        self.log_start_checkpoint = OffsetCheckpoint(self.data_dir / LOG_START_OFFSET_CHECKPOINT)
        self._checkpoint_seq = 0  # snapshots taken (written in a thread by the replica layer: the newest wins)
        self.had_clean_shutdown = False

    def default_log_config(self) -> LogConfig:
        return LogConfig.from_config(self.config)

    def load_logs(
        self, configs_by_bucket: Mapping[TableBucket, LogConfig] | None = None
    ) -> dict[TableBucket, LogTablet]:
        """Recover every ``<table_id>-<bucket>`` dir (the marker is consumed first: a crash now is unclean)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        clean = take_clean_shutdown_marker(self.data_dir)
        self.had_clean_shutdown = clean
        hws = self._read_checkpoint(self.hw_checkpoint)
        rps = self._read_checkpoint(self.recovery_checkpoint)
        starts = self._read_checkpoint(self.log_start_checkpoint)
        configs = configs_by_bucket or {}
        for path in sorted(self.data_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith("-delete"):
                log.info("deleting %s (a deletion interrupted before)", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            m = _BUCKET_DIR.match(path.name)
            if not m:
                log.warning("%s: not a bucket directory; ignored", path)
                continue
            tb = TableBucket(int(m.group(1)), int(m.group(2)))
            self.logs[tb] = self._watch(
                LogTablet.open(
                    path,
                    tb,
                    configs.get(tb) or self.default_log_config(),
                    recovery_point=rps.get(tb, 0),
                    log_start_offset=starts.get(tb),
                    high_watermark=hws.get(tb, 0),
                    clean_shutdown=clean,
                )
            )
            self.verified_bytes += self.logs[tb].verified_bytes
        log.info(
            "%s: loaded %d logs after a %s shutdown", self.data_dir, len(self.logs), "clean" if clean else "unclean"
        )
        return dict(self.logs)

    def _watch(self, tablet: LogTablet) -> LogTablet:
        tablet.io_error = self._tablet_io_error
        return tablet

    def _tablet_io_error(self, tablet: LogTablet, error: BaseException) -> None:
        if self.on_io_error is not None:
            self.on_io_error(self.data_dir, error)

    def close_all_without_flush(self) -> list[TableBucket]:
        """The dir failed: drop every log's descriptors (nothing more is written here); returns their buckets."""
        buckets = list(self.logs)
        for tablet in self.logs.values():
            with contextlib.suppress(OSError):
                tablet.close_without_flush()
        self.logs.clear()
        return buckets

    @staticmethod
    def _read_checkpoint(cp: OffsetCheckpoint) -> dict[TableBucket, int]:
        try:
            return cp.read()
        except Exception as e:  # an unreadable checkpoint means "recover everything" (offset 0)
            log.warning(
                "%s: unreadable (%s); treating every offset in it as 0 (rewritten at the next checkpoint)", cp.path, e
            )
            return {}

    def get_or_create(self, table_bucket: TableBucket, log_config: LogConfig | None = None) -> LogTablet:
        tablet = self.logs.get(table_bucket)
        if tablet is None:
            path = self.data_dir / bucket_dir_name(table_bucket)
            tablet = self._watch(
                LogTablet.open(
                    path,
                    table_bucket,
                    log_config or self.default_log_config(),
                    clean_shutdown=not path.exists(),  # a dir we did not load: validate it all
                )
            )
            self.logs[table_bucket] = tablet
        return tablet

    def get(self, table_bucket: TableBucket) -> LogTablet | None:
        return self.logs.get(table_bucket)

    def delete(self, table_bucket: TableBucket) -> None:
        """Rename to ``-delete`` first so a crash mid-delete is finished at the next start."""
        tablet = self.logs.pop(table_bucket, None)
        path = self.data_dir / bucket_dir_name(table_bucket)
        if tablet is not None:
            tablet.close_without_flush()
        if path.exists():
            doomed = path.with_name(path.name + "-delete")
            path.rename(doomed)
            shutil.rmtree(doomed, ignore_errors=True)
        self.checkpoint()

    def set_aside(self, table_bucket: TableBucket) -> Path | None:
        """Close a log and rename its dir to ``<table_id>-<bucket>-stray`` (never loaded again; the operator
        deletes it), as Kafka does with stray replicas: a metadata mistake must not destroy data. Returns the
        new path (None if there was no dir)."""
        tablet = self.logs.pop(table_bucket, None)
        if tablet is not None:
            tablet.close()
        path = self.data_dir / bucket_dir_name(table_bucket)
        if not path.exists():
            return None
        aside = path.with_name(path.name + "-stray")
        n = 1
        while aside.exists():
            n += 1
            aside = path.with_name(f"{path.name}-stray{n}")
        path.rename(aside)
        self.checkpoint()
        return aside

    def checkpoint(self) -> None:
        """Write the three per-dir offset checkpoints (temp file + fsync + rename)."""
        self.write_checkpoints(self.checkpoint_snapshot())

    def checkpoint_snapshot(self) -> tuple[int, list[tuple[OffsetCheckpoint, dict[TableBucket, int]]]]:
        """The offsets to checkpoint, read now, numbered: ``write_checkpoints`` may run it in another thread,
        and a later snapshot written meanwhile (a synchronous ``checkpoint``) wins (docs/storage.md §7)."""
        self._checkpoint_seq += 1
        logs = self.logs.items()
        return self._checkpoint_seq, [
            (self.hw_checkpoint, {tb: t.high_watermark for tb, t in logs}),
            (self.recovery_checkpoint, {tb: t.recovery_point for tb, t in logs}),
            (self.log_start_checkpoint, {tb: t.log_start_offset for tb, t in logs}),
        ]

    @staticmethod
    def write_checkpoints(snapshot: tuple[int, list[tuple[OffsetCheckpoint, dict[TableBucket, int]]]]) -> None:
        seq, files = snapshot
        for checkpoint_file, offsets in files:
            checkpoint_file.write(offsets, seq)

    def flush_all(self) -> None:
        for t in self.logs.values():
            t.flush()

    def begin_flush_all(self) -> list[FlushJob]:
        """The first half of a flush off the event loop (docs/storage.md §7): one job per log with unflushed
        data (its descriptors duplicated). Then ``sync_and_close(jobs)`` in any thread, then
        ``end_flush_all(jobs)`` (moves the recovery points). If the sync never completes, no recovery point
        moves and the next flush syncs again (``replica/log_flush.py`` runs the three steps)."""
        jobs: list[FlushJob] = []
        try:
            for t in self.logs.values():
                job = t.begin_flush()
                if job is not None:
                    jobs.append(job)
        except BaseException:
            for job in jobs:
                job.close()
            raise
        return jobs

    @staticmethod
    def end_flush_all(jobs: list[FlushJob]) -> None:
        for job in jobs:
            job.tablet.end_flush(job)

    def shutdown(self) -> None:
        """Flush and close every log, checkpoint, then write the clean-shutdown marker (last)."""
        for t in self.logs.values():
            t.close()
        self.checkpoint()
        write_clean_shutdown_marker(self.data_dir)
