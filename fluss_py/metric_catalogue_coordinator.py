"""The coordinator's Prometheus metrics, declared once: the coordinator section of the catalogue.

Split from ``metric_catalogue.py`` (which imports it, so every declaration here is in its ``CATALOGUE`` and in
docs/observability.md's list) when that module reached the 500-line bound: the coordinator process, its
rebalance executor and its server-tag room export these; the coordinator's modules build them from here
(``from fluss_py import metric_catalogue_coordinator as mc``). To add a coordinator metric: declare it here,
in its section.

Who may call: anyone (declarations; no I/O).
"""

from __future__ import annotations

from fluss_py.metric_spec import COORDINATOR
from fluss_py.metric_spec import declare as _declare

# ---------------------------------------------------------------- coordinator (coordinator/server.py)
COORDINATOR_STATE = _declare(
    "fluss_coordinator_state",
    "enum",
    "Coordinator lifecycle state",
    COORDINATOR,
    "fluss_coordinator_state",
    doc="Starting, Standby, Electing, Leader, Down (1 for the current state)",
)
COORDINATOR_EPOCH = _declare(
    "fluss_coordinator_epoch", "gauge", "Coordinator epoch of the leader as known here", COORDINATOR
)
COORDINATOR_IS_LEADER = _declare("fluss_coordinator_is_leader", "gauge", "1 on the coordinator leader", COORDINATOR)
COORDINATOR_OFFLINE_BUCKETS = _declare(
    "fluss_coordinator_offline_buckets",
    "gauge",
    "Buckets without a live leader (leader's view)",
    COORDINATOR,
    doc="buckets whose leader is not a live server (0 on a standby); the offline-buckets alert",
)
COORDINATOR_LIVE_TABLET_SERVERS = _declare(
    "fluss_coordinator_live_tablet_servers", "gauge", "Live tablet servers (leader's view)", COORDINATOR
)
COORDINATOR_LIVENESS_STREAMS = _declare(
    "fluss_coordinator_liveness_streams",
    "gauge",
    "Tablet servers whose liveness stream answered in the last 2 s",
    COORDINATOR,
)
COORDINATOR_PROOFS_OF_DEATH = _declare(
    "fluss_coordinator_proofs_of_death",
    "gauge",
    "Tablet-server deaths proven during this leadership (failed over before their session expired)",
    COORDINATOR,
    doc="deaths proven during this leadership (docs/failure-detection.md)",
)
COORDINATOR_PARTITIONS = _declare(
    "fluss_coordinator_partitions", "gauge", "Partitions of partitioned tables (leader's view)", COORDINATOR
)
COORDINATOR_PARTITIONS_CREATED = _declare(
    "fluss_coordinator_partitions_created", "gauge", "Partitions created ahead by this leadership", COORDINATOR
)
COORDINATOR_PARTITIONS_DROPPED = _declare(
    "fluss_coordinator_partitions_dropped", "gauge", "Partitions dropped (expired) by this leadership", COORDINATOR
)
COORDINATOR_PARTITION_CREATION_LAG = _declare(
    "fluss_coordinator_partition_creation_lag_seconds",
    "gauge",
    "Seconds the oldest started slot of a partitioned table has had no partition (0: on schedule)",
    COORDINATOR,
    doc="how far behind schedule partition creation is: seconds since the oldest already-started wanted slot "
    "without a partition began (worst partitioned table; 0 on schedule, and on a standby)",
)
COORDINATOR_PARTITION_LAST_CREATION_LATE = _declare(
    "fluss_coordinator_partition_last_creation_late_seconds",
    "gauge",
    "Seconds after its slot started that this leadership's last partition creation was made (0: made ahead)",
    COORDINATOR,
    doc="seconds after its slot started of the partition the latest creating check made latest relative to "
    "its slot (0: all made ahead of their slots)",
)
COORDINATOR_PEER_REFUSALS = _declare(
    "fluss_coordinator_peer_refusals_total",
    "counter",
    "Requests refused because the peer did not prove who it is",
    COORDINATOR,
    "kind",
    doc="tablet-server requests whose caller did not prove it is the server it names (docs/peer-trust.md): "
    "`replica_not_authenticated`",
)
TABLET_DISTRIBUTION = _declare(
    "fluss_tablet_distribution",
    "gauge",
    "Replicas and leaders per tablet server (coordinator leader's view)",
    COORDINATOR,
    "server",
    "kind",
    doc="placement per tablet server, `kind` = `replicas` or `leaders` (leader only; a standby exports the "
    "family without samples)",
)

