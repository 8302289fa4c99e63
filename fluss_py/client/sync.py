"""Thin synchronous wrappers: each object runs its asyncio client on a private event loop in a thread.

    producer = SyncProducer("127.0.0.1:9123")
    future = producer.send("db.t", b"v")        # blocks only for buffer room, like the async send
    bucket, offset = future.result()            # a concurrent.futures.Future
    producer.close()

Every coroutine method of the wrapped client is available as a blocking method with the same
arguments (``SyncAdmin(...).create_table(...)``, ``SyncConsumer(...).poll(1.0)``); plain methods (seek,
assignment) run on the loop too, so no state is touched from two threads.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

from fluss_py.client.admin import Admin
from fluss_py.client.consumer import Consumer
from fluss_py.client.kv import Deleter, Lookuper, Upserter
from fluss_py.client.producer import Producer, RecordMetadata

T = TypeVar("T")


class _LoopThread:
    """One event loop running forever in one daemon thread, until ``stop``."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        if threading.current_thread() is self._thread:
            raise RuntimeError("a sync client method was called from its own loop thread")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        if not self.loop.is_running():
            self.loop.close()


class _SyncProxy:
    """Blocking facade over an asyncio client built on a private loop."""

    def __init__(self, factory: Callable[[], Any], name: str) -> None:
        self._lt = _LoopThread(name)

        async def build() -> Any:
            return factory()

        self._client = self._lt.run(build())

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if inspect.iscoroutinefunction(attr):

            def call(*args: Any, **kwargs: Any) -> Any:
                return self._lt.run(attr(*args, **kwargs))

            return call
        if callable(attr):

            def call_on_loop(*args: Any, **kwargs: Any) -> Any:
                async def go() -> Any:
                    return attr(*args, **kwargs)

                return self._lt.run(go())

            return call_on_loop
        return attr

    def close(self, *args: Any, **kwargs: Any) -> None:
        try:
            self._lt.run(self._client.close(*args, **kwargs))
        finally:
            self._lt.stop()

    def _queued(self, queue: Coroutine[Any, Any, asyncio.Future[T]]) -> concurrent.futures.Future[T]:
        """Run ``queue`` (an async send that returns the future of its acknowledgement) on the loop; the
        acknowledgement as a ``concurrent.futures.Future``."""
        result: concurrent.futures.Future[T] = concurrent.futures.Future()

        def relay(fut: asyncio.Future[T]) -> None:
            if fut.cancelled():
                result.cancel()
            elif fut.exception() is not None:
                result.set_exception(fut.exception())  # type: ignore[arg-type]
            else:
                result.set_result(fut.result())

        async def go() -> None:
            fut = await queue
            fut.add_done_callback(relay)

        self._lt.run(go())
        return result

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SyncProducer(_SyncProxy):
    """``Producer`` for threads: ``send`` returns a ``concurrent.futures.Future[RecordMetadata]``."""

    def __init__(self, bootstrap_servers: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: Producer(bootstrap_servers, *args, **kwargs), "fluss-sync-producer")

    def send(self, table: Any, value: bytes | None, **kwargs: Any) -> concurrent.futures.Future[RecordMetadata]:
        return self._queued(self._client.send(table, value, **kwargs))


class SyncDeleter(_SyncProxy):
    """``Deleter`` for threads: ``delete`` returns a ``concurrent.futures.Future[RecordMetadata]``;
    ``delete_and_wait`` and ``flush`` block."""

    def __init__(self, bootstrap_servers: str | None, table: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: self._writer(bootstrap_servers, table, *args, **kwargs), "fluss-sync-kv-writer")

    @staticmethod
    def _writer(*args: Any, **kwargs: Any) -> Deleter:
        return Deleter(*args, **kwargs)

    def delete(self, key: Any) -> concurrent.futures.Future[RecordMetadata]:
        return self._queued(self._client.delete(key))


class SyncUpserter(SyncDeleter):
    """``Upserter`` for threads: ``upsert``/``delete`` return a ``concurrent.futures.Future[RecordMetadata]``;
    ``upsert_and_wait``, ``delete_and_wait`` and ``flush`` block."""

    @staticmethod
    def _writer(*args: Any, **kwargs: Any) -> Upserter:
        return Upserter(*args, **kwargs)

    def upsert(self, row: Any) -> concurrent.futures.Future[RecordMetadata]:
        return self._queued(self._client.upsert(row))


class SyncLookuper(_SyncProxy):
    """``Lookuper`` for threads: ``lookup``, ``lookup_many``, ``prefix_lookup``, ``scan_bucket`` block;
    ``scan`` returns a plain iterator fetching one page at a time."""

    def __init__(self, bootstrap_servers: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: Lookuper(bootstrap_servers, *args, **kwargs), "fluss-sync-lookuper")

    def scan(self, table: Any, bucket: int, **kwargs: Any) -> Iterator[dict[str, Any]]:
        async def open_scan() -> Any:
            return self._client.scan(table, bucket, **kwargs)

        cursor = self._lt.run(open_scan())
        while (page := self._lt.run(cursor.next_page())) is not None:
            yield from page


class SyncConsumer(_SyncProxy):
    """``Consumer`` for threads (``assign``, ``seek*``, ``poll``, ``position`` block)."""

    def __init__(self, bootstrap_servers: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: Consumer(bootstrap_servers, *args, **kwargs), "fluss-sync-consumer")


class SyncAdmin(_SyncProxy):
    """``Admin`` for threads."""

    def __init__(self, bootstrap_servers: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(lambda: Admin(bootstrap_servers, *args, **kwargs), "fluss-sync-admin")
