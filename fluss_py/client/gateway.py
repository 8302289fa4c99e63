"""``CoordinatorGateway``: requests to the coordinator *leader*, found and re-found transparently.

The leader's address comes from cluster metadata (every GetMetadata answer names it, and any server can
answer one: tablet servers watch the coordinator's leader znode); failing that each bootstrap address is
tried. A standby's NOT_COORDINATOR_LEADER names the leader in its ErrorInfo and is followed at once; other
retriable errors back off (tens of ms, doubling) and refresh metadata, until the deadline. Non-retriable
errors are raised as they are.

A coordinator that stops answering (paused, partitioned) must not hold a call until its deadline: an attempt
unanswered for ``STALL_S`` refreshes metadata (through any server that answers), and if the answer names
another coordinator leader the attempt is abandoned and the call goes there. Addresses that failed within
the last ``FAILED_RECENTLY_S`` are tried last. (An abandoned DDL may or may not have been applied, as after
any network error: docs/client.md "Known limits".)

Owned by one event loop; used by ``Admin`` and the producer's writer-id allocation.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fluss_py.client.metadata import ClusterMetadata
from fluss_py.client.options import DEFAULT_RETRY, Backoff, RetryOptions
from fluss_py.client.transport import Rpc, Transport
from fluss_py.errors import REFUSED, ApiError, CoordinatorNotAvailableError, FlussError, NetworkExceptionError
from fluss_py.rpc.convert import raise_for_client

STALL_S = 1.0  # an attempt unanswered this long makes the gateway look for another coordinator leader
FAILED_RECENTLY_S = 10.0


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
        self._failed_at: dict[str, float] = {}  # address -> when a call to it last failed or was abandoned

    def _addresses(self) -> list[str]:
        order: list[str] = []
        if self._hinted:
            order.append(self._hinted)
        if self._metadata.coordinator is not None:
            order.append(self._metadata.coordinator.address)
        order.extend(self._metadata.bootstrap_servers)
        now = time.monotonic()
        recent = {a for a, t in self._failed_at.items() if now - t < FAILED_RECENTLY_S}
        return sorted(dict.fromkeys(order), key=lambda a: a in recent)  # stable: the order otherwise

    def _failed(self, address: str) -> None:
        """``address`` did not answer (transport failure, timeout, abandoned): try it last for a while."""
        self._failed_at[address] = time.monotonic()
        self._metadata.note_failure(address)  # the metadata refreshes must not wait on it either

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
                    response = await self._attempt(address, rpc, request, min(remaining, self._request_timeout))
                except ApiError as e:
                    if e.code in REFUSED:
                        raise  # refused credentials: no other address will take them
                    # Transport failure, abandoned, or INVALID_REQUEST: that address serves no coordinator service.
                    unreachable.add(address)
                    if self._hinted == address:
                        self._hinted = None
                    if e.retriable:
                        last = e
                        self._failed(address)
                        self._metadata.request_update()  # any server can say who leads now
                    continue
                try:
                    raise_for_client(response.error)
                except ApiError as e:
                    last = e
                    if not e.retriable:
                        raise
                    if e.leader_address and e.leader_address != address:
                        fresh_hint = e.leader_address != self._hinted and e.leader_address not in unreachable
                        self._hinted = e.leader_address
                        break  # try the named leader next
                    continue
                self._failed_at.pop(address, None)
                self._hinted = address
                return response
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise last
            if last.invalid_metadata and not fresh_hint:
                self._metadata.request_update()
            await asyncio.sleep(min(backoff.next_delay(hinted=fresh_hint), remaining))

    async def _attempt(self, address: str, rpc: Rpc, request: Any, timeout: float) -> Any:
        """One call to ``address``; abandoned (NETWORK_EXCEPTION) when, while it is unanswered, a metadata
        refresh names another coordinator leader."""
        call = asyncio.ensure_future(self._transport.call(address, rpc, request, timeout))
        try:
            while True:
                done, _ = await asyncio.wait({call}, timeout=STALL_S)
                if done:
                    return call.result()
                refreshed = self._metadata.request_update()
                await asyncio.wait({call, refreshed}, return_when=asyncio.FIRST_COMPLETED)
                if call.done():
                    return call.result()
                leader = self._metadata.coordinator
                if leader is not None and leader.address != address:
                    raise NetworkExceptionError(
                        f"{rpc.name} to {address}: unanswered after {STALL_S:g}s while {leader.address} leads"
                    )
        finally:
            if not call.done():
                call.cancel()
                call.add_done_callback(_retrieve)


def _retrieve(call: asyncio.Future[Any]) -> None:
    if not call.cancelled():
        call.exception()  # an abandoned attempt's failure is expected: not "never retrieved"
