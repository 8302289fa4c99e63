"""KvStore: one bucket replica's RocksDB (the ``rocksdict`` binding), the rows and the applied offset.

Layout (docs/primary-key-tables.md §3.5), in ``<data dir>/<table_id>-<bucket>/kv/``::

    b"r" + encoded key   -> the encoded row (docs §3.1)
    b"m:applied"         -> 8 bytes big-endian: every change of the log below this offset is in the rows

Every change of the rows is one ``WriteBatch`` that also writes the applied offset (invariant 3): after a crash
the rows and the applied offset agree, whatever RocksDB kept of its (unsynced) WAL. A store whose applied
offset is unreadable (wrong length) or absent while rows exist is reported as such (``applied_offset`` None);
the ``KvTablet`` rebuilds it (invariant 4).

Failures (docs/primary-key-tables.md §9): every method that calls RocksDB raises a ``KvStoreError`` (its disk
failed, or the store is broken: ``kv/store_errors.py``) and tells ``KvResources.on_error`` first. A store that
RocksDB cannot open because it is corrupt or misses a file is emptied and made again (``recreated``): the log
rebuilds it (invariant 4).

Memory: every store of a server shares one ``KvResources``: one block cache, and one write-buffer manager that
charges the memtables to that cache, so all KV tablets of a server stay under ``kv.memory`` together however
many buckets it hosts.

Synchronous and single-owner like a ``LogTablet``: the replica layer calls it from the event loop only.
"""

from __future__ import annotations

import logging
import shutil
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import rocksdict

from fluss_py.kv.store_errors import KvStoreError, classify, failure, rocksdb_call

log = logging.getLogger(__name__)

ROW_PREFIX = b"r"
_ROW_END = b"s"  # the first key after every row key
APPLIED_KEY = b"m:applied"
_OFFSET = struct.Struct(">q")
WRITE_BUFFER_BYTES = 4 * 1024 * 1024  # one memtable of one bucket (the server-wide limit is kv.memory)
MAX_OPEN_FILES = 64  # per store: thousands of buckets must not exhaust the descriptor limit
_UNSYNCED = rocksdict.WriteOptions()
_SYNCED = rocksdict.WriteOptions()
_SYNCED.sync = True


