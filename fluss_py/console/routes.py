"""The console's HTTP side: the page, its static files and a Server-Sent Events stream of snapshots.

    GET /console                 the page (a standby answers 307 to the leader's /console)
    GET /console/static/{file}   console.js, console.css (files of this package; no build step)
    GET /console/events          text/event-stream: one ``snapshot`` event per sample (every ``interval`` s);
                                 a ``closed`` event, then the end, when its principal is no longer proven
    GET /console/snapshot        the latest snapshot as JSON (scripts, tests)

Every sample is encoded once and the same bytes go to every connected console, so a console costs the
coordinator one socket write per sample. Samples are taken only while a console watches (a live stream, or a
snapshot read in the last ``WATCHED_S``): the first read of an unwatched coordinator waits for a fresh one.
The failover timeline does not depend on samples: the view tells the feed of each LeaderAndIsr change, so
nobody watching costs the coordinator nothing per bucket (docs/console.md).

On a secure cluster every read but the static files needs an authenticated principal (Basic credentials
or a client certificate; 401 with a Basic challenge otherwise) and shows what it may DESCRIBE
(console/visibility.py; docs/console.md "Security"). An event stream is checked before each event against
what proved its principal when it opened (security/http_access.HttpStream, the gRPC streams' StreamGrant):
a user removed or given a new password, a certificate expired or whose CA was removed, ends it with a
``closed`` event naming why.

State-changing actions are not here: the page calls the guarded
``POST|DELETE /rebalance`` routes (fluss_py/coordinator/rebalance/routes.py), so the ALTER check of the
security layer applies to them unchanged.

Who may call: ``CoordinatorServer`` builds a ``ConsoleFeed``, spawns ``feed.run()`` as an owned task and
passes ``feed.setup`` to its HttpServer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from importlib import resources
from typing import Protocol

from aiohttp import web

from fluss_py.common.http import Response, peer_certificate_pem, request_of, web_response
from fluss_py.console.groups import LagHistory
from fluss_py.console.leader_view import LeaderView
from fluss_py.console.snapshot import ConsoleSource, Rates, Timeline, build_snapshot
from fluss_py.console.visibility import Viewer, visible
from fluss_py.types import CoordinatorLeaderInfo, LeaderAndIsr, TableBucket

log = logging.getLogger(__name__)

STATIC_FILES = {"console.js": "application/javascript", "console.css": "text/css"}
KEEPALIVE_S = 15.0  # an SSE comment line when nothing changed, so proxies keep the stream open
REFRESH_EVERY = 5  # samples between two runs of ``refresh`` (the ZooKeeper reads of the coordinators panel)
WATCHED_S = 10.0  # a snapshot read counts as a watching console for this long (pollers, not only streams)
MAX_GROUPS = 50  # groups whose committed offsets are read from ZooKeeper for the console, first by name
REFRESH_TIMEOUT_S = 2.0
FRESH_TIMEOUT_S = REFRESH_TIMEOUT_S + 3.0  # a first read waits at most this long for its fresh sample
MAX_FILTERED = 100  # principals whose cut of the latest sample is kept (more start the cache over)
EVENTS = "/console/events"


class Stream(Protocol):
    """An open event stream's viewer and what it is checked against (security/http_access.HttpStream)."""

    @property
    def viewer(self) -> Viewer | None: ...

    def revoked(self) -> str | None: ...  # why the stream must end now (counted, audited), None: it goes on

    def close(self) -> None: ...


class Access(Protocol):
    """Who the caller of a console read is (security/http_access.HttpAccess)."""

    async def viewer(self, headers: Mapping[str, str], certificate_cn: str | None) -> Viewer | Response: ...

    async def stream(
        self, route: str, headers: Mapping[str, str], certificate_cn: str | None, certificate_pem: bytes | None
    ) -> Stream | Response: ...


class _Unchecked:
    """The stream of a console without security: everything shows, nothing to re-check."""

    viewer = None

    def revoked(self) -> None:
        return None

    def close(self) -> None:
        pass


