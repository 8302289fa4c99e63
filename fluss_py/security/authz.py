"""The authorizer: may this principal do this operation on this resource? And the audit of denials.

Super users (``security.super-users``) and the cluster's own servers (``security.internal.principals``) may
do everything; anyone else needs an ACL (``acl.decide``: DENY wins, nothing allowing it means no). When the
authorizer is off every authenticated principal may do everything except the servers' internal RPCs.

Decisions are remembered per (principal, operation, resource) for one snapshot of the ACLs: the ACL source
hands out an immutable tuple and replaces it on every change (``SecurityCache``: the ZooKeeper watch), and
a different tuple starts an empty cache; a source returning anything else (a list) is asked every time.
At most ``MAX_DECISIONS`` are kept (the cache starts over when full), so forged names cannot grow it.

A denial is counted (``fluss_authorization_denials_total{operation,resource_type}``) and logged as an audit
line at most once per minute per principal and resource, so a client retrying in a loop cannot flood the log.
A remembered denial is still counted and audited on every request it refuses.

Who may call: the security interceptor and the HTTP guard, on the server's loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry

from fluss_py import metric_catalogue as mc
from fluss_py.security.acl import decide
from fluss_py.security_types import Acl, Operation, Resource

# not __name__: the runbook shows its lines by this name, docs/security.md (the audit lines)
audit = logging.getLogger("fluss_py.security.audit")

AUDIT_INTERVAL_S = 60.0
MAX_DECISIONS = 10_000


class Authorizer:
    """Owns the denial counters, the audit rate limit and the decisions of the current ACL snapshot; reads
    ACLs through ``acls()``."""

    def __init__(
        self,
        acls: Callable[[], Iterable[Acl]],
        *,
        enabled: bool,
        super_users: Iterable[str],
        internal_principals: Iterable[str],
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._acls = acls
        self.enabled = enabled
        self.super_users = frozenset(super_users)
        self.internal_principals = frozenset(internal_principals)
        self._clock = clock
        self._last_audit: dict[tuple[str, str], float] = {}
        self._snapshot: object = None  # the ACL tuple the decisions below were made with
        self._decisions: dict[tuple[str, Operation, Resource], bool] = {}
        self.denials = mc.AUTHORIZATION_DENIALS.counter(registry)
        self.authentication_failures = mc.AUTHENTICATION_FAILURES.counter(registry)

    def is_internal(self, principal: str) -> bool:
        return principal in self.internal_principals

    def allows_all(self, principal: str) -> bool:
        """True when no ACL is consulted for ``principal`` (authorizer off, super user, a server)."""
        return not self.enabled or principal in self.super_users or principal in self.internal_principals

    def visible(self, principal: str, resource: Resource) -> bool:
        """May ``principal`` DESCRIBE ``resource``? (filtering answers: no audit line, no count)"""
        return self.allows_all(principal) or self._decide(principal, Operation.DESCRIBE, resource)

    def allowed(self, principal: str, operation: Operation, resource: Resource) -> bool:
        if self.allows_all(principal):
            return True
        if self._decide(principal, operation, resource):
            return True
        self.denied(principal, operation.value, resource)
        return False

    def _decide(self, principal: str, operation: Operation, resource: Resource) -> bool:
        """``acl.decide`` against the current ACLs, remembered while they stay the same snapshot."""
        acls = self._acls()
        if not isinstance(acls, tuple):  # not an immutable snapshot: it may change in place
            return decide(acls, principal, operation, resource)
        if acls is not self._snapshot:
            self._snapshot, self._decisions = acls, {}
        key = (principal, operation, resource)
        decision = self._decisions.get(key)
        if decision is None:
            if len(self._decisions) >= MAX_DECISIONS:
                self._decisions = {}
            decision = self._decisions[key] = decide(acls, principal, operation, resource)
        return decision

    def closed(self, stream: str, principal: str, reason: str) -> None:
        """Count and audit a stream (gRPC or HTTP) ended because its principal is no longer proven
        (``stream_grant.py``): one audit line per stream, never rate-limited (a stream closes once)."""
        self.authentication_failures.inc()
        audit.warning("CLOSED stream=%s principal=%s: %s", stream, principal, reason)

    def denied(self, principal: str, operation: str, resource: Resource | str) -> None:
        """Count a denial and write its audit line unless one for the same principal + resource was
        written in the last minute."""
        kind = resource.type.value if isinstance(resource, Resource) else "internal"
        self.denials.labels(operation, kind).inc()
        key = (principal, str(resource))
        now = self._clock()
        if now - self._last_audit.get(key, -AUDIT_INTERVAL_S) < AUDIT_INTERVAL_S:
            return
        if len(self._last_audit) > 10_000:
            self._last_audit = {k: t for k, t in self._last_audit.items() if now - t < AUDIT_INTERVAL_S}
        self._last_audit[key] = now
        audit.warning("DENIED principal=%s operation=%s resource=%s", principal, operation, resource)
