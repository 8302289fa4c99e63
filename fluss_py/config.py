"""Typed configuration: one registry of options, each with the values it allows; YAML files, ``-D`` overrides.

Every setting is a ``ConfigOption`` declared once below with its key, type, default, the scopes that read it
(the roles ``coordinator``, ``tablet-server``, ``client``, and ``table`` for a table property), a one-line
doc and ``allowed``: the values it accepts (a ``Range``, ``Choice`` or ``Text``; a bool's type is its
range). Values are parsed from YAML scalars or strings::

    duration   "15s", "500ms", "5min", "2h", "1d"; a bare number means milliseconds when the key ends
               in ".ms" and seconds otherwise (so ``replica.lag.time.max.ms: 30000`` is 30 s)
    size       "10MB", "1KB", "64kb", "1GiB", a bare number of bytes
    int/float/bool/str/list (comma separated)

Durations are held as float seconds, sizes as int bytes. A value is checked where it is loaded: a server's
config at start (``load_config``; the process exits with 2 before it touches ZooKeeper or its data
directory), table properties at CreateTable (the coordinator answers INVALID_CONFIG). Unknown keys, bad
values and values out of range raise ``ConfigError`` naming the key, the value and what is allowed::

    log.segment.file-size: '1' is out of range (allowed: 1 KiB .. 1 GiB)

``CONSTRAINTS`` relate keys of one role (e.g. a follower's fetch wait below the ISR lag time); they are
checked on a role's whole config. docs/configuration.md is generated from this registry (``make
config-doc``), so the ranges are written down once, here.

A new key is one line: ``option(key, type, default, scopes, doc, Range(lo, hi))``. Parsing and the kinds
of allowed values and the registry itself (``OPTIONS``, ``option``) live in ``fluss_py.config_values``;
loading (``Config``, ``load_config``, aliases) in ``fluss_py.config_load``; all re-exported here.
"""

from __future__ import annotations

from fluss_py.config_load import DEPRECATED_ALIASES as DEPRECATED_ALIASES  # the loader, re-exported
from fluss_py.config_load import Config as Config
from fluss_py.config_load import check_constraints as check_constraints
from fluss_py.config_load import describe_options as describe_options
from fluss_py.config_load import load_config as load_config
from fluss_py.config_load import parse_overrides as parse_overrides
from fluss_py.config_load import resolve_aliases as resolve_aliases
from fluss_py.config_values import (
    CLIENT,
    COORDINATOR,
    DAY,
    HOST,
    HOUR,
    MINUTE,
    NON_EMPTY,
    PORT,
    ROLES,
    TABLE,
    TABLET,
    ZNODE_PATH,
    Choice,
    GiB,
    HostPorts,
    Items,
    KiB,
    MiB,
    Range,
    Text,
    constraint,
    option,
)
from fluss_py.config_values import CONSTRAINTS as CONSTRAINTS  # the registry, re-exported
from fluss_py.config_values import OPTIONS as OPTIONS
from fluss_py.config_values import SCOPES as SCOPES
from fluss_py.config_values import ConfigOption as ConfigOption
from fluss_py.config_values import is_secret as is_secret  # re-exported: secrets are masked everywhere
from fluss_py.config_values import masked as masked
from fluss_py.config_values import split_host_port as split_host_port  # re-exported: clients, the CLI

INT32_MAX = 2**31 - 1  # ids, counts and sizes that travel as protobuf int32
INT64_MAX = 2**63 - 1
MAX_RPC_MESSAGE_BYTES = 64 * MiB  # gRPC send/receive limit of every channel and server
# the largest FetchLog answer is max(fetch.response.max-bytes, one batch of log.max-batch-size) plus
# per-bucket headers: both stay this far under the message limit
MAX_FETCH_RESPONSE_BYTES = MAX_RPC_MESSAGE_BYTES - 16 * MiB
MAX_BUCKETS = 4096  # buckets of one table (Fluss: max.bucket.num)
MAX_REPLICATION_FACTOR = 32767  # Kafka's bound (a short)
MAX_TABLE_COMMENT_BYTES = 16 * KiB  # the table's znode must stay far below ZooKeeper's 1 MiB node limit
MAX_TABLE_PROPERTY_BYTES = 1 * KiB  # one property value (UTF-8): the same reason (docs/operations.md §7.5)
MIN_RPC_KEEPALIVE_TIME = 1.0  # a gRPC client pings at most once a second while no data arrives anyway

