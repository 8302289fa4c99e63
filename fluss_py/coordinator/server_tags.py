"""Server tags, decided without I/O (docs/rebalance.md §12): what a tag is, its stored form, which tag
changes are refused, which leaderships leave tagged servers, which dead servers are due for replacement.

    temporary-offline   down for a while: leaderships move away, nothing new is placed on it
    permanent-offline   gone for good: the same, and its replicas are moved to other servers (a replacement)
    none                no tag

The refusal rule (``check_tag_change``). A bucket's *serving* replicas are those on live, untagged servers.
Changing server S's tag is refused, with nothing written, when S is unknown (not registered, hosting no
replica, untagged: TABLET_SERVER_NOT_EXIST), or (INVALID_SERVER_TAG) when

- the new tag would leave no live untagged server (S is the last live server), or
- a bucket with a replica on S would have fewer serving replicas after the change than now, and fewer than
  its min ISR; for permanent-offline, "after" counts the replica the replacement adds where its plan found a
  target (``covered``). So permanent-offline of a dead server is never refused for min ISR (it only adds
  replicas), temporary-offline of a live server is when taking it down would make acks=all fail.

Who may call: anyone (no I/O, no clock). The tag room (``tag_room.py``) calls it on the coordinator's loop.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from fluss_py import config as cfg
from fluss_py.coordinator import election
from fluss_py.coordinator.rebalance.planner import BucketPlacement
from fluss_py.coordinator.tables import BucketInfo
from fluss_py.errors import ConfigError, InvalidRequestError, InvalidServerTagError, TabletServerNotExistError
from fluss_py.types import LeaderAndIsr, TableBucket

NONE = "none"
MAX_NAMED = 5  # buckets a refusal names (then "and N more")
ALLOWED = "permanent-offline, temporary-offline or none"


class ServerTag(enum.Enum):
    PERMANENT_OFFLINE = "permanent-offline"
    TEMPORARY_OFFLINE = "temporary-offline"

    @classmethod
    def parse(cls, text: str) -> ServerTag | None:
        """A tag's spelling (``none``: no tag); INVALID_REQUEST for anything else."""
        if text == NONE:
            return None
        for tag in cls:
            if tag.value == text:
                return tag
        raise InvalidRequestError(f"server tag {text[:40]!r} is not one of {ALLOWED}")


def tag_name(tag: ServerTag | None) -> str:
    return NONE if tag is None else tag.value


@dataclass(frozen=True, slots=True)
class TagEntry:
    """One server's tag as stored: when it was set, by whom (``operator`` or ``auto``), why."""

    tag: ServerTag
    since_ms: int = 0
    by: str = "operator"
    reason: str = ""


def encode_tags(tags: Mapping[int, TagEntry]) -> dict[str, Any]:
    """The ``tags`` object of ``ServerTagsZNode`` (server id as a string key, ascending)."""
    return {
        str(s): {"tag": e.tag.value, "since_ms": e.since_ms, "by": e.by, "reason": e.reason}
        for s, e in sorted(tags.items())
    }


def decode_tags(raw: Mapping[str, Any]) -> dict[int, TagEntry]:
    """Inverse of ``encode_tags``; ValueError on an entry that does not check (unknown tag, bad id)."""
    out: dict[int, TagEntry] = {}
    for key, entry in raw.items():
        if not str(key).isdigit() or not isinstance(entry, Mapping):
            raise ValueError(f"server tag entry {key!r}: expected a server id and an object")
        tag = next((t for t in ServerTag if t.value == entry.get("tag")), None)
        if tag is None:
            raise ValueError(f"server tag entry {key!r}: unknown tag {entry.get('tag')!r}")
        out[int(key)] = TagEntry(tag, int(entry.get("since_ms", 0)), str(entry.get("by", "operator")),
                                 str(entry.get("reason", "")))  # fmt: skip
    return out


# ---------------------------------------------------------------- the refusal rule


def serving(replicas: Iterable[int], live: Set[int], tags: Mapping[int, Any]) -> int:
    """Replicas on live, untagged servers: what acks=all can count on once the tagged servers are down."""
    return sum(1 for r in replicas if r in live and r not in tags)


