"""The console's consumer-groups panel, decided without I/O (docs/console.md).

``groups_view`` joins three reads: the coordinator leader's in-memory membership (``GroupMembers`` per loaded
group: state, members, what each owns), the committed offsets last read from ZooKeeper (``read_committed``
in ``coordinator/groups.py``, at most every 5 s and only while a console watches), and the HW of each
bucket from its current leader's last liveness report. Lag is HW - committed, unknown (None) while the HW
is. ``LagHistory`` keeps each bucket's lag at every offsets read for the sparkline.

Who may call: ``fluss_py/coordinator/server.py`` (the console source) and ConsoleFeed's sampling task.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from fluss_py.console.leader_view import GroupView, MemberView
from fluss_py.types import TableBucket

LAG_WINDOW_S = 300.0
LAG_POINTS = 60  # one per offsets read (every 5 s): the last 5 minutes


def groups_view(
    members: Mapping[str, GroupView],
    committed: Mapping[str, Mapping[TableBucket, int]],
    hw: Callable[[TableBucket], int],
) -> list[dict[str, Any]]:
    """One row per group named by either read, sorted by name. Keys: ``name``, ``state`` (EMPTY for a
    group with no members in this leader's memory), ``members`` [{``id``, ``host``, ``b``: [[table, bucket],
    ...]}], ``offsets`` [[table, bucket, committed, HW or -1, lag or None], ...]."""
    out = []
    for name in sorted(set(members) | set(committed)):
        group = members.get(name)
        rows = []
        for tb, offset in sorted(committed.get(name, {}).items()):
            high = hw(tb)
            rows.append([tb.table_id, tb.bucket, offset, high, max(0, high - offset) if high >= 0 else None])
        out.append({
            "name": name,
            "state": group.state if group is not None else "EMPTY",
            "members": [_member(m) for _, m in sorted(group.members.items())] if group is not None else [],
            "offsets": rows,
        })  # fmt: skip
    return out


def _member(m: MemberView) -> dict[str, Any]:
    return {"id": m.member_id, "host": m.client_host, "b": [[tb.table_id, tb.bucket] for tb in sorted(m.assigned)]}


class LagHistory:
    """Each (group, table, bucket)'s lag at the last ``points`` offsets reads within ``window_s``; a bucket
    no longer shown is forgotten. Owned by ConsoleFeed's sampling task."""

    def __init__(self, window_s: float = LAG_WINDOW_S, points: int = LAG_POINTS) -> None:
        self.window_s = window_s
        self.points = points
        self._lags: dict[tuple[str, int, int], deque[tuple[float, int]]] = {}
        self._read_at: float | None = None

    def observe(self, groups: list[dict[str, Any]], read_at: float | None, now: float) -> None:
        """Adds a point per bucket when the offsets were read again (``read_at`` moved), and puts each row's
        history (lags, oldest first) in the row as a sixth element."""
        fresh = read_at is not None and read_at != self._read_at
        self._read_at = read_at
        seen = set()
        for g in groups:
            for row in g["offsets"]:
                key = (g["name"], row[0], row[1])
                seen.add(key)
                history = self._lags.setdefault(key, deque(maxlen=self.points))
                if fresh and row[4] is not None:
                    history.append((now, row[4]))
                while history and history[0][0] < now - self.window_s:
                    history.popleft()
                row.append([lag for _, lag in history])
        for key in set(self._lags) - seen:
            del self._lags[key]