_ALL = ROLES
_SERVERS = (COORDINATOR, TABLET)
_LOG = (TABLET, TABLE)  # per-log settings: the server's default, a table property overrides it

# ---------------------------------------------------------------- ZooKeeper and process basics
# (clients read the zookeeper.* keys only for `fluss-py user|acl`, which change users and ACLs in ZooKeeper)
ZK_ADDRESS = option("zookeeper.address", "str", "127.0.0.1:2181", _ALL,
                    "ZooKeeper connect string host:port[,...]", HostPorts())  # fmt: skip
ZK_ROOT = option("zookeeper.root", "str", "/fluss", _ALL, "root znode of this cluster", ZNODE_PATH)
ZK_SESSION_TIMEOUT = option("zookeeper.session-timeout", "duration", 15.0, _SERVERS,
                            "ZooKeeper session timeout (death detection)", Range(0.5, 10 * MINUTE))  # fmt: skip
ZK_CONNECTION_TIMEOUT = option("zookeeper.connection-timeout", "duration", 10.0, _SERVERS,
                               "give up connecting to ZooKeeper after this long", Range(0.1, HOUR))  # fmt: skip
BIND_HOST = option("bind.host", "str", "127.0.0.1", _SERVERS, "address the RPC and HTTP servers bind to", HOST)
ADVERTISED_HOST = option("advertised.host", "str", "127.0.0.1", _SERVERS,
                         "host other processes use to reach us", HOST)  # fmt: skip
RPC_PORT = option("rpc.port", "int", 0, _SERVERS, "RPC port (0: the role default, 9123 or 9122)", PORT)
HTTP_PORT = option("http.port", "int", 0, _SERVERS, "HTTP port for /metrics and /health (0: 9124 or 9125)", PORT)
# HTTP/2 keepalive of every connection, servers' and clients' alike (docs/failure-detection.md "Vanished peers")
RPC_KEEPALIVE_TIME = option(
    "rpc.keepalive.time", "duration", 10.0, _ALL,
    "ping each connection after this long without a ping, calls open or not (a vanished peer is noticed "
    "within time + timeout)", Range(MIN_RPC_KEEPALIVE_TIME, 2 * HOUR),
)  # fmt: skip
RPC_KEEPALIVE_TIMEOUT = option(
    "rpc.keepalive.timeout", "duration", 5.0, _ALL,
    "close a connection, failing its calls and streams, when its ping is not acknowledged within this long",
    Range(1.0, 10 * MINUTE),
)  # fmt: skip
LOG_DIR = option("log.dir", "str", "logs", _SERVERS, "directory of the process's log file", NON_EMPTY)
LOG_LEVEL = option("log.level", "str", "INFO", _SERVERS, "logging level",
                   Choice(("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")))  # fmt: skip

# ---------------------------------------------------------------- coordinator
COORDINATOR_ID = option("coordinator.id", "int", -1, [COORDINATOR],
                        "coordinator id (-1: from advertised host:port)", Range(-1, INT32_MAX))  # fmt: skip
PROOF_OF_DEATH = option(
    "coordinator.failure-detection.proof-of-death", "bool", True, [COORDINATOR],
    "fail a tablet server over at once when its liveness stream broke and its port refuses connections "
    "(false where a firewall answers closed ports with a TCP reset; docs/failure-detection.md)",
)  # fmt: skip
REBALANCE_CHECK_INTERVAL = option("coordinator.rebalance.check-interval", "duration", 300.0, [COORDINATOR],
                                  "how often balance is checked", Range(1.0, DAY))  # fmt: skip