# ---------------------------------------------------------------- rebalance (coordinator/rebalance/metrics.py)
REBALANCE_STATE = _declare(
    "fluss_rebalance_state",
    "gauge",
    "Rebalance state (1 = current)",
    COORDINATOR,
    "state",
    doc="1 for the current state: `idle`, `rebalancing`, `completed`, `failed`, `canceled` (docs/rebalance.md)",
)
REBALANCE_BATCHES_TOTAL = _declare(
    "fluss_rebalance_batches_total", "gauge", "Batches of the current or last plan", COORDINATOR
)
REBALANCE_BATCHES_DONE = _declare("fluss_rebalance_batches_done", "gauge", "Finished batches", COORDINATOR)
REBALANCE_MOVES_TOTAL = _declare(
    "fluss_rebalance_moves_total", "gauge", "Moves of the current or last plan", COORDINATOR
)
REBALANCE_MOVES_DONE = _declare("fluss_rebalance_moves_done", "gauge", "Finished moves", COORDINATOR)
REBALANCE_MOVES_IN_FLIGHT = _declare("fluss_rebalance_moves_in_flight", "gauge", "Moves in flight", COORDINATOR)
REBALANCE_MOVES_ROLLED_BACK = _declare("fluss_rebalance_moves_rolled_back", "gauge", "Moves rolled back", COORDINATOR)
REBALANCE_BYTES_PLANNED = _declare("fluss_rebalance_bytes_planned", "gauge", "Bytes the plan moves", COORDINATOR)
REBALANCE_BYTES_MOVED = _declare("fluss_rebalance_bytes_moved", "gauge", "Bytes moved so far", COORDINATOR)
REBALANCE_SERVER_MIGRATIONS = _declare(
    "fluss_rebalance_server_migrations",
    "gauge",
    "In-flight moves touching a server",
    COORDINATOR,
    "server",
    doc="in-flight moves touching each server (capped by the plan's per-server limit; docs/rebalance.md)",
)
REBALANCE_SERVER_MIGRATIONS_PEAK = _declare(
    "fluss_rebalance_server_migrations_peak", "gauge", "Most in-flight moves seen touching one server", COORDINATOR
)

# ---------------------------------------------------------------- server tags (coordinator/tag_metrics.py)
SERVER_TAG = _declare(
    "fluss_server_tag",
    "gauge",
    "1 per tagged tablet server",
    COORDINATOR,
    "server",
    "tag",
    doc="1 per tagged tablet server, `tag` = `permanent-offline` or `temporary-offline` (leader only; "
    "docs/rebalance.md §12)",
)
SERVER_TAG_REPLICAS_TO_REPLACE = _declare(
    "fluss_server_tag_replicas_to_replace",
    "gauge",
    "Replicas still assigned to permanent-offline servers",
    COORDINATOR,
    doc="replicas still assigned to permanent-offline servers: 0 once the replacements have emptied them",
)
SERVER_TAGS_AUTO = _declare(
    "fluss_server_tags_auto_total",
    "counter",
    "Servers tagged permanent-offline by tablet-server.replace-dead-after in this leadership",
    COORDINATOR,
)
SERVER_TAG_REPLACEMENT_RUNNING = _declare(
    "fluss_server_tag_replacement_running",
    "gauge",
    "1 while the running rebalance replaces permanent-offline servers",
    COORDINATOR,
    doc="1 while the running rebalance is a replacement of permanent-offline servers (its moves and bytes: "
    "the `fluss_rebalance_*` series)",
)
