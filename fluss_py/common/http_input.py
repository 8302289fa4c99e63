"""Bounded input on the HTTP port: small limits, early refusal, and nothing kept per refused request.

aiohttp parses a request's head with a C parser and refuses one that breaks a limit (a line or a header
field over ``MAX_LINE`` / ``MAX_FIELD`` bytes: 400). Two things made such refusals expensive:

- the parser stays broken after its first error, and aiohttp feeds it every further chunk the socket
  delivers until the refusal is written (one ``BadHttpMessage`` per chunk, six for a 1 MB header);
- each refusal is queued as an exception whose traceback holds the frame that queued it, whose locals hold
  the chunk and the queue entry again: a reference cycle per chunk, kept until the cyclic collector runs.
  The servers' young-generation threshold (``cli/servers.py GC_THRESHOLDS``) is 50,000 allocations, which a
  stream of refused requests reaches only after hundreds of them: 1,000 requests with a 1 MB header grew a
  coordinator by 1.1 GB.

``BoundedInput`` sits between the transport and aiohttp's protocol (``bounded(factory)`` is the protocol
factory given to ``loop.create_server``). After each chunk it looks at the messages aiohttp queued: a parse
error gets its exception's tracebacks cleared (the frames, the chunk and the cycle go with the call's
return, by reference counting) and every later chunk of that connection is dropped unparsed, while
aiohttp answers 400 and closes. Each refusal is logged by aiohttp's handler, through ``REFUSALS`` (at most
once a minute: a flood of bad requests cannot flood the log).

``BoundedInput`` reads aiohttp's queue of parsed messages (``RequestHandler._messages``, present in every
aiohttp 3 release since 3.9). ``tests/unit/test_http_input.py`` fails if that queue moves or if a
refused request leaves a cycle.

Who may call: ``HttpServer.start`` (the factory); the event loop calls the protocol methods.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

MAX_LINE = 8 * 1024  # the request line (path + query) and any line of the head
MAX_FIELD = 8 * 1024  # one header's value (Basic credentials, cookies)
MAX_BODY = 64 * 1024  # small admin bodies only (the routes take their parameters in the query)
LOG_EVERY_S = 60.0


class _OncePerInterval(logging.Filter):
    """Lets one record through per ``interval`` seconds, and says in it how many were held back."""

    def __init__(self, interval: float = LOG_EVERY_S) -> None:
        super().__init__()
        self.interval = interval
        self._last = -interval
        self._held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self._last < self.interval:
            self._held += 1
            return False
        if self._held:
            record.msg = f"{record.msg} (and {self._held} more refused in the last minute, not logged)"
            self._held = 0
        self._last = now
        return True


REFUSALS = logging.getLogger("fluss_py.http.refused")  # aiohttp's handler logs each bad request here
REFUSALS.addFilter(_OncePerInterval())
HANDLER_ARGS: dict[str, Any] = {"max_line_size": MAX_LINE, "max_field_size": MAX_FIELD, "logger": REFUSALS}


class BoundedInput(asyncio.Protocol):
    """Owns one connection's refusal flag; forwards every protocol call to aiohttp's ``inner`` protocol."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return  # the head was refused: aiohttp answers 400 and closes; nothing more is parsed
        self.inner.data_received(data)
        messages = self.inner._messages
        if messages:
            error = getattr(messages[-1][0], "exc", None)  # aiohttp's _ErrInfo: the parser refused the input
            if error is not None:
                self.refused = True
                _forget_frames(error)


def _forget_frames(error: BaseException) -> None:
    """Drop the tracebacks of ``error`` and of the exceptions it chains: their frames hold the refused bytes
    and the queue entry that holds ``error`` (a cycle)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        current.__traceback__ = None
        current = current.__cause__ or current.__context__


def bounded(factory: Callable[[], Any]) -> Callable[[], BoundedInput]:
    """A protocol factory wrapping each of ``factory``'s protocols (aiohttp's ``runner.server``)."""
    return lambda: BoundedInput(factory())