REBALANCE_TRIGGER_THRESHOLD = option("coordinator.rebalance.trigger-threshold", "float", 0.1, [COORDINATOR],
                                     "stddev/mean of replicas per server", Range(0.0, 100.0))  # fmt: skip
REBALANCE_AUTO = option("coordinator.rebalance.auto", "bool", True, [COORDINATOR], "trigger rebalances by itself")
REBALANCE_BATCH_RATIO = option("tablet-server.rebalance.batch.ratio", "float", 0.2, _SERVERS,
                               "share of a rebalance's moves per batch", Range(0.0, 1.0, lo_open=True))  # fmt: skip
REBALANCE_MAX_CONCURRENT = option("tablet-server.rebalance.max-concurrent-migrations", "int", 5, _SERVERS,
                                  "moves touching one server per batch", Range(1, 10_000))  # fmt: skip
REBALANCE_THROTTLE = option(
    "tablet-server.rebalance.throttle-bytes-per-second", "size", 10 * MiB, _SERVERS,
    "per-server budget for replicas being added by a rebalance (bytes/s, 0: unlimited)", Range(0),
)  # fmt: skip
REPLACE_DEAD_AFTER = option(
    "tablet-server.replace-dead-after", "duration", 0.0, [COORDINATOR],
    "tag a tablet server dead this long permanent-offline, so its replicas are rebuilt on the others (0: never; "
    "set it above the longest planned restart; docs/rebalance.md section 12)", Range(0.0, 365 * DAY),
)  # fmt: skip
DEFAULT_REPLICATION_FACTOR = option("default.replication.factor", "int", 3, [COORDINATOR],
                                    "replication factor of tables that do not set one",
                                    Range(1, MAX_REPLICATION_FACTOR))  # fmt: skip
DEFAULT_BUCKET_NUMBER = option("default.bucket.number", "int", 1, [COORDINATOR], "buckets of tables that set none",
                               Range(1, MAX_BUCKETS))  # fmt: skip
# leader balance and election policy (docs/control-plane.md "Leader balance", "Unclean leader election")
AUTO_LEADER_REBALANCE = option(
    "auto.leader.rebalance.enable", "bool", True, [COORDINATOR],
    "move leaderships back to preferred replicas (in the ISR) when a server's imbalance exceeds the threshold",
)  # fmt: skip
LEADER_IMBALANCE_PERCENTAGE = option(
    "leader.imbalance.per-server.percentage", "int", 10, [COORDINATOR],
    "a server is imbalanced when more than this % of the buckets it is preferred for are led by another",
    Range(0, 100),
)  # fmt: skip
LEADER_IMBALANCE_CHECK_INTERVAL = option("leader.imbalance.check-interval", "duration", 300.0, [COORDINATOR],
                                         "how often leader balance is checked", Range(0.1, DAY))  # fmt: skip
AUTO_PARTITION_CHECK_INTERVAL = option("coordinator.auto-partition.check-interval", "duration", 60.0,
                                       [COORDINATOR], "how often partitions are created ahead and expired",
                                       Range(0.1, DAY))  # fmt: skip
UNCLEAN_LEADER_ELECTION = option(
    "unclean.leader.election.enable", "bool", False, [COORDINATOR, TABLE],
    "with no live ISR member, a live replica outside the ISR may lead; it LOSES every record beyond its log "
    "end, acknowledged ones included (a table property; the coordinator's value is the default)",
)  # fmt: skip

# ---------------------------------------------------------------- tablet server
TABLET_SERVER_ID = option("tablet-server.id", "int", 0, [TABLET], "tablet server id, unique in the cluster",
                          Range(0, INT32_MAX))  # fmt: skip
TABLET_SERVER_RACK = option("tablet-server.rack", "str", "", [TABLET], "rack, for replica placement",
                            Text(r"[A-Za-z0-9_.:/\-]{0,255}", "empty or up to 255 of [A-Za-z0-9_.:/-]"))  # fmt: skip
DATA_DIR = option("data.dir", "str", "data", [TABLET], "directory holding bucket logs and checkpoints", NON_EMPTY)
DATA_DIRS = option("data.dirs", "list", (), [TABLET],
                  "several data directories (comma separated; one failing takes only its replicas offline); "
                  "empty: data.dir alone", Items(NON_EMPTY, min_count=0, max_count=256))  # fmt: skip
