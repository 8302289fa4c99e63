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
from collections.abc import Callable, Iterator, Mapping
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

FLUSH_ROUND_DESCRIPTORS = 768  # descriptors one round of flush_rounds holds open at most

_BUCKET_DIR = re.compile(r"([0-9]+)-([0-9]+)")  # fullmatch: "$" matches before a final "\n"


def sync_and_close(jobs: list[FlushJob]) -> None:
    """The thread half of a flush off the loop (``flush_rounds``): fsync every job's descriptors, close them all."""
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
    periodic flush/checkpoint loop and at shutdown.

    Each log tells it when its offsets change (``LogTablet.on_change``): a flush round visits only the logs
    written since the last one, and a checkpoint round writes nothing when no offset changed and refreshes
    only the changed entries of its snapshot otherwise (docs/storage.md §7) — an idle server with 20,000
    logs does no per-log work. The same notice keeps ``held_bytes`` (the bytes of all its logs) and is passed
    on to ``on_log_change`` (the replica layer's led-size report), so neither scans the logs either.
    """

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
        self._to_flush: set[LogTablet] = set()  # changed since their last flush round
        self._offsets_changed: set[TableBucket] = set()  # changed (or added, removed) since the last snapshot
        # the offsets of the last snapshot, per checkpoint file: refreshed per changed log
        self._offsets: tuple[dict[TableBucket, int], dict[TableBucket, int], dict[TableBucket, int]] = ({}, {}, {})
        self.had_clean_shutdown = False
        self.held_bytes = 0  # bytes of every log held here: the sum of their size_in_bytes, kept per change
        self._counted: dict[TableBucket, int] = {}  # each log's size as counted in held_bytes
        self.on_log_change: Callable[[LogTablet], None] | None = None  # told after each log's own notice

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
            m = _BUCKET_DIR.fullmatch(path.name)
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

    def _watch(self, tablet: LogTablet, *, changed: bool = True) -> LogTablet:
        tablet.io_error = self._tablet_io_error
        tablet.on_change = self._log_changed
        if changed:
            self._log_changed(tablet)
        return tablet

    def _log_changed(self, tablet: LogTablet) -> None:
        tb = tablet.table_bucket
        self._to_flush.add(tablet)
        self._offsets_changed.add(tb)
        size = tablet.size_in_bytes
        self.held_bytes += size - self._counted.get(tb, 0)
        self._counted[tb] = size
        if self.on_log_change is not None:
            self.on_log_change(tablet)

    def _forget(self, table_bucket: TableBucket, tablet: LogTablet | None) -> None:
        """A log left this manager (deleted, set aside, its dir failed): its entries leave the checkpoints."""
        self._offsets_changed.add(table_bucket)
        self.held_bytes -= self._counted.pop(table_bucket, 0)
        if tablet is not None:
            tablet.on_change = None
            self._to_flush.discard(tablet)
            if self.on_log_change is not None:
                self.on_log_change(tablet)

    def _tablet_io_error(self, tablet: LogTablet, error: BaseException) -> None:
        if self.on_io_error is not None:
            self.on_io_error(self.data_dir, error)

    def close_all_without_flush(self) -> list[TableBucket]:
        """The dir failed: drop every log's descriptors (nothing more is written here); returns their buckets."""
        buckets = list(self.logs)
        for tb, tablet in self.logs.items():
            with contextlib.suppress(OSError):
                tablet.close_without_flush()
            self._forget(tb, tablet)
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
            config = log_config or self.default_log_config()
            if path.exists():  # a dir we did not load: validate it all
                self._watch(tablet := LogTablet.open(path, table_bucket, config, clean_shutdown=False))
            else:  # nothing on disk until its first write: nothing to flush or checkpoint until then either
                self._watch(tablet := LogTablet.create(path, table_bucket, config), changed=False)
            self.logs[table_bucket] = tablet
        return tablet

    def get(self, table_bucket: TableBucket) -> LogTablet | None:
        return self.logs.get(table_bucket)

    def delete(self, table_bucket: TableBucket) -> None:
        """Rename to ``-delete`` first so a crash mid-delete is finished at the next start."""
        tablet = self.logs.pop(table_bucket, None)
        self._forget(table_bucket, tablet)
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
        self._forget(table_bucket, tablet)
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

    @property
    def checkpoint_due(self) -> bool:
        """Some log's offsets changed (or a log came or went) since the last snapshot."""
        return bool(self._offsets_changed)

    def checkpoint_snapshot(self) -> tuple[int, list[tuple[OffsetCheckpoint, dict[TableBucket, int]]]]:
        """The offsets to checkpoint, read now, numbered: ``write_checkpoints`` may run it in another thread,
        and a later snapshot written meanwhile (a synchronous ``checkpoint``) wins (docs/storage.md §7). The
        last snapshot's offsets, with the logs that changed since then read again (copies, for the thread)."""
        self._checkpoint_seq += 1
        hws, rps, starts = self._offsets
        changed, self._offsets_changed = self._offsets_changed, set()
        for tb in changed:
            t = self.logs.get(tb)
            if t is None:
                hws.pop(tb, None)
                rps.pop(tb, None)
                starts.pop(tb, None)
            else:
                hws[tb], rps[tb], starts[tb] = t.high_watermark, t.recovery_point, t.log_start_offset
        return self._checkpoint_seq, [
            (self.hw_checkpoint, dict(hws)),
            (self.recovery_checkpoint, dict(rps)),
            (self.log_start_checkpoint, dict(starts)),
        ]

    @staticmethod
    def write_checkpoints(snapshot: tuple[int, list[tuple[OffsetCheckpoint, dict[TableBucket, int]]]]) -> None:
        seq, files = snapshot
        for checkpoint_file, offsets in files:
            checkpoint_file.write(offsets, seq)

    def flush_all(self) -> None:
        for t in self.logs.values():
            t.flush()

    def flush_rounds(self) -> Iterator[list[FlushJob]]:
        """The first half of a flush off the event loop (docs/storage.md §7), in rounds: each a list of
        jobs, one per log changed since its last flush and with unflushed data (its descriptors duplicated),
        holding at most ``FLUSH_ROUND_DESCRIPTORS`` descriptors together (three per dirty segment: thousands
        of dirty logs after a restart must not exhaust the descriptor limit). For each round the caller runs
        ``sync_and_close(jobs)`` in any thread, then ``end_flush_all(jobs)`` (moves the recovery points),
        before asking for the next. Logs not flushed when the caller stops early (an error, a cancel) are
        flushed by the next call (``replica/log_flush.py`` runs the steps)."""
        jobs: list[FlushJob] = []
        descriptors = 0
        todo, self._to_flush = list(self._to_flush), set()
        try:
            while todo:
                job = todo[-1].begin_flush()
                todo.pop()
                if job is not None:
                    jobs.append(job)
                    descriptors += len(job.descriptors)
                if jobs and (descriptors >= FLUSH_ROUND_DESCRIPTORS or not todo):
                    yield jobs
                    jobs, descriptors = [], 0
        finally:
            for j in jobs:
                j.close()
            # not flushed (or not known to be): the next call tries them again
            self._to_flush.update(t for t in [*todo, *(j.tablet for j in jobs)] if self.logs.get(t.table_bucket) is t)

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
