"""Server-tag metrics of the coordinator (docs/rebalance.md §12), computed at scrape time from the tag room.

    fluss_server_tag{server,tag}              1 per tagged server (tag: permanent-offline, temporary-offline)
    fluss_server_tag_replicas_to_replace      replicas still assigned to permanent-offline servers (0: healed)
    fluss_server_tags_auto_total              servers tagged by tablet-server.replace-dead-after, this leadership
    fluss_server_tag_replacement_running      1 while the running rebalance is a replacement

The replacement's moves and bytes are the ``fluss_rebalance_*`` series (rebalance/metrics.py). A standby
coordinator (no tag room) exports ``fluss_server_tag`` without samples and not the others. Declared in
``metric_catalogue_coordinator.py``.

Who may call: prometheus-client's registry, from the HTTP handler on the process's loop (it only reads).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.registry import Collector

from fluss_py import metric_catalogue_coordinator as mc
from fluss_py.metric_spec import Family


class ServerTagCollector(Collector):
    """Reads ``room()`` (the leader's ServerTagRoom, or None) on every scrape."""

    def __init__(self, room: Callable[[], Any]) -> None:
        self._room = room

    def collect(self) -> Iterator[Family]:
        room = self._room()
        tags = mc.SERVER_TAG.family()
        if room is None or not room.loaded:
            yield tags
            return
        for server, entry in sorted(room.tags.items()):
            tags.add_metric([str(server), entry.tag.value], 1.0)
        yield tags
        yield mc.SERVER_TAG_REPLICAS_TO_REPLACE.family(float(room.to_replace()))
        yield mc.SERVER_TAGS_AUTO.family(float(room.auto_tagged))
        yield mc.SERVER_TAG_REPLACEMENT_RUNNING.family(1.0 if room.replacement_running() else 0.0)
