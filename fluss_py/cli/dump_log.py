"""``fluss-py dump-log PATH``: print (and verify) log files, read-only (like kafka-dump-log.sh).

    fluss-py dump-log PATH [--records] [--verify] [--max-value-bytes N]

PATH is a bucket directory (prints its leader-epoch-checkpoint, then every segment), a ``.log`` segment,
an ``.index``/``.timeindex``, a writer ``.snapshot`` or a ``leader-epoch-checkpoint``. ``--verify`` checks
every batch's CRC and header, its records (lengths and count; compressed ones decompressed up to 64 MiB),
offset continuity, that the file ends on a batch boundary, index entries against the log, and the epoch
cache against the batches' leader epochs; exit 1 on any problem.
Nothing is ever written.
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
from pathlib import Path

from fluss_py.cli.args import int_in
from fluss_py.errors import FlussError, LogCorruptedError
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from fluss_py.log.writer_state import SNAPSHOT_SUFFIX, WriterStateManager
from fluss_py.record.batch import MAX_DECOMPRESSED_BYTES, CompressionType, RecordBatch, iter_batches

_INDEX = struct.Struct(">ii")
_TIME_INDEX = struct.Struct(">qi")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dump-log", help="print and verify log segments, indexes and checkpoints", description=__doc__.split("\n")[0]
    )
    p.add_argument("path", metavar="PATH", help="bucket directory, .log, .index, .timeindex, .snapshot or checkpoint")
    p.add_argument("--records", action="store_true", help="also print every record")
    p.add_argument("--verify", action="store_true", help="check CRCs, offsets and indexes; exit 1 on corruption")
    p.add_argument("--max-value-bytes", type=int_in(0, 1 << 30), default=64,
                   help="truncate printed keys/values (default 64)")  # fmt: skip
    p.set_defaults(func=run)


class Dumper:
    """Walks files and prints; collects problems for ``--verify``."""

    def __init__(self, records: bool, verify: bool, max_value: int, out=None) -> None:
        self.records = records
        self.verify = verify
        self.max_value = max_value
        self.out = out
        self.problems: list[str] = []
        self.batch_epochs: list[tuple[int, int]] = []  # (base offset, leader epoch) of every batch seen

    def say(self, text: str) -> None:
        print(text, file=self.out or sys.stdout)

    def problem(self, text: str) -> None:
        self.problems.append(text)
        self.say(f"PROBLEM: {text}")

    # --- dispatch
    def dump(self, path: Path) -> None:
        if path.is_dir():
            self.dump_dir(path)
        elif path.name == LEADER_EPOCH_CHECKPOINT:
            self.dump_epochs(path)
        elif path.suffix == ".log":
            self.dump_segment(path, None)
        elif path.suffix == ".index":
            self.dump_index(path)
        elif path.suffix == ".timeindex":
            self.dump_time_index(path)
        elif path.suffix == SNAPSHOT_SUFFIX:
            self.dump_snapshot(path)
        else:
            raise LogCorruptedError(f"{path}: not a log file this tool knows")

    def dump_dir(self, d: Path) -> None:
        cache = self.dump_epochs(d / LEADER_EPOCH_CHECKPOINT) if (d / LEADER_EPOCH_CHECKPOINT).exists() else None
        expected: int | None = None
        for seg in sorted(d.glob("*.log")):
            expected = self.dump_segment(seg, expected)
        for snap in sorted(d.glob(f"*{SNAPSHOT_SUFFIX}")):
            self.dump_snapshot(snap)
        if self.verify and cache is not None:
            self.check_epochs(cache, d / LEADER_EPOCH_CHECKPOINT)

    # --- segments
    def dump_segment(self, path: Path, expected: int | None) -> int | None:
        base = _base_of(path)
        data = path.read_bytes()
        self.say(f"Dumping {path} ({len(data)} bytes)")
        if base is not None and expected is not None and data and base != expected:
            self.problem(f"{path.name}: segment starts at {base}, previous segment ended at {expected}")
        if expected is None:
            expected = base
        starts: dict[int, int] = {}
        end = 0
        for b in iter_batches(data):
            ok = b.is_valid()
            starts[b.position] = b.base_offset
            self.say(
                f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.record_count} "
                f"position: {b.position} size: {b.batch_length} leaderEpoch: {b.leader_epoch} "
                f"writerId: {b.writer_id} writerEpoch: {b.writer_epoch} baseSequence: {b.base_sequence} "
                f"lastSequence: {b.last_sequence} compression: {_compression_name(b.compression)} "
                f"createTime: {b.first_timestamp} maxTimestamp: {b.max_timestamp} crcValid: {str(ok).lower()}"
            )
            if not ok:
                try:
                    b.ensure_valid()
                except FlussError as e:
                    self.problem(f"{path.name} position {b.position}: {e}")
            elif self.verify:
                try:
                    b.ensure_valid_records(MAX_DECOMPRESSED_BYTES)
                except FlussError as e:
                    self.problem(f"{path.name} position {b.position}: {e}")
                    ok = False
            if expected is not None and b.base_offset != expected:
                self.problem(f"{path.name} position {b.position}: base offset {b.base_offset}, expected {expected}")
            expected = b.next_offset
            self.batch_epochs.append((b.base_offset, b.leader_epoch))
            end = b.position + b.batch_length
            if self.records and ok:
                self.dump_records(b)
        if end != len(data):
            self.problem(f"{path.name}: {len(data) - end} bytes after the last whole batch (torn tail)")
        if self.verify:
            idx = path.with_suffix(".index")
            if idx.exists():
                self.check_index(idx, base or 0, starts)
            tidx = path.with_suffix(".timeindex")
            if tidx.exists():
                self.check_time_index(tidx, base or 0, expected)
        return expected

    def dump_records(self, b: RecordBatch) -> None:
        try:
            for r in b.records():
                self.say(
                    f"| offset: {r.offset} timestamp: {r.timestamp_ms} key: {self._short(r.key)} "
                    f"value: {self._short(r.value)}"
                )
        except FlussError as e:
            self.problem(f"batch {b.base_offset}: records unreadable: {e}")

    def _short(self, v: bytes | None) -> str:
        if v is None:
            return "null"
        text = repr(v[: self.max_value])
        return text + ("..." if len(v) > self.max_value else "")

    # --- indexes
    def check_index(self, path: Path, base: int, starts: dict[int, int]) -> None:
        raw = path.read_bytes()
        if len(raw) % _INDEX.size:
            self.problem(f"{path.name}: size {len(raw)} is not a multiple of {_INDEX.size}")
            return
        prev = (-1, -1)
        for i, (rel, pos) in enumerate(_INDEX.iter_unpack(raw)):
            if rel <= prev[0] or pos <= prev[1]:
                self.problem(f"{path.name}: entry {i} ({rel}, {pos}) does not increase")
            if starts.get(pos) != base + rel:
                self.problem(f"{path.name}: entry {i} offset {base + rel} -> position {pos} is not that batch's start")
            prev = (rel, pos)

    def check_time_index(self, path: Path, base: int, end_offset: int | None) -> None:
        raw = path.read_bytes()
        if len(raw) % _TIME_INDEX.size:
            self.problem(f"{path.name}: size {len(raw)} is not a multiple of {_TIME_INDEX.size}")
            return
        prev = (None, -1)
        for i, (ts, rel) in enumerate(_TIME_INDEX.iter_unpack(raw)):
            if (prev[0] is not None and ts < prev[0]) or rel <= prev[1]:
                self.problem(f"{path.name}: entry {i} ({ts}, {rel}) does not increase")
            if end_offset is not None and base + rel >= end_offset:
                self.problem(f"{path.name}: entry {i} offset {base + rel} is past the segment end {end_offset}")
            prev = (ts, rel)

    def dump_index(self, path: Path) -> None:
        raw = path.read_bytes()
        base = _base_of(path) or 0
        self.say(f"Dumping {path}")
        for rel, pos in _INDEX.iter_unpack(raw[: len(raw) - len(raw) % _INDEX.size]):
            self.say(f"offset: {base + rel} position: {pos}")

    def dump_time_index(self, path: Path) -> None:
        raw = path.read_bytes()
        base = _base_of(path) or 0
        self.say(f"Dumping {path}")
        for ts, rel in _TIME_INDEX.iter_unpack(raw[: len(raw) - len(raw) % _TIME_INDEX.size]):
            self.say(f"timestamp: {ts} offset: {base + rel}")

    # --- checkpoints and snapshots
    def dump_epochs(self, path: Path) -> LeaderEpochCache | None:
        self.say(f"Dumping {path}")
        try:
            cache = LeaderEpochCache.load(path)
        except LogCorruptedError as e:
            self.problem(str(e))
            return None
        for e in cache.entries():
            self.say(f"epoch: {e.epoch} startOffset: {e.start_offset}")
        return cache

    def check_epochs(self, cache: LeaderEpochCache, path: Path) -> None:
        first = cache.earliest_entry
        for base, epoch in self.batch_epochs:
            if first is None or base < first.start_offset:
                continue
            known = cache.epoch_for_offset(base)
            if known != epoch:
                self.problem(f"{path.name}: says epoch {known} at offset {base}, the batch has epoch {epoch}")

    def dump_snapshot(self, path: Path) -> None:
        self.say(f"Dumping {path}")
        try:
            writers = WriterStateManager.read_snapshot(path)
        except Exception as e:
            self.problem(f"{path.name}: {e}")
            return
        for w in writers.values():
            batches = " ".join(f"[{b.first_seq}-{b.last_seq}]@{b.first_offset}-{b.last_offset}" for b in w.batches)
            self.say(
                f"writerId: {w.writer_id} writerEpoch: {w.writer_epoch} lastTimestamp: {w.last_timestamp} {batches}"
            )


def _base_of(path: Path) -> int | None:
    stem = path.name.split(".")[0]
    return int(stem) if stem.isdigit() else None


def _compression_name(code: int) -> str:
    try:
        return CompressionType(code).name
    except ValueError:
        return f"UNKNOWN({code})"


def run(args: argparse.Namespace) -> int:
    path = Path(args.path)
    if not path.exists():
        print(f"fluss-py dump-log: {path}: no such file or directory", file=sys.stderr)
        return 2
    dumper = Dumper(args.records, args.verify, args.max_value_bytes)
    try:
        dumper.dump(path)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    if args.verify:
        if dumper.problems:
            print(f"verify: {len(dumper.problems)} problem(s) found", file=sys.stderr)
            return 1
        print("verify: OK")
    return 0
