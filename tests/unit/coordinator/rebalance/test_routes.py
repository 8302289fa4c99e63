"""POST/DELETE/GET /rebalance handlers (no sockets: the handlers are called directly)."""

import json

from fluss_py import config as cfg
from fluss_py.common.http import Request
from fluss_py.coordinator.events import CancelRebalance, GetRebalance, StartRebalance
from fluss_py.coordinator.rebalance.planner import PlanOptions
from fluss_py.coordinator.rebalance.routes import executor_options, rebalance_routes
from fluss_py.errors import InvalidRebalancePlanError, RebalanceInProgressError
from fluss_py.types import CoordinatorLeaderInfo


class FakeLoop:
    def __init__(self, answer=None, error=None) -> None:
        self.events = []
        self.answer, self.error = answer, error

    async def submit(self, event):
        self.events.append(event)
        if self.error:
            raise self.error
        return self.answer


async def leader():
    return CoordinatorLeaderInfo(7, 3, "127.0.0.1", 9123, 9124)


def body(response):
    status, ctype, data = response
    assert ctype == "application/json"
    return status, json.loads(data)


async def test_post_starts_and_dry_run_is_passed_on():
    loop = FakeLoop({"status": "REBALANCING"})
    routes = rebalance_routes(lambda: loop, leader)
    assert body(await routes["POST /rebalance"](Request("POST", "/rebalance"))) == (200, {"status": "REBALANCING"})
    await routes["POST /rebalance"](Request("POST", "/rebalance", {"dry_run": "true"}))
    assert isinstance(loop.events[0], StartRebalance) and not loop.events[0].dry_run and loop.events[1].dry_run
    await routes["DELETE /rebalance"](Request("DELETE", "/rebalance"))
    await routes["GET /rebalance"](Request("GET", "/rebalance"))
    assert isinstance(loop.events[2], CancelRebalance) and isinstance(loop.events[3], GetRebalance)


async def test_errors_map_to_statuses():
    routes = rebalance_routes(lambda: FakeLoop(error=RebalanceInProgressError("already running: batch 1/5")), leader)
    status, data = body(await routes["POST /rebalance"](Request("POST", "/rebalance")))
    assert status == 409 and data["error"] == "REBALANCE_IN_PROGRESS" and "batch 1/5" in data["message"]
    routes = rebalance_routes(lambda: FakeLoop(error=InvalidRebalancePlanError("server 3 not live")), leader)
    assert body(await routes["POST /rebalance"](Request("POST", "/rebalance")))[0] == 400


async def test_a_standby_names_the_leader():
    routes = rebalance_routes(lambda: None, leader)
    status, data = body(await routes["GET /rebalance"](Request("GET", "/rebalance")))
    assert status == 503 and data["leader_http"] == "127.0.0.1:9124"


def test_executor_options_from_config():
    c = cfg.Config(
        cfg.COORDINATOR, {"coordinator.rebalance.auto": "false", "coordinator.rebalance.check-interval": "1min"}
    )
    assert executor_options(c) == {"options": PlanOptions(), "auto": False, "check_interval": 60.0}


async def _post(params: dict[str, list[str]], method: str = "POST") -> tuple[int, dict, list]:
    """One request with these query parameters, as the HTTP server parses them; (status, body, events)."""
    loop = FakeLoop({"status": "REBALANCING"})
    request = Request(method, "/rebalance", {k: v[-1] for k, v in params.items()}, params)
    status, data = body(await rebalance_routes(lambda: loop, leader)[f"{method} /rebalance"](request))
    return status, data, loop.events


async def test_dry_run_accepts_only_boolean_spellings_and_fails_closed():
    """Anything but a boolean spelling is a 400 and starts nothing (the flag once failed open)."""
    for value, dry in [(v, True) for v in ("true", "TRUE", "1", "yes", "on")] + [
        (v, False) for v in ("false", "0", "no", "off")
    ]:
        status, _, events = await _post({"dry_run": [value]})
        assert status == 200 and [(type(e), e.dry_run) for e in events] == [(StartRebalance, dry)], value
    for params in (
        {"dry_run": ["maybe"]},
        {"dry_run": [""]},  # ?dry_run= and a bare ?dry_run
        {"dry_run": ["2"]},
        {"dry_run": ["true", "false"]},
        {"dry_run": ["true"], "force": ["1"]},
        {"dryrun": ["true"]},  # a typo must not run a real rebalance either
    ):
        status, data, events = await _post(params)
        assert (status, data["error"], events) == (400, "INVALID_REQUEST", []), params
    status, _, events = await _post({"now": ["1"]}, "DELETE")
    assert (status, events) == (400, [])
