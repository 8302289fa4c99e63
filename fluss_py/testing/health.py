"""Reading a server's ``GET /health`` (see the process contract) and deciding readiness.

``fetch_health(url)`` does the HTTP call (None when nothing answers); ``is_ready(health)`` and
``leader_of(healths)`` are pure decisions, unit-tested.

Coordinator: {"role": "coordinator", "server_id", "state": Standby|Electing|Leader|Down,
"coordinator_epoch", "leader_id", "zk_connected"}; ready when state is Standby or Leader.
Tablet server: {"role": "tablet-server", "server_id", "state", "registered", "zk_connected"}; ready when
registered.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

READY_COORDINATOR_STATES = ("Standby", "Leader")


def fetch_health(http_url: str, timeout: float = 1.0, context: ssl.SSLContext | None = None) -> dict[str, Any] | None:
    """The JSON of ``<http_url>/health``, or None when the server does not answer 200 with JSON."""
    try:
        with urllib.request.urlopen(f"{http_url}/health", timeout=timeout, context=context) as resp:
            if resp.status != 200:
                return None
            data = json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None
    return data if isinstance(data, dict) else None


def fetch_text(
    url: str, timeout: float = 2.0, context: ssl.SSLContext | None = None, headers: Mapping[str, str] | None = None
) -> str:
    """Body of a GET (e.g. /metrics; a secure cluster's needs ``headers``: ``SecureFiles.admin_authorization``);
    raises OSError when it fails."""
    request = urllib.request.Request(url, headers=dict(headers or {}))
    with urllib.request.urlopen(request, timeout=timeout, context=context) as resp:
        return resp.read().decode("utf-8", "replace")


def is_ready(role: str, health: Mapping[str, Any] | None) -> bool:
    """Contract readiness: coordinator Standby/Leader, tablet server registered."""
    if not health:
        return False
    if role == "coordinator":
        return health.get("state") in READY_COORDINATOR_STATES
    if role == "tablet-server":
        return bool(health.get("registered"))
    return False


def leader_of(healths: Mapping[str, Mapping[str, Any] | None]) -> str | None:
    """Name of the one coordinator whose /health says Leader with the highest epoch, else None.

    When two report Leader (a zombie not yet aware), the one with the higher coordinator_epoch is the
    leader; equal epochs mean no agreed leader (None).
    """
    leaders = [
        (int(h.get("coordinator_epoch", -1)), name)
        for name, h in healths.items()
        if h and h.get("role") == "coordinator" and h.get("state") == "Leader"
    ]
    if not leaders:
        return None
    leaders.sort(reverse=True)
    if len(leaders) > 1 and leaders[0][0] == leaders[1][0]:
        return None
    return leaders[0][1]
