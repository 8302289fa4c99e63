"""The coordinator believes AdjustIsr, ControlledShutdown and ReportReplicaFaults only from the tablet server
they name (docs/peer-trust.md): the caller must present that server's replica token."""

from __future__ import annotations

from typing import Any

from fluss_py.coordinator.service import CoordinatorServicer
from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import coordinator_pb2
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, TokenReplicaVerifier


class Standby:
    """A CoordinatorView that is not serving: a proven request gets as far as NOT_COORDINATOR_LEADER."""

    server_id = 1
    coordinator_epoch = 3
    state: Any = None

    def serving_event_loop(self) -> None:
        return None

    async def current_leader(self) -> None:
        return None


class Context:
    def __init__(self, token: str | None = None) -> None:
        self._metadata = ((REPLICA_TOKEN_KEY, token),) if token is not None else ()

    def invocation_metadata(self):
        return self._metadata

    def peer(self) -> str:
        return "ipv4:127.0.0.1:4444"


async def test_isr_changes_and_controlled_shutdowns_need_the_named_servers_token():
    async def registration(server_id: int) -> str | None:
        return {2: "t2"}.get(server_id)

    svc = CoordinatorServicer(Standby(), TokenReplicaVerifier(None, registration))
    adjust = coordinator_pb2.AdjustIsrRequest(server_id=2)
    stop = coordinator_pb2.ControlledShutdownRequest(server_id=2)
    for context in (Context(), Context("guess"), Context("t3")):
        assert (await svc.AdjustIsr(adjust, context)).error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED
        assert (await svc.ControlledShutdown(stop, context)).error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED
    assert svc.refusals.counts == {"replica_not_authenticated": 6}
    assert (await svc.AdjustIsr(adjust, Context("t2"))).error.code == ErrorCode.NOT_COORDINATOR_LEADER
    assert (await svc.ControlledShutdown(stop, Context("t2"))).error.code == ErrorCode.NOT_COORDINATOR_LEADER


async def test_replica_fault_reports_need_the_named_servers_token():
    """A forged REPLICA_OFFLINE/CORRUPT would move leaderships away from a healthy server."""

    async def registration(server_id: int) -> str | None:
        return {2: "t2"}.get(server_id)

    svc = CoordinatorServicer(Standby(), TokenReplicaVerifier(None, registration))
    report = coordinator_pb2.ReportReplicaFaultsRequest(server_id=2, fault=coordinator_pb2.REPLICA_OFFLINE)
    for context in (Context(), Context("t3")):
        assert (await svc.ReportReplicaFaults(report, context)).error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED
    assert svc.refusals.counts == {"replica_not_authenticated": 2}
    assert (await svc.ReportReplicaFaults(report, Context("t2"))).error.code == ErrorCode.NOT_COORDINATOR_LEADER
    unknown = coordinator_pb2.ReportReplicaFaultsRequest(server_id=2, fault=7)
    assert (await svc.ReportReplicaFaults(unknown, Context("t2"))).error.code == ErrorCode.INVALID_REQUEST