def min_isr_of(properties: Mapping[str, str], replica_count: int, default: int) -> int:
    """The min ISR the tablet servers apply to a bucket: the table's ``min.insync.replicas`` (an unreadable
    value is ignored, as they ignore it), else ``default``; clamped to [1, replica count]."""
    value = default
    raw = properties.get(cfg.TABLE_MIN_INSYNC_REPLICAS.key)
    if raw is not None:
        try:
            value = int(cfg.TABLE_MIN_INSYNC_REPLICAS.parse(raw))
        except ConfigError:
            pass
    return max(1, min(value, replica_count))


def check_tag_change(
    server: int,
    new: ServerTag | None,
    *,
    tags: Mapping[int, ServerTag],
    live: Set[int],
    known: Set[int],
    placement: Mapping[TableBucket, BucketPlacement],
    min_isr: Callable[[TableBucket, int], int],
    covered: Set[TableBucket],
) -> None:
    """Raise when setting ``server``'s tag to ``new`` (None: none) is refused (module docstring). ``tags``: the
    current tags; ``min_isr(bucket, replica count)``; ``covered``: the buckets for whose replica on ``server``
    the replacement plan under the new tags has a target."""
    if server not in known:
        raise TabletServerNotExistError(
            f"tablet server {server} is unknown: it is not registered, hosts no replica and has no tag"
        )
    after = {s: t for s, t in tags.items() if s != server}
    if new is not None:
        after[server] = new
        if not set(live) - set(after):
            raise InvalidServerTagError(
                f"tablet server {server} is the last live untagged server: tagging it {new.value} would leave "
                "no server to lead or place replicas on; nothing was written"
            )
    short: list[str] = []
    for tb in sorted(t for t, p in placement.items() if server in p.replicas):
        replicas = placement[tb].replicas
        before_n = serving(replicas, live, tags)
        after_n = serving(replicas, live, after) + (1 if new is ServerTag.PERMANENT_OFFLINE and tb in covered else 0)
        floor = min_isr(tb, len(replicas))
        if after_n < before_n and after_n < floor:
            short.append(f"{tb} ({before_n} -> {after_n} serving, min ISR {floor})")
    if short:
        more = f" and {len(short) - MAX_NAMED} more" if len(short) > MAX_NAMED else ""
        raise InvalidServerTagError(
            f"tagging tablet server {server} {tag_name(new)} would leave bucket(s) {', '.join(short[:MAX_NAMED])}"
            f"{more} with fewer live untagged replicas than their min ISR (acks=all writes would fail); "
            "bring back or untag the servers of their other replicas first; nothing was written"
        )


# ---------------------------------------------------------------- what the check does


def leaders_off(
    buckets: Mapping[TableBucket, BucketInfo],
    avoid: Set[int],
    live: Set[int],
    shutting_down: Set[int],
    busy: Set[TableBucket],
    coordinator_epoch: int,
) -> list[tuple[TableBucket, LeaderAndIsr]]:
    """Buckets led by a server in ``avoid`` (tagged) get the first other replica in assignment order that is
    live, in the ISR, untagged and not shutting down; the ISR is unchanged (a clean switch, as a preferred
    leader election). None possible: the leader stays. ``busy`` buckets (a running rebalance batch moves
    them) are left alone."""
    if not avoid:
        return []
    excluded = set(shutting_down) | set(avoid)
    changes = []
    for tb in sorted(buckets):
        bucket = buckets[tb]
        lai = bucket.leader_and_isr
        if lai is None or lai.leader not in avoid or tb in busy:
            continue
        new = election.reassignment_leader(bucket.replicas, lai, live, coordinator_epoch, excluded)
        if new is not None:
            changes.append((tb, new))
    return changes


def due_for_replacement(
    dead_since: Mapping[int, float], now: float, after: float, tags: Mapping[int, Any]
) -> list[int]:
    """Dead servers (``dead_since``: since when, on the leader's clock) to tag permanent-offline now:
    dead for at least ``after`` seconds (0: never) and not tagged (an operator's tag wins)."""
    if after <= 0:
        return []
    return sorted(s for s, t in dead_since.items() if s not in tags and now - t >= after)