LOG_DIR_RECOVERY_CHECK_INTERVAL = option("log.dir.recovery-check-interval", "duration", 5.0, [TABLET],
                                         "how often a full data dir is checked for free space (it comes "
                                         "back by itself unless an fsync failed)", Range(0.01, HOUR))  # fmt: skip
LOG_DIR_MIN_FREE = option("log.dir.min-free", "size", 64 * MiB, [TABLET],
                          "free space a full data dir needs to come back online", Range(0))  # fmt: skip
LOG_SCRUB_RATE = option("log.scrub.rate", "size", 8 * MiB, [TABLET],
                        "bytes per second the scrubber reads to check CRCs (0: off)", Range(0))  # fmt: skip
LOG_SCRUB_INTERVAL = option("log.scrub.interval", "duration", HOUR, [TABLET],
                            "pause between two scrubbing passes over the closed segments",
                            Range(0.01, 30 * DAY))  # fmt: skip
KV_MEMORY = option("kv.memory", "size", 128 * MiB, [TABLET], "RocksDB memory (block cache and memtables) of all "
                   "the primary-key buckets' KVs of this server together", Range(4 * MiB, 256 * GiB))  # fmt: skip
MIN_INSYNC_REPLICAS = option("tablet-server.min.insync.replicas", "int", 2, [TABLET],
                             "acks=all needs at least this many replicas in ISR",
                             Range(1, MAX_REPLICATION_FACTOR))  # fmt: skip
REPLICA_LAG_TIME_MAX = option("replica.lag.time.max.ms", "duration", 30.0, [TABLET],
                              "a follower not caught up for this long leaves the ISR", Range(0.1, DAY))  # fmt: skip
REPLICA_FETCH_MAX_BYTES = option("replica.fetch.max.bytes", "size", 10 * MiB, [TABLET], "bytes per follower fetch",
                                 Range(KiB, MAX_FETCH_RESPONSE_BYTES))  # fmt: skip
REPLICA_FETCH_MIN_BYTES = option("replica.fetch.min.bytes", "size", 1024, [TABLET],
                                 "leader waits for this many bytes", Range(1, MAX_FETCH_RESPONSE_BYTES))  # fmt: skip
REPLICA_FETCH_WAIT_MAX = option("replica.fetch.wait.max.ms", "duration", 0.5, [TABLET],
                                "longest a follower fetch waits at the leader", Range(0.001, MINUTE))  # fmt: skip
REPLICA_FETCH_BACKOFF = option("replica.fetch.backoff.ms", "duration", 0.05, [TABLET],
                               "pause after a failed follower fetch (doubles while calls to that leader fail in a "
                               "row, up to 1 s)", Range(0.001, MINUTE))  # fmt: skip
REPLICA_FETCH_STREAM = option("replica.fetch.stream", "bool", True, [TABLET],
                             "followers fetch on one stream per leader (false: a FetchLog call each)")  # fmt: skip
FETCH_RESPONSE_MAX_BYTES = option(
    "fetch.response.max-bytes", "size", 16 * MiB, [TABLET],
    "largest FetchLog answer built here: a request's max_bytes (whole and per bucket) is cut to it "
    "(one batch larger than it is still served whole)", Range(KiB, MAX_FETCH_RESPONSE_BYTES),
)  # fmt: skip
REQUEST_MAX_HOLD = option(
    "request.max-hold", "duration", 60.0, [TABLET],
    "longest a request waits here: a produce's timeout_ms (acks=all) and a fetch's max_wait_ms are cut to it",
    Range(0.1, 10 * MINUTE),
)  # fmt: skip
LOG_SEGMENT_FILE_SIZE = option("log.segment.file-size", "size", GiB, _LOG, "roll a segment at this size",
                               Range(KiB, GiB))  # fmt: skip
