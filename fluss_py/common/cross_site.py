"""Refusing cross-site requests to the state-changing HTTP routes (pure; docs/security.md, "Cross-site").

A browser sends a form from any page to any address (``<form method=POST action="https://coord/rebalance?
dry_run=false">``) with the user's ambient credentials: the operator's client certificate, or nothing on
a plaintext cluster. Parameters travel in the query string, so the body the form cannot shape does not
protect anything. A request that changes state must therefore prove it was not sent by a cross-site page::

    GET, HEAD, OPTIONS                                   -> may go on (they change nothing)
    no header  X-Fluss-Request: 1                        -> refused (a form cannot set a header; a script
                                                            of another origin setting it needs a CORS
                                                            preflight, which these servers never grant)
    Sec-Fetch-Site other than same-origin or none        -> refused (the browser says it is cross-site)
    Origin present and not this server's own origin      -> refused (also "null": sandboxed or redirected)
    otherwise                                            -> may go on

``refusal(method, headers, scheme)`` answers why a request is refused, None when it may go on. ``headers``
have lower-case names; the server's own origin is ``scheme://`` + the request's Host header (a header the
page cannot set). Every fluss_py client of these routes (the CLI's ``admin rebalance`` and ``config``, the
console) sends the header. Who may call: anyone.
"""

from __future__ import annotations

from collections.abc import Mapping

REQUEST_HEADER = "X-Fluss-Request"
REQUEST_HEADER_VALUE = "1"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_SAME_SITE_FETCH = frozenset({"same-origin", "none"})  # "none": typed by the user, not sent by a page


def refusal(method: str, headers: Mapping[str, str], scheme: str) -> str | None:
    """Why a ``method`` request with ``headers`` (lower-case names) may not change state, or None."""
    if method.upper() in SAFE_METHODS:
        return None
    if headers.get(REQUEST_HEADER.lower(), "").strip() != REQUEST_HEADER_VALUE:
        return f"{method} needs the header {REQUEST_HEADER}: {REQUEST_HEADER_VALUE} (cross-site requests are refused)"
    fetch_site = headers.get("sec-fetch-site", "").strip().lower()
    if fetch_site and fetch_site not in _SAME_SITE_FETCH:
        return f"a {fetch_site} request may not change state"
    origin = headers.get("origin")
    if origin is not None:
        own = f"{scheme}://{headers.get('host', '')}".lower()
        if origin.strip().lower() != own:
            return f"origin {origin.strip()[:200]!r} is not this server ({own})"
    return None
