"""Coordinator leader election: ephemeral-sequential candidates, each watching only its predecessor.

    <root>/coordinator/election/candidate_0000000001   <- smallest sequence: the leader
    <root>/coordinator/election/candidate_0000000002   <- watches ...01 (exists-watch), nothing else
    <root>/coordinator/election/candidate_0000000003   <- watches ...02

When a candidate's predecessor disappears only that one candidate is notified (O(1) per change, no herd).
It lists the children again: if it is now the smallest it has won, otherwise it watches its new
predecessor (the one that vanished may have been a middle candidate).

Winning is not enough to act: the winner fences with ``fence_become_leader``, a transaction that checks
its own candidate still exists and bumps ``<root>/coordinator/epoch`` with a version-conditional set. The
epoch node's new version is the token every later metadata write checks (``ZkClient.commit(fence=...)``).

``decide`` is the pure rule; ``LeaderElection`` does the I/O. Who may call: the coordinator's lifecycle
task only (one caller at a time); the predecessor watch calls ``on_predecessor_gone`` on the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from fluss_py.zk.client import ZkClient
from fluss_py.zk.codecs import sequence_of
from fluss_py.zk.epoch_node import next_epoch, padding, parse_epoch, recreate_epoch_node
from fluss_py.zk.own_nodes import ensure_own_sequential
from fluss_py.zk.paths import CandidateZNode, CoordinatorEpochZNode
from fluss_py.zk.values import (
    BadVersionError,
    CheckOp,
    EpochFence,
    EpochFencedError,
    NoNodeError,
    SetOp,
    WatchEvent,
)

# not __name__: the runbook shows its lines by this name, docs/operations.md (the candidate node line)
log = logging.getLogger("fluss_py.coordinator.CoordinatorLeaderElection")


@dataclass(frozen=True, slots=True)
class Decision:
    """Outcome of one look at the candidates: ``leader``, or the ``predecessor`` to watch, or ``missing``."""

    leader: bool = False
    predecessor: str | None = None
    missing: bool = False  # our candidate is not among the children (session expired / deleted)


def decide(own: str, children: Iterable[str]) -> Decision:
    """The election rule: the smallest sequence wins; every other candidate watches the next smaller one."""
    candidates = sorted((c for c in children if c.startswith(CandidateZNode.PREFIX)), key=sequence_of)
    if own not in candidates:
        return Decision(missing=True)
    index = candidates.index(own)
    if index == 0:
        return Decision(leader=True)
    return Decision(predecessor=candidates[index - 1])


class LeaderElection:
    """Owns this coordinator's candidate node and its single predecessor watch."""

    def __init__(self, zk: ZkClient, root: str, server_id: int, on_predecessor_gone: Callable[[], None]) -> None:
        self._zk = zk
        self._root = root
        self._server_id = server_id
        self._on_predecessor_gone = on_predecessor_gone
        self.candidate: str | None = None  # node name, e.g. candidate_0000000003
        self.watching: str | None = None

    @property
    def candidate_path(self) -> str | None:
        return f"{CandidateZNode.parent(self._root)}/{self.candidate}" if self.candidate else None

    async def ensure_candidate(self) -> str:
        """Create our ephemeral-sequential candidate unless we hold one in the current session.

        A candidate our session already owns (a create whose reply was lost, or a release that could not
        delete it) is adopted instead of creating a second one (``zk/own_nodes.py``)."""
        if self.candidate is None:
            parent = CandidateZNode.parent(self._root)
            data = CandidateZNode.encode(self._server_id)
            name, adopted = await ensure_own_sequential(self._zk, parent, CandidateZNode.PREFIX, data, "candidate")
            self.candidate = name
            if not adopted:
                log.info("Created candidate node: %s", self.candidate)
        return self.candidate

    async def check(self) -> Decision:
        """Look at the candidates; when not the leader, arm the watch on the predecessor (re-looking if it is
        already gone). ``missing`` means our candidate vanished: call ``forget`` and ``ensure_candidate``."""
        while True:
            own = await self.ensure_candidate()
            children = await self._zk.get_children(CandidateZNode.parent(self._root))
            decision = decide(own, children)
            if decision.missing:
                log.warning("Candidate node %s is gone (session expired or deleted)", own)
                self.forget()
                return decision
            if decision.leader:
                self.watching = None
                return decision
            assert decision.predecessor is not None
            pred_path = f"{CandidateZNode.parent(self._root)}/{decision.predecessor}"
            stat = await self._zk.exists(pred_path, watch=self._on_watch)
            if stat is None:
                continue  # vanished between the listing and the watch: look again
            if stat.ephemeral_owner == self._zk.session_id and self._zk.session_id:
                log.warning(
                    "Deleting candidate %s: an orphan of our own session ahead of %s", decision.predecessor, own
                )
                try:
                    await self._zk.delete(pred_path)
                except NoNodeError:
                    pass
                continue
            if self.watching != decision.predecessor:
                log.info("Candidate %s is not the smallest; watching predecessor %s", own, decision.predecessor)
            self.watching = decision.predecessor
            return decision

    def _on_watch(self, event: WatchEvent) -> None:
        if event.type == "NONE":
            return  # connection change: the lifecycle re-checks on reconnect
        if self.watching and event.path.endswith("/" + self.watching):
            log.info("Predecessor %s changed (%s); checking the election again", self.watching, event.type)
            self._on_predecessor_gone()

    async def resign(self) -> None:
        """Delete our candidate (voluntary release); the next candidate is notified and takes over.

        The name is forgotten only once the node is gone: on any other ZkError (a ConnectionLoss with the
        session alive) we keep it, so the next election finds it ours instead of orphaning it."""
        path = self.candidate_path
        if path is not None:
            try:
                await self._zk.delete(path)
                log.info("Deleted candidate node %s", path.rsplit("/", 1)[1])
            except NoNodeError:
                pass
        self.forget()

    def forget(self) -> None:
        """Drop our idea of the candidate (its session is gone, so is the node)."""
        self.candidate = None
        self.watching = None


async def fence_become_leader(zk: ZkClient, root: str, candidate_path: str) -> EpochFence:
    """Bump the coordinator epoch, version-conditionally and only while our candidate exists.

    The next epoch is ``max(value, version) + 1`` and the transaction pads the node's version so that the
    new version equals the new epoch (``zk/epoch_node.py``). A missing node is re-created from the stored
    metadata (0 for a new cluster). Raises InvalidEpochNodeError when the node does not hold a
    non-negative integer, EpochFencedError when another coordinator bumped the epoch in between or our
    candidate is gone.
    """
    path = CoordinatorEpochZNode.path(root)
    while True:
        got = await zk.get(path)
        if got is None:
            await recreate_epoch_node(zk, root)
            got = await zk.get(path)
            if got is None:
                raise EpochFencedError(f"{path} vanished while fencing")
        data, stat = got
        epoch = next_epoch(parse_epoch(path, data), stat.version)
        pad = padding(path, data, stat.version, epoch - 1)
        if stat.version + len(pad) == epoch - 1:
            break
        try:  # a long way to pad (a re-created node): in steps; whoever fences next goes on from there
            await zk.commit(pad)
        except BadVersionError:
            pass
    try:
        results = await zk.commit([CheckOp(candidate_path, 0), *pad, SetOp(path, CoordinatorEpochZNode.encode(epoch),
                                                                               epoch - 1)])  # fmt: skip
    except (BadVersionError, NoNodeError) as e:
        raise EpochFencedError(f"could not bump the coordinator epoch to {epoch}: {e}") from None
    return EpochFence(epoch, results[-1].version)