class ConsoleFeed:
    """Owns the sampling loop, the latest encoded snapshot and the subscribers' wake-up event.

    ``read()`` gives one ConsoleSource (called from the sampling task, on the coordinator's loop);
    ``leader()`` the known leader, for the standby's redirect; ``view()`` the serving leader's ClusterView
    (None on a standby), whose LeaderAndIsr changes feed the timeline (``attach``, every tick).
    """

    def __init__(
        self,
        read: Callable[[], ConsoleSource],
        leader: Callable[[], Awaitable[CoordinatorLeaderInfo | None]],
        *,
        interval: float = 1.0,
        scheme: str = "http",
        refresh: Callable[[], Awaitable[None]] | None = None,
        view: Callable[[], LeaderView | None] | None = None,
        access: Access | None = None,
    ) -> None:
        """``refresh``: an async read the ``read`` callable's source depends on (ZooKeeper), run every
        ``REFRESH_EVERY`` samples and awaited at most ``REFRESH_TIMEOUT_S`` (a slow ZooKeeper delays the
        next sample by that much, and the panel it feeds stays as last read). ``access.viewer(headers,
        certificate_cn)``: the request's Viewer, or the 401 to answer; ``access.stream`` the same for an
        event stream, with what it is re-checked against (None: everyone sees everything)."""
        self._access = access
        self._filtered: dict[str, bytes] = {}  # principal -> its view of the latest sample (console/visibility.py)
        self._read = read
        self._view = view
        self._attached: LeaderView | None = None  # the view whose changes feed the timeline
        self._refresh = refresh
        self._leader = leader
        self.interval = interval
        self.scheme = scheme
        self.timeline = Timeline()
        self.rates = Rates()
        self.lags = LagHistory()
        self.subscribers = 0
        self._polled = -WATCHED_S  # monotonic time of the last /console/snapshot read
        self._latest: dict | None = None  # the last snapshot, encoded on first use (``encoded``)
        self._encoded: bytes | None = b"{}"
        self._sequence = 0
        self._changed = asyncio.Event()
        self._wake = asyncio.Event()  # set by a first read: sample now, not at the next tick

    async def run(self) -> None:
        """Every ``interval``: follow the serving view (``attach``) and, while a console watches, sample; a
        failed sample is logged and published as an error, the loop goes on. Unwatched, a tick costs O(1)."""
        samples, refreshed_for = 0, None
        while True:
            self.attach()
            if self.watched or self._wake.is_set():
                # every REFRESH_EVERY samples, and at once when this coordinator's own state or epoch changed
                # (it just became leader: the panel must not show the election it won for 5 s)
                own = self._latest.get("coordinator") if self._latest else None
                if self._refresh is not None and (samples % REFRESH_EVERY == 0 or own != refreshed_for):
                    refreshed_for = own
                    try:
                        await asyncio.wait_for(self._refresh(), REFRESH_TIMEOUT_S)
                    except Exception as e:  # the panel keeps its last read; the next round tries again
                        log.warning("console refresh failed: %s: %s", type(e).__name__, e)
                self._wake.clear()
                self.sample(time.time())
                samples += 1
            else:
                samples = 0  # the first sample of the next watch refreshes the coordinators panel
            try:
                await asyncio.wait_for(self._wake.wait(), self.interval)
            except TimeoutError:
                pass

    def attach(self) -> None:
        """Feed the timeline from the serving leader's view (a new term's view: a new, empty timeline)."""
        view = self._view() if self._view is not None else None
        if view is self._attached:
            return
        if self._attached is not None and self._attached.on_leader_and_isr == self._bucket_changed:
            self._attached.on_leader_and_isr = None
        self._attached = view
        self.timeline.clear()
        if view is not None:
            view.on_leader_and_isr = self._bucket_changed

    def _bucket_changed(self, tb: TableBucket, old: LeaderAndIsr | None, new: LeaderAndIsr) -> None:
        info = self._attached.tables.get(tb.table_id) if self._attached is not None else None
        table = f"{info.path.database}.{info.path.table}" if info is not None else str(tb.table_id)
        self.timeline.record(time.time(), table, tb.bucket, old, new)

    async def fresh(self) -> None:
        """Wait (at most ``FRESH_TIMEOUT_S``) for a sample taken after this call: the first read of a
        console nobody watched (the last sample may be long gone)."""
        sequence = self._sequence
        self._wake.set()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FRESH_TIMEOUT_S
        while self._sequence == sequence and loop.time() < deadline:
            changed = self._changed
            try:
                await asyncio.wait_for(changed.wait(), max(0.0, deadline - loop.time()))
            except TimeoutError:
                break

    def sample(self, now: float) -> None:
        try:
            snapshot = build_snapshot(self._read(), now)
            self.rates.observe(snapshot)
            self.lags.observe(snapshot.get("groups", []), snapshot.get("groups_read"), now)
            snapshot["timeline"] = self.timeline.events(now)
        except Exception as e:
            log.exception("console snapshot failed")
            snapshot = {"ts": now, "error": f"{type(e).__name__}: {e}"}
        self._latest, self._encoded = snapshot, None  # encoded when a client asks: none may be watching
        self._filtered = {}
        self._sequence += 1
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    @property
    def watched(self) -> bool:
        """True while a console is connected (a live stream, or a snapshot read in the last ``WATCHED_S``):
        the group offsets are read from ZooKeeper only then."""
        return self.subscribers > 0 or time.monotonic() - self._polled < WATCHED_S

    @property
    def encoded(self) -> bytes:
        """The last snapshot as JSON (encoded once per sample, only if some client reads it: with 20,000
        buckets the encoding was an eighth of a coordinator's CPU while nobody watched)."""
        if self._encoded is None:
            self._encoded = json.dumps(self._latest, separators=(",", ":")).encode("utf-8")
        return self._encoded

    def encoded_for(self, viewer: Viewer | None) -> bytes:
        """The last snapshot as ``viewer`` may see it: the shared encoding when it sees everything, else its
        own cut (console/visibility.py), encoded once per sample and principal."""
        if viewer is None or viewer.sees_all:
            return self.encoded
        principal = getattr(viewer, "principal", "")
        body = self._filtered.get(principal)
        if body is None:
            if len(self._filtered) >= MAX_FILTERED:
                self._filtered = {}
            cut = visible(self._latest if self._latest is not None else {}, viewer)
            body = self._filtered[principal] = json.dumps(cut, separators=(",", ":")).encode("utf-8")
        return body

    async def _viewer(self, request: web.Request) -> Viewer | web.Response | None:
        """The request's Viewer (None: security off), or the 401 to answer."""
        if self._access is None:
            return None
        req = request_of(request)
        answer = await self._access.viewer(req.headers, req.certificate_cn)
        return web_response(answer) if isinstance(answer, tuple) else answer

    async def _stream(self, request: web.Request) -> Stream | web.Response:
        """``_viewer`` for an event stream, with what it is checked against before each event."""
        if self._access is None:
            return _Unchecked()
        req = request_of(request)
        answer = await self._access.stream(EVENTS, req.headers, req.certificate_cn, peer_certificate_pem(request))
        return web_response(answer) if isinstance(answer, tuple) else answer

    def setup(self, app: web.Application) -> None:
        app.router.add_get("/console", self._page)
        app.router.add_get("/console/", self._page)
        app.router.add_get("/console/static/{name}", self._static)
        app.router.add_get(EVENTS, self._events)
        app.router.add_get("/console/snapshot", self._snapshot)

    async def _leader_url(self, request: web.Request) -> str | None:
        """The leader's console URL when this coordinator is not the leader, else None."""
        if self._read().view is not None:
            return None
        info = await self._leader()
        if info is None or not info.http_port:
            return ""
        return f"{self.scheme}://{info.host}:{info.http_port}/console"

    async def _page(self, request: web.Request) -> web.StreamResponse:
        if request.query:
            raise web.HTTPBadRequest(text=f"/console takes no parameters (got {', '.join(sorted(request.query))})\n")
        viewer = await self._viewer(request)  # a browser asks for a user and password on the 401
        if isinstance(viewer, web.Response):
            return viewer
        target = await self._leader_url(request)
        if target:
            raise web.HTTPTemporaryRedirect(target)
        if target == "":
            return web.Response(status=503, text="no coordinator leader is known yet; retry shortly\n")
        return web.Response(body=_read_static("index.html"), content_type="text/html", charset="utf-8")

    async def _static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in STATIC_FILES:
            raise web.HTTPNotFound(text=f"no console file {name!r}\n")
        return web.Response(body=_read_static(name), headers={"Content-Type": STATIC_FILES[name]})

    async def _snapshot(self, request: web.Request) -> web.StreamResponse:
        if request.query:
            raise web.HTTPBadRequest(text="/console/snapshot takes no parameters\n")
        viewer = await self._viewer(request)
        if isinstance(viewer, web.Response):
            return viewer
        watched = self.watched
        self._polled = time.monotonic()
        if not watched:
            await self.fresh()
        return web.Response(body=self.encoded_for(viewer), content_type="application/json")

    async def _events(self, request: web.Request) -> web.StreamResponse:
        if request.query:
            raise web.HTTPBadRequest(text="/console/events takes no parameters\n")
        stream = await self._stream(request)
        if isinstance(stream, web.Response):
            return stream
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        watched = self.watched
        self.subscribers += 1
        try:  # ends when the browser goes away (the write raises), the server closes or the proof is gone
            if not watched:
                await self.fresh()
            sent, idle = -1, False
            while True:
                why = stream.revoked()  # before each event: what proved the principal still holds
                if why is not None:
                    reason = json.dumps({"reason": why}, separators=(",", ":")).encode("utf-8")
                    await response.write(b"event: closed\ndata: " + reason + b"\n\n")
                    await response.write_eof()
                    return response
                if sent != self._sequence:
                    sent = self._sequence
                    await response.write(b"event: snapshot\ndata: " + self.encoded_for(stream.viewer) + b"\n\n")
                elif idle:
                    await response.write(b": keep-alive\n\n")
                changed = self._changed
                try:
                    await asyncio.wait_for(changed.wait(), KEEPALIVE_S)
                    idle = False
                except TimeoutError:
                    idle = True
        finally:
            self.subscribers -= 1
            stream.close()


def _read_static(name: str) -> bytes:
    return resources.files("fluss_py.console").joinpath("static", name).read_bytes()