LOG_SEGMENT_MAX_AGE = option("log.segment.max-age", "duration", 7 * DAY, _LOG, "roll a segment this old",
                             Range(1.0, 3650 * DAY))  # fmt: skip
LOG_INDEX_INTERVAL = option("log.index.interval-size", "size", 4096, _LOG, "bytes between offset index entries",
                            Range(64, 64 * MiB))  # fmt: skip
LOG_MAX_BATCH_SIZE = option("log.max-batch-size", "size", 8 * MiB, _LOG, "largest record batch accepted",
                            Range(KiB, MAX_FETCH_RESPONSE_BYTES))  # fmt: skip
LOG_FLUSH_INTERVAL = option("log.flush.interval", "duration", 1.0, _LOG,
                            "how often logs and checkpoints are flushed (fsync)", Range(0.01, HOUR))  # fmt: skip
LOG_FLUSH_ON_ACK = option("log.flush.on-ack", "bool", False, _LOG,
                          "acks=all waits until every ISR member fsynced the records (group commit; "
                          "docs/replication.md)")  # fmt: skip
TABLE_LOG_TTL = option("table.log.ttl", "duration", 7 * DAY, _LOG,
                       "delete segments older than this (0: never)", Range(0.0, 36500 * DAY))  # fmt: skip
TABLE_LOG_RETENTION_BYTES = option("table.log.retention-bytes", "size", -1, _LOG,
                                   "keep at most this many bytes per bucket (-1: no limit)", Range(-1))  # fmt: skip
LOG_TIMESTAMP_AFTER_MAX = option(
    "log.message.timestamp.after.max.ms", "duration", HOUR, _LOG,
    "refuse a batch whose max timestamp is further ahead of the leader's clock (INVALID_TIMESTAMP; 0: no bound)",
    Range(0.0, 36500 * DAY),
)  # fmt: skip
WRITER_EXPIRATION = option("writer.expiration", "duration", 7 * DAY, _LOG,
                           "forget an idle idempotent writer after this long", Range(1.0, 3650 * DAY))  # fmt: skip

# ---------------------------------------------------------------- table only
# partitioned tables (docs/partitioning.md): the logical table's spec; its partitions are tables <t>$<slot>
TABLE_PARTITION_KEY = option("table.partition.key", "str", None, [TABLE], "name of the partition column",
                             Text(r"[A-Za-z0-9_-]{1,64}", "1-64 of [A-Za-z0-9_-]"))  # fmt: skip
TABLE_AUTO_PARTITION_UNIT = option("table.auto-partition.time-unit", "str", None, [TABLE],
                                   "make the table auto-partitioned by time slots of this unit (UTC)",
                                   Choice(("hour", "day", "month")))  # fmt: skip
TABLE_AUTO_PARTITION_PRECREATE = option("table.auto-partition.num-precreate", "int", 2, [TABLE],
                                        "the current slot and the next N-1 exist ahead of time",
                                        Range(1, 1000))  # fmt: skip
TABLE_AUTO_PARTITION_RETENTION = option("table.auto-partition.num-retention", "int", 7, [TABLE],
                                        "the last N slots before the current one are kept; older are dropped",
                                        Range(0, 100_000))  # fmt: skip
SQL_NAME, MERGE_ENGINES = Text(r"\w{1,128}", "a column name"), Choice(("last_row", "first_row", "versioned"))
TABLE_MERGE_ENGINE = option("table.merge-engine", "str", "last_row", [TABLE], "primary-key tables: what an upsert "
                            "does to the stored row (§2 of docs/primary-key-tables.md)", MERGE_ENGINES)  # fmt: skip
TABLE_MERGE_VER_COLUMN = option("table.merge-engine.versioned.ver-column", "str", None, [TABLE], "the versioned merge "
                                "engine's version column (NOT NULL INT, BIGINT or TIMESTAMP)", SQL_NAME)  # fmt: skip
TABLE_MIN_INSYNC_REPLICAS = option(
    "min.insync.replicas", "int", None, [TABLE],
    "acks=all needs this many replicas of the table's buckets in ISR (default: the server's "
    "tablet-server.min.insync.replicas; at most the replication factor)", Range(1, MAX_REPLICATION_FACTOR),
)  # fmt: skip

