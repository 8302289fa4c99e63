"""Refusing cross-site requests to the state-changing HTTP routes (pure; docs/security.md, "Cross-site").

A browser sends a form from any page to any address (``<form method=POST action="https://coord/rebalance?
dry_run=false">``) with the user's ambient credentials: the operator's client certificate, or nothing on
a plaintext cluster. Parameters travel in the query string, so the body the form cannot shape does not
protect anything. A request that changes state must therefore prove it was not sent by a cross-site page.
A browser marks what it sends: every POST carries ``Origin`` (Chrome since 2013, Firefox since 70; other
methods cannot be sent by a form, and a script of another origin sending them needs a CORS preflight),
current browsers add ``Sec-Fetch-Site`` to every request, and a page's links and forms carry ``Referer``
unless a policy strips it. A request with none of the three was not sent by a browser on behalf of a page
(``curl -X POST http://coord:9124/rebalance``, a script, the CLI)::

    GET, HEAD, OPTIONS                                   -> may go on (they change nothing)
    Sec-Fetch-Site other than same-origin or none        -> refused (the browser says it is cross-site)
    Origin present and not this server's own origin      -> refused (also "null": sandboxed or redirected)
    Referer present and not on this server's own origin  -> refused
    none of Origin, Sec-Fetch-Site, Referer              -> may go on (no browser sent it)
    a browser's request without X-Fluss-Request: 1       -> refused (the console sends it; a script of
                                                            another origin setting it needs a CORS
                                                            preflight, which these servers never grant)
    otherwise                                            -> may go on

``refusal(method, headers, scheme)`` answers why a request is refused, None when it may go on. ``headers``
have lower-case names; the server's own origin is ``scheme://`` + the request's Host header (a header the
page cannot set). Who may call: anyone.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

REQUEST_HEADER = "X-Fluss-Request"
REQUEST_HEADER_VALUE = "1"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
BROWSER_HEADERS = ("origin", "sec-fetch-site", "referer")  # at least one is on every page-sent state change
_SAME_SITE_FETCH = frozenset({"same-origin", "none"})  # "none": typed by the user, not sent by a page


def refusal(method: str, headers: Mapping[str, str], scheme: str) -> str | None:
    """Why a ``method`` request with ``headers`` (lower-case names) may not change state, or None."""
    if method.upper() in SAFE_METHODS:
        return None
    own = f"{scheme}://{headers.get('host', '')}".lower()
    fetch_site = headers.get("sec-fetch-site", "").strip().lower()
    if fetch_site and fetch_site not in _SAME_SITE_FETCH:
        return f"a {fetch_site} request may not change state"
    origin = headers.get("origin")
    if origin is not None and origin.strip().lower() != own:
        return f"origin {origin.strip()[:200]!r} is not this server ({own})"
    referer = headers.get("referer")
    if referer is not None and _origin_of(referer) != own:
        return f"referer {referer.strip()[:200]!r} is not on this server ({own})"
    if not any(name in headers for name in BROWSER_HEADERS):
        return None  # not sent by a browser for a page: curl, scripts, the CLI
    if headers.get(REQUEST_HEADER.lower(), "").strip() != REQUEST_HEADER_VALUE:
        header = f"{REQUEST_HEADER}: {REQUEST_HEADER_VALUE}"
        return f"a browser's {method} needs the header {header} (cross-site requests are refused)"
    return None


def _origin_of(url: str) -> str:
    """``scheme://host[:port]`` of ``url`` (lower case), "" when it has none."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""