class KvResources:
    """The RocksDB memory shared by every KV store of one tablet server: a block cache of ``memory_bytes``
    that also pays for the memtables (``WriteBufferManager``), so the whole budget is one number.
    ``on_error`` (the replica layer's) is told of every failed RocksDB call of these stores, with the store's
    directory."""

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self.on_error: Callable[[Path, KvStoreError], None] | None = None
        self.cache = rocksdict.Cache(memory_bytes)
        self._write_buffers = rocksdict.WriteBufferManager.new_write_buffer_manager_with_cache(
            memory_bytes, False, self.cache
        )

    def options(self) -> rocksdict.Options:
        opts = rocksdict.Options(raw_mode=True)
        opts.create_if_missing(True)
        opts.set_write_buffer_size(min(WRITE_BUFFER_BYTES, max(self.memory_bytes // 4, 64 * 1024)))
        opts.set_max_write_buffer_number(2)
        opts.set_write_buffer_manager(self._write_buffers)
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(self.cache)
        table.set_bloom_filter(10, False)  # point lookups of absent keys (inserts) skip most files
        table.set_cache_index_and_filter_blocks(True)  # in the budget too: one number is the whole memory
        opts.set_block_based_table_factory(table)
        opts.set_max_open_files(MAX_OPEN_FILES)
        opts.set_keep_log_file_num(2)
        opts.set_max_log_file_size(1024 * 1024)
        return opts

    @property
    def usage_bytes(self) -> int:
        """Bytes of the shared cache in use (blocks and the memtables charged to it)."""
        return int(self.cache.get_usage())


@dataclass(frozen=True, slots=True)
class StoreFootprint:
    """What ``KvStore.footprint`` reports for /metrics and ``table describe``."""

    sst_bytes: int  # on disk, in live SST files (the WAL is not counted: it is replayed into them)
    memtable_bytes: int
    rows_estimate: int


class KvStore:
    """Owns one RocksDB directory; see the module docstring."""

    def __init__(self, path: Path, resources: KvResources) -> None:
        self.path = Path(path)
        self._resources = resources
        self._db: rocksdict.Rdict | None = rocksdict.Rdict(str(self.path), resources.options())
        self.recreated: str | None = None  # why ``open`` emptied and made it again (RocksDB's text)

    @classmethod
    def open(cls, path: Path, resources: KvResources) -> KvStore:
        """Open (creating if needed) the store in ``path``; one RocksDB finds corrupt or missing a file is
        made again, empty. Raises ``KvStoreError`` (told to ``on_error``) when that cannot be done."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return cls(path, resources)
        except Exception as e:
            broken = classify(e)
            if broken is None or not broken.missing_or_corrupt:
                error = failure(e, path, resources.on_error)
                raise error from error.__cause__
        log.warning("%s: RocksDB cannot open the KV store (%s); emptied, the log rebuilds it", path, broken.rocksdb)
        try:
            rocksdict.Rdict.destroy(str(path), resources.options())
            shutil.rmtree(path, ignore_errors=True)
            store = cls(path, resources)
        except Exception as e:
            error = failure(e, path, resources.on_error)
            raise error from error.__cause__
        store.recreated = broken.rocksdb
        return store

    @property
    def resources(self) -> KvResources:
        return self._resources

    @property
    def db(self) -> rocksdict.Rdict:
        if self._db is None:
            raise RuntimeError(f"{self.path}: KV store is closed")
        return self._db

    @property
    def closed(self) -> bool:
        return self._db is None

    # ------------------------------------------------------------------ the applied offset
    @rocksdb_call
    def applied_offset(self) -> int | None:
        """The stored applied offset; 0 for an empty store; None when it cannot be trusted (unreadable, or
        rows without one: the store was not written by ``write``)."""
        raw = self.db.get(APPLIED_KEY)
        if raw is None:
            return 0 if self._first_row_key() is None else None
        if len(raw) != _OFFSET.size:
            return None
        value = _OFFSET.unpack(raw)[0]
        return value if value >= 0 else None

    def _first_row_key(self) -> bytes | None:
        it = self.db.iter()
        try:
            it.seek(ROW_PREFIX)
            if not it.valid():
                it.status()  # raises when it stopped on an error (a read the disk failed), not at the end
                return None
            return it.key() if it.key().startswith(ROW_PREFIX) else None
        finally:
            del it

    # ------------------------------------------------------------------ writes
    @rocksdb_call
    def write(self, changes: Mapping[bytes, bytes | None], applied_offset: int, *, sync: bool = False) -> None:
        """Put (row) or delete (None) each key and set the applied offset, in one atomic ``WriteBatch``.

        ``sync``: the WAL is fsynced before this returns. Applying forwards needs no sync (a power cut loses a
        suffix of the applied changes, which the replay applies again); going backwards does (an undo before
        a truncation: a power cut must not bring back rows of changes the log no longer holds)."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        for key, row in changes.items():
            if row is None:
                batch.delete(ROW_PREFIX + key)
            else:
                batch.put(ROW_PREFIX + key, row)
        batch.put(APPLIED_KEY, _OFFSET.pack(applied_offset))
        self.db.write(batch, _SYNCED if sync else _UNSYNCED)

    @rocksdb_call
    def reset(self, applied_offset: int) -> None:
        """Drop every row (the directory is destroyed and made again: the space comes back at once) and start
        at ``applied_offset``."""
        self._close_db(flush=False)
        rocksdict.Rdict.destroy(str(self.path), self._resources.options())
        shutil.rmtree(self.path, ignore_errors=True)
        self._db = rocksdict.Rdict(str(self.path), self._resources.options())
        self.write({}, applied_offset, sync=True)

    # ------------------------------------------------------------------ reads
    @rocksdb_call
    def get(self, key: bytes) -> bytes | None:
        return self.db.get(ROW_PREFIX + key)

    @rocksdb_call
    def multi_get(self, keys: Iterable[bytes]) -> list[bytes | None]:
        wanted = [ROW_PREFIX + k for k in keys]
        return list(self.db.get(wanted)) if wanted else []

    def prefix(self, prefix: bytes, limit: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        """Up to ``limit`` (key, row) whose key starts with ``prefix``, in key order; and whether more match."""
        start = ROW_PREFIX + prefix
        return self._range(start, lambda k: k.startswith(start), limit, skip=None)

    def scan(self, after_key: bytes | None, limit: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        """Up to ``limit`` (key, row) in key order, after ``after_key`` (None: from the first); and whether
        rows remain."""
        start = ROW_PREFIX + (after_key or b"")
        skip = start if after_key is not None else None
        return self._range(start, lambda k: k.startswith(ROW_PREFIX), limit, skip=skip)

    @rocksdb_call
    def _range(self, start: bytes, inside, limit: int, skip: bytes | None) -> tuple[list[tuple[bytes, bytes]], bool]:
        out: list[tuple[bytes, bytes]] = []
        it = self.db.iter()
        try:
            it.seek(start)
            if skip is not None and it.valid() and it.key() == skip:
                it.next()
            while it.valid():
                key = it.key()
                if not inside(key):
                    return out, False
                if len(out) >= limit:
                    return out, True
                out.append((key[len(ROW_PREFIX) :], it.value()))
                it.next()
            it.status()  # raises when it stopped on an error, not at the end: never a short answer
            return out, False
        finally:
            del it

    def items(self) -> list[tuple[bytes, bytes]]:
        """Every (key, row) in key order (tests and tools: the whole table in memory)."""
        rows, _ = self.scan(None, 2**62)
        return rows

    # ------------------------------------------------------------------ accounting
    @rocksdb_call
    def footprint(self) -> StoreFootprint:
        db = self.db
        rows = int(db.property_int_value("rocksdb.estimate-num-keys") or 0)
        return StoreFootprint(
            int(db.property_int_value("rocksdb.live-sst-files-size") or 0),
            int(db.property_int_value("rocksdb.cur-size-all-mem-tables") or 0),
            max(rows - 1, 0),  # the applied-offset key is not a row
        )

    # ------------------------------------------------------------------ lifecycle
    def _close_db(self, *, flush: bool) -> None:
        db, self._db = self._db, None
        if db is None:
            return
        if flush:
            db.close()  # flushes the memtables into SST files
        else:
            del db  # as a crash would: what is not in an SST file is in the WAL, replayed at the next open

    @rocksdb_call
    def close(self) -> None:
        self._close_db(flush=True)

    def close_without_flush(self) -> None:
        self._close_db(flush=False)

    def delete(self) -> None:
        self._close_db(flush=False)
        shutil.rmtree(self.path, ignore_errors=True)

    def __repr__(self) -> str:
        return f"KvStore({self.path})"