# ---------------------------------------------------------------- security (docs/security.md)
FILE_OR_EMPTY = Text(r"[^\x00\n]{0,4096}", "a file path, or empty")
# a user or certificate CN: no '/' (a znode name), no ':' (Basic auth and digest separate user:password)
PRINCIPAL = Text(r"[^\s/:\x00]{1,256}", "a name without spaces, '/' or ':'")
PRINCIPAL_OR_EMPTY = Text(r"[^\s/:\x00]{0,256}", "a name without spaces, '/' or ':', or empty")
SECRET = Text(r"[^\n\x00]{0,1024}", "up to 1024 characters without newlines, or empty")

TLS_ENABLED = option(
    "security.tls.enabled", "bool", False, _ALL, "TLS on every RPC and HTTP port (servers) / every connection"
)
TLS_CA_FILE = option("security.tls.ca-file", "str", "", _ALL,
                     "PEM file of the CA(s) that sign peers' certificates", FILE_OR_EMPTY)  # fmt: skip
TLS_CERT_FILE = option("security.tls.cert-file", "str", "", _ALL,
                       "PEM certificate chain this process presents (re-read on change)", FILE_OR_EMPTY)  # fmt: skip
TLS_KEY_FILE = option("security.tls.key-file", "str", "", _ALL,
                      "PEM private key of security.tls.cert-file", FILE_OR_EMPTY)  # fmt: skip
TLS_CLIENT_AUTH = option(
    "security.tls.client-auth", "bool", False, _SERVERS, "mutual TLS: refuse connections without a CA-signed cert"
)
TLS_SERVER_NAME = option("security.tls.server-name", "str", "", _ALL,
                         "name checked in servers' certificates (default: the host dialled)",
                         Text(rf"|{HOST.pattern}", "a host name, or empty"))  # fmt: skip
AUTH_ENABLED = option(
    "security.authentication.enabled", "bool", False, _SERVERS,
    "every request needs a principal: a user's password or a CA-signed client certificate",
)  # fmt: skip
AUTH_USER = option("security.user", "str", "", _ALL, "user this process authenticates as (servers: to peers)",
                   PRINCIPAL_OR_EMPTY)  # fmt: skip
AUTH_PASSWORD = option("security.password", "str", "", _ALL, "its password (never logged)", SECRET)
INTERNAL_PRINCIPALS = option(
    "security.internal.principals", "list", ("fluss-server",), _SERVERS,
    "principals (certificate CN or user) that are servers of this cluster: only they may call internal RPCs",
    Items(PRINCIPAL, 1, 100),
)  # fmt: skip
AUTHORIZER_ENABLED = option(
    "security.authorizer.enabled", "bool", False, _SERVERS, "check ACLs: what no ACL allows is refused"
)
SUPER_USERS = option("security.super-users", "list", (), _SERVERS, "principals allowed everything (no ACL needed)",
                     Items(PRINCIPAL, 0, 100))  # fmt: skip
ZK_AUTH_USER = option("zookeeper.auth.user", "str", "", _ALL, "digest user of the servers in ZooKeeper",
                      PRINCIPAL_OR_EMPTY)  # fmt: skip
ZK_AUTH_PASSWORD = option("zookeeper.auth.password", "str", "", _ALL, "its password (never logged)", SECRET)

# ---------------------------------------------------------------- client
CLIENT_ACKS = option("client.request.acks", "str", "all", [CLIENT], "producer acks: all, 1 or 0",
                     Choice(("all", "-1", "1", "0")))  # fmt: skip
CLIENT_REQUEST_TIMEOUT = option("client.request.timeout", "duration", 30.0, [CLIENT], "one request's deadline",
                                Range(0.001, HOUR))  # fmt: skip
CLIENT_DELIVERY_TIMEOUT = option("client.delivery.timeout", "duration", 120.0, [CLIENT],
                                 "a record fails after retrying this long", Range(0.001, DAY))  # fmt: skip
