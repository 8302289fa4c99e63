"""ZooKeeper session metrics of one process (coordinator or tablet server):

    fluss_zookeeper_session_state{state="connected|suspended|lost"}   1 for the current state, 0 for the others
    fluss_zookeeper_session_events_total{event="new_session|reconnected|suspended|lost"}

``connected``: a live connection; ``suspended``: the connection dropped, the session may still be alive
(ephemeral nodes still exist); ``lost``: the session expired or was never established (ephemeral nodes are
gone). The state is read from kazoo at scrape time; the event counters are bumped by the session listener
(``new_session`` includes the first connection of the process).

Who may call: the owning server registers the collector once, before ``ZkClient.start`` (the listener runs
on the loop); prometheus-client's scrape calls ``collect`` on the loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.registry import Collector

from fluss_py import metric_catalogue as mc
from fluss_py.metric_spec import Family
from fluss_py.zk.client import ZkClient
from fluss_py.zk.values import SessionEvent, SessionState

EVENTS = ("new_session", "reconnected", "suspended", "lost")


def event_name(event: SessionEvent) -> str:
    if event.state is SessionState.CONNECTED:
        return "new_session" if event.new_session else "reconnected"
    return event.state.value.lower()


class ZkSessionCollector(Collector):
    """Owns the event counts of one ``ZkClient``'s session listener."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk
        self.events: Counter[str] = Counter()
        zk.add_session_listener(self._on_event)

    def _on_event(self, event: SessionEvent) -> None:
        self.events[event_name(event)] += 1

    def collect(self) -> Iterator[Family]:
        current = self._zk.session_state
        state = mc.ZOOKEEPER_SESSION_STATE.family()
        for s in SessionState:
            state.add_metric([s.value.lower()], 1 if s is current else 0)
        yield state
        events = mc.ZOOKEEPER_SESSION_EVENTS.family()
        for name in EVENTS:
            events.add_metric([name], self.events[name])
        yield events
