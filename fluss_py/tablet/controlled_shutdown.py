"""Controlled shutdown of a tablet server (SIGTERM): hand leadership away before stopping.

The server keeps serving while it asks the coordinator leader ``ControlledShutdown(server_id)``. The
coordinator moves the leadership of every bucket the server leads (RF > 1) to another ISR member, takes the
server out of the ISRs of the buckets it follows, tells the servers (NotifyLeaderAndIsr / StopReplica) and
answers with the buckets the server still leads. The server asks again until that list is empty, or gives
up after ``timeout_s`` (an ISR without another live member, a coordinator that does not answer), or once no
coordinator leader has been registered for ``NO_LEADER_GRACE_S`` (the whole cluster is stopping; a standby
takes over within that time after a graceful leader stop): then it stops anyway and the coordinator
handles it as a death once its session is closed.

One call waits for the rest of the budget, not a shorter per-call timeout: the coordinator goes on with a
call its client gave up on, so a retry after a timeout only queues the same work a second time behind the
first (at 20,000 buckets a handler of ~2 s under load met a 2 s call timeout: the retry's answer came 1.9 s
after the first had been ready). Failures that come back at once (no connection, a hint to the new
coordinator leader, an error) are still retried within the budget.

Who may call: the tablet server's lifecycle task, once, on its loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import grpc

from fluss_py.errors import ApiError, ErrorCode
from fluss_py.rpc import convert
from fluss_py.rpc.channels import open_channel
from fluss_py.rpc.pb import coordinator_pb2, coordinator_pb2_grpc
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, call_metadata
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = 0.2
NO_LEADER_GRACE_S = 1.0


async def _ask(
    address: str, server_id: int, timeout_s: float, replica_token: str
) -> tuple[list[TableBucket] | None, str]:
    """One ControlledShutdown call: (remaining leaders, "") or (None, why it failed / the hinted leader)."""
    async with open_channel(address) as channel:
        stub = coordinator_pb2_grpc.CoordinatorServiceStub(channel)
        try:
            response = await stub.ControlledShutdown(
                coordinator_pb2.ControlledShutdownRequest(server_id=server_id),
                timeout=timeout_s,
                metadata=call_metadata(REPLICA_TOKEN_KEY, replica_token),
            )
        except grpc.aio.AioRpcError as e:
            return None, f"{address}: {e.code().name}"
    error: ApiError | None = convert.error_of(response.error)
    if error is not None:
        if error.code is ErrorCode.NOT_COORDINATOR_LEADER and error.leader_address:
            return None, f"hint:{error.leader_address}"
        return None, f"{address}: {error.code.name} {error.message}"
    return [convert.table_bucket_from_pb(b) for b in response.remaining_leaders], ""


async def controlled_shutdown(
    server_id: int,
    coordinator_address: Callable[[], str | None],
    timeout_s: float,
    *,
    replica_token: str = "",
    ask: Callable[[str, int, float, str], Awaitable[tuple[list[TableBucket] | None, str]]] = _ask,
) -> bool:
    """Ask the coordinator leader until this server leads nothing (True) or ``timeout_s`` passed (False)."""
    deadline = time.monotonic() + timeout_s
    hinted: str | None = None
    attempt = 0
    last = ""
    no_leader_since: float | None = None
    while True:
        attempt += 1
        address = hinted or coordinator_address()
        hinted = None
        no_leader_since = None if address else (no_leader_since or time.monotonic())
        if no_leader_since is not None and time.monotonic() - no_leader_since >= NO_LEADER_GRACE_S:
            log.warning(
                "Controlled shutdown of tablet server %d: no coordinator leader for %.1fs; stopping anyway",
                server_id, NO_LEADER_GRACE_S,
            )  # fmt: skip
            return False
        if address:
            rpc_timeout = max(0.1, deadline - time.monotonic())
            remaining, why = await ask(address, server_id, rpc_timeout, replica_token)
            if remaining is not None and not remaining:
                log.info("Controlled shutdown of tablet server %d complete (attempt %d)", server_id, attempt)
                return True
            if remaining is not None:
                last = f"still leads {len(remaining)} buckets (e.g. {remaining[:3]})"
            elif why.startswith("hint:"):
                hinted, last = why[5:], f"coordinator leader moved to {why[5:]}"
                if time.monotonic() < deadline:
                    continue
            else:
                last = why
        else:
            last = "no coordinator leader known"
        if time.monotonic() + RETRY_BACKOFF_S >= deadline:
            log.warning(
                "Controlled shutdown of tablet server %d incomplete after %.1fs (%d attempts): %s; stopping anyway",
                server_id, timeout_s, attempt, last,
            )  # fmt: skip
            return False
        log.info("Controlled shutdown of tablet server %d: %s; retrying", server_id, last)
        await asyncio.sleep(RETRY_BACKOFF_S)