CLIENT_BATCH_SIZE = option("client.writer.batch-size", "size", 256 * KiB, [CLIENT],
                           "send a bucket's batch at this size", Range(KiB, MAX_FETCH_RESPONSE_BYTES))  # fmt: skip
CLIENT_LINGER = option("client.writer.batch-timeout", "duration", 0.0, [CLIENT],
                       "... or when its first record is this old (linger)", Range(0.0, MINUTE))  # fmt: skip
CLIENT_BUFFER_MEMORY = option("client.writer.buffer.memory-size", "size", 32 * MiB, [CLIENT],
                              "unacknowledged bytes before send blocks", Range(KiB))  # fmt: skip
CLIENT_IDEMPOTENCE = option(
    "client.writer.enable-idempotence", "bool", True, [CLIENT], "exactly-once retries (needs acks 1 or all)"
)
CLIENT_MAX_IN_FLIGHT = option("client.writer.max-inflight-requests-per-bucket", "int", 5, [CLIENT],
                              "unanswered batches per bucket (<= 5)", Range(1, 5))  # fmt: skip
CLIENT_RETRY_BACKOFF = option("client.retry.backoff", "duration", 0.02, [CLIENT], "first retry backoff (doubles)",
                              Range(0.001, MINUTE))  # fmt: skip
CLIENT_RETRY_BACKOFF_MAX = option("client.retry.backoff-max", "duration", 0.5, [CLIENT], "largest retry backoff",
                                  Range(0.001, 10 * MINUTE))  # fmt: skip
CLIENT_FETCH_MAX_WAIT = option("client.scanner.fetch.max-wait", "duration", 0.5, [CLIENT],
                               "a consumer fetch waits this long for data", Range(0.0, 10 * MINUTE))  # fmt: skip

# ---------------------------------------------------------------- consumer groups (docs/consumer-groups.md)
GROUP_MIN_SESSION_TIMEOUT = option("group.min-session-timeout", "duration", 1.0, [COORDINATOR],
                                   "shortest session timeout a member may ask for", Range(0.1, HOUR))  # fmt: skip
GROUP_MAX_SESSION_TIMEOUT = option("group.max-session-timeout", "duration", 60.0, [COORDINATOR],
                                   "longest session timeout a member may ask for", Range(0.1, HOUR))  # fmt: skip
GROUP_HEARTBEAT_INTERVAL = option("group.heartbeat-interval", "duration", 0.5, [COORDINATOR],
                                  "how often members heartbeat (told to them)", Range(0.01, MINUTE))  # fmt: skip
GROUP_MAX_SIZE = option("group.max-size", "int", 1000, [COORDINATOR],
                        "most members of one consumer group (a join beyond it is refused)",
                        Range(1, 10_000))  # fmt: skip
GROUP_REBALANCE_TIMEOUT = option("group.rebalance.timeout", "duration", 60.0, [COORDINATOR], "a member that has not "
                                 "given up its revoked buckets by then is fenced", Range(1.0, HOUR))  # fmt: skip

# ---------------------------------------------------------------- rules between keys
constraint("replica.fetch.wait.max.ms < replica.lag.time.max.ms (a waiting follower must not look lagging)",
           lambda wait, lag: wait < lag, REPLICA_FETCH_WAIT_MAX, REPLICA_LAG_TIME_MAX)  # fmt: skip
constraint("replica.fetch.min.bytes <= replica.fetch.max.bytes",
           lambda lo, hi: lo <= hi, REPLICA_FETCH_MIN_BYTES, REPLICA_FETCH_MAX_BYTES)  # fmt: skip
constraint("client.retry.backoff <= client.retry.backoff-max",
           lambda lo, hi: lo <= hi, CLIENT_RETRY_BACKOFF, CLIENT_RETRY_BACKOFF_MAX)  # fmt: skip
constraint("group.min-session-timeout <= group.max-session-timeout",
           lambda lo, hi: lo <= hi, GROUP_MIN_SESSION_TIMEOUT, GROUP_MAX_SESSION_TIMEOUT)  # fmt: skip
