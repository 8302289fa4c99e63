"""HTTP routes of a rebalance on the coordinator's HTTP port, and the executor's settings from config.

    POST   /rebalance[?dry_run=true]   plan (and start) -> 200 plan/progress JSON;
                                       409 REBALANCE_IN_PROGRESS (with the progress), 400 INVALID_REBALANCE_PLAN
                                       400 INVALID_REQUEST: dry_run not a boolean spelling (true/false, 1/0,
                                       yes/no, on/off), given twice, or another parameter (nothing started)
    DELETE /rebalance                  cancel: roll back the current batch's open moves -> 200 progress
    GET    /rebalance                  progress of the current or last rebalance -> 200

A coordinator that is not the serving leader answers 503 with ``leader_http`` ("host:port" of the
leader's HTTP port, when known) so clients can follow it.

Who may call: ``CoordinatorServer`` (builds the routes); the HTTP server runs the handlers on its loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fluss_py import config as cfg
from fluss_py.common.http import Request, RequestHandler, Response, json_response
from fluss_py.config_values import parse_bool
from fluss_py.coordinator.events import CancelRebalance, GetRebalance, StartRebalance
from fluss_py.coordinator.rebalance.planner import PlanOptions
from fluss_py.errors import ApiError, ErrorCode
from fluss_py.types import CoordinatorLeaderInfo

_STATUS = {
    ErrorCode.REBALANCE_IN_PROGRESS: 409,
    ErrorCode.INVALID_REBALANCE_PLAN: 400,
    ErrorCode.INVALID_CONFIG: 400,
    ErrorCode.INVALID_REQUEST: 400,
    ErrorCode.TABLE_NOT_EXIST: 404,
}


def executor_options(config: Any) -> dict[str, Any]:
    """RebalanceExecutor keyword arguments from a coordinator Config."""
    return {
        "options": PlanOptions.from_config(config),
        "auto": bool(config[cfg.REBALANCE_AUTO]),
        "check_interval": float(config[cfg.REBALANCE_CHECK_INTERVAL]),
    }


def query_flags(request: Request, names: tuple[str, ...]) -> dict[str, bool]:
    """The boolean query parameters ``names`` that ``request`` carries. ValueError for anything else: an
    unknown parameter, one given twice, or a value that is not a boolean spelling — a POST that changes the
    cluster fails closed, it never guesses."""
    flags: dict[str, bool] = {}
    given = request.query_all or {k: [v] for k, v in request.query.items()}
    for name, values in given.items():
        if name not in names:
            raise ValueError(f"unknown query parameter {name!r} (allowed: {', '.join(names) or 'none'})")
        if len(values) != 1:
            raise ValueError(f"query parameter {name!r} given {len(values)} times")
        try:
            flags[name] = parse_bool(values[0])
        except ValueError:
            raise ValueError(f"{name}={values[0]!r} is not a boolean (use true or false)") from None
    return flags


def leader_call(
    event_loop: Callable[[], Any],
    leader: Callable[[], Awaitable[CoordinatorLeaderInfo | None]],
) -> Callable[[Any], Awaitable[Response]]:
    """Submit an event to the serving leader's loop and answer with its JSON result; a standby answers 503
    naming the leader's HTTP address; an ApiError maps to a status (400 for invalid input)."""

    async def call(event: Any) -> Response:
        loop = event_loop()
        if loop is None:
            info = await leader()
            return json_response(
                {
                    "error": "NOT_COORDINATOR_LEADER",
                    "message": "this coordinator is not the leader",
                    "leader_http": f"{info.host}:{info.http_port}" if info and info.http_port else "",
                },
                503,
            )
        try:
            return json_response(await loop.submit(event))
        except ApiError as e:
            status = _STATUS.get(e.code, 503 if e.code == ErrorCode.NOT_COORDINATOR_LEADER else 500)
            return json_response({"error": e.code.name, "message": str(e)}, status)

    return call


def rebalance_routes(
    event_loop: Callable[[], Any],
    leader: Callable[[], Awaitable[CoordinatorLeaderInfo | None]],
) -> dict[str, RequestHandler]:
    """``event_loop()`` is the serving leader's CoordinatorEventLoop or None; ``leader()`` the known leader."""
    call = leader_call(event_loop, leader)

    async def post(request: Request) -> Response:
        try:
            dry_run = query_flags(request, ("dry_run",)).get("dry_run", False)
        except ValueError as e:
            return json_response({"error": ErrorCode.INVALID_REQUEST.name, "message": str(e)}, 400)
        return await call(StartRebalance(dry_run=dry_run))

    async def delete(request: Request) -> Response:
        try:
            query_flags(request, ())
        except ValueError as e:
            return json_response({"error": ErrorCode.INVALID_REQUEST.name, "message": str(e)}, 400)
        return await call(CancelRebalance())

    async def get(_request: Request) -> Response:
        return await call(GetRebalance())

    return {"POST /rebalance": post, "DELETE /rebalance": delete, "GET /rebalance": get}
