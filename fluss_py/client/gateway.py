"""``CoordinatorGateway``: requests to the coordinator *leader*, found and re-found transparently.

The leader's address comes from cluster metadata (every GetMetadata answer names it); failing that each
bootstrap address is tried. A standby's NOT_COORDINATOR_LEADER names the leader in its ErrorInfo and is
followed at once; other retriable errors back off (tens of ms, doubling) and refresh metadata when they
invalidate it, until the deadline. Non-retriable errors are raised as they are.

Owned by one event loop; used by ``Admin`` and the producer's writer-id allocation.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fluss_py.client.metadata import ClusterMetadata
from fluss_py.client.options import DEFAULT_RETRY, Backoff, RetryOptions
from fluss_py.client.transport import Rpc, Transport, raise_for_error
from fluss_py.errors import ApiError, CoordinatorNotAvailableError, FlussError


class CoordinatorGateway:
    """Sends coordinator RPCs to the current coordinator leader with retries (see module docstring)."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        transport: Transport,
        *,
        request_timeout: float = 30.0,
        retry: RetryOptions = DEFAULT_RETRY,
    ) -> None:
        self._metadata = metadata
        self._transport = transport
        self._request_timeout = request_timeout
        self._retry = retry
        self._hinted: str | None = None

    def _addresses(self) -> list[str]:
        order: list[str] = []
        if self._hinted:
            order.append(self._hinted)
        if self._metadata.coordinator is not None:
            order.append(self._metadata.coordinator.address)
        order.extend(self._metadata.bootstrap_servers)
        return list(dict.fromkeys(order))

    async def call(self, rpc: Rpc, request: Any, timeout: float | None = None) -> Any:
        """The response of ``rpc`` from the coordinator leader; raises its ApiError or REQUEST_TIMED_OUT."""
        deadline = time.monotonic() + (timeout if timeout is not None else self._request_timeout)
        backoff = Backoff(self._retry)
        last: FlussError = CoordinatorNotAvailableError("no coordinator leader found")
        unreachable: set[str] = set()  # a hint naming one of these (a dead leader's node) is not "fresh"
        while True:
            fresh_hint = False
            for address in self._addresses():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                try:
                    response = await self._transport.call(address, rpc, request, min(remaining, self._request_timeout))
                except ApiError as e:
                    # Transport failure, or INVALID_REQUEST: that address serves no coordinator service.
                    last = e if e.retriable else last
                    unreachable.add(address)
                    if self._hinted == address:
                        self._hinted = None
                    continue
                try:
                    raise_for_error(response.error)
                except ApiError as e:
                    last = e
                    if not e.retriable:
                        raise
                    if e.leader_address and e.leader_address != address:
                        fresh_hint = e.leader_address != self._hinted and e.leader_address not in unreachable
                        self._hinted = e.leader_address
                        break  # try the named leader next
                    continue
                self._hinted = address
                return response
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise last
            if last.invalid_metadata and not fresh_hint:
                self._metadata.request_update()
            await asyncio.sleep(min(backoff.next_delay(hinted=fresh_hint), remaining))
