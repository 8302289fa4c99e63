// The Fluss console: renders the coordinator's snapshots (GET /console/events, Server-Sent Events).
// No framework and no build step. Every value from the server is set with textContent, never as HTML.
"use strict";

const PAGE_SIZE = 100;  // bucket rows drawn at once: 2000 buckets stay responsive
const state = { snapshot: null, table: null, page: 0, planned: false };

function $(id) { return document.getElementById(id); }

function row(cells, cls) {
  const tr = document.createElement("tr");
  if (cls) tr.className = cls;
  for (const value of cells) {
    const td = document.createElement("td");
    td.textContent = value;
    tr.appendChild(td);
  }
  return tr;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

function renderHeader(s) {
  const c = s.coordinator || {};
  $("coordinator").textContent =
    `coordinator ${c.id} · ${c.state} · epoch ${c.epoch} · ZooKeeper ${c.zk_connected ? "connected" : "DISCONNECTED"}`;
}

function renderCoordinators(s) {
  fill($("coordinators").tBodies[0], (s.coordinators || []).map((c) => {
    const tr = row([c.id, c.host || "—", c.state, c.epoch === null ? "—" : c.epoch,
      c.rank === null ? "—" : `standby #${c.rank}`], c.state === "Leader" ? "selected" : "");
    tr.dataset.coordinator = c.id;
    return tr;
  }));
}

function renderServers(s) {
  fill($("servers").tBodies[0], s.servers.map((t) => {
    const disk = t.total ? `${bytes(t.free)} free of ${bytes(t.total)} (${Math.round(100 - 100 * t.free / t.total)}% used)` : "—";
    const tr = row([t.id, t.host, t.rack || "—", t.alive ? "yes" : "NO", t.tag && t.tag !== "none" ? t.tag : "—",
      t.leaders, t.replicas, t.under_replicated,
      t.held === null || t.held === undefined ? "—" : bytes(t.held), disk], t.alive ? "" : "dead");
    tr.lastChild.title = (t.dirs || []).map(([p, f, n]) => `${p}: ${f < 0 ? "unknown" : `${bytes(f)} free of ${bytes(n)}`}`).join("\n");
    tr.dataset.server = t.id;
    return tr;
  }));
}

function renderTables(s) {
  if (state.table === null || !s.tables.some((t) => t.id === state.table)) {
    state.table = s.tables.length ? s.tables[0].id : null;
  }
  fill($("tables").tBodies[0], s.tables.map((t) => {
    const cls = t.offline ? "offline" : t.under_replicated ? "under" : "";
    const tr = row([t.name, t.buckets, t.replication_factor, bytes(t.bytes), bytes(t.bytes_per_s || 0) + "/s",
      (t.records_per_s || 0).toFixed(1), t.under_replicated, t.offline], cls + (t.id === state.table ? " selected" : ""));
    tr.dataset.table = t.id;
    tr.addEventListener("click", () => { state.table = t.id; state.page = 0; render(); });
    return tr;
  }));
}

function renderBuckets(s) {
  const table = s.tables.find((t) => t.id === state.table);
  $("bucket-title").textContent = table ? `of ${table.name}` : "";
  let buckets = s.buckets.filter((b) => b.table_id === state.table);
  if ($("problems-only").checked) buckets = buckets.filter((b) => b.offline || b.under_replicated);
  const pages = Math.max(1, Math.ceil(buckets.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages - 1);
  $("page-info").textContent = `page ${state.page + 1} of ${pages} (${buckets.length} buckets)`;
  const shown = buckets.slice(state.page * PAGE_SIZE, (state.page + 1) * PAGE_SIZE);
  fill($("buckets").tBodies[0], shown.map((b) => {
    const status = b.offline ? "offline" : b.under_replicated ? "under-replicated" : "ok";
    const tr = row([b.bucket, b.leader, b.leader_epoch, b.replicas.join(","), b.isr.join(","),
      b.hw < 0 ? "—" : b.hw, b.leo < 0 ? "—" : b.leo, bytes(b.size), status],
      b.offline ? "offline" : b.under_replicated ? "under" : "");
    tr.dataset.bucket = b.bucket;
    tr.dataset.leader = b.leader;
    tr.dataset.isr = b.isr.join(",");
    return tr;
  }));
}

function renderRebalance(s) {
  const r = s.rebalance;
  if (!r) return;
  $("rebalance-status").textContent = (r.replacing && r.replacing.length ? `replacing [${r.replacing.join(", ")}] · ` : "") +
    `${r.status} · batch ${r.batch + 1}/${r.batches_total} · ${r.moves_done}/${r.moves_total} moves done` +
    (r.moves_rolled_back ? ` · ${r.moves_rolled_back} rolled back` : "") + (r.message ? ` · ${r.message}` : "");
  $("rebalance-progress").max = Math.max(1, r.moves_total);
  $("rebalance-progress").value = r.moves_done;
}

function renderTimeline(s) {
  const events = s.timeline || [];
  const svg = $("timeline");
  const end = s.ts, start = end - 3600;
  const marks = events.map((e) => {
    const mark = document.createElementNS("http://www.w3.org/2000/svg", "circle");
    mark.setAttribute("cx", String(1000 * (e.ts - start) / 3600));
    mark.setAttribute("cy", e.kind === "leader" ? "18" : "42");
    mark.setAttribute("r", "4");
    mark.setAttribute("fill", e.kind === "leader" ? "#c33" : "#e90");
    const title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = `${new Date(e.ts * 1000).toLocaleTimeString()} ${e.table}[${e.bucket}] ${e.kind}`;
    mark.appendChild(title);
    return mark;
  });
  svg.replaceChildren(...marks);
  fill($("events").tBodies[0], events.slice(-50).reverse().map((e) =>
    row([new Date(e.ts * 1000).toLocaleTimeString(), e.table, e.bucket, e.kind, String(e.from), String(e.to)])));
}

const SVG = "http://www.w3.org/2000/svg";

function sparkline(lags) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("width", "120");
  svg.setAttribute("height", "20");
  svg.setAttribute("viewBox", "0 0 120 20");
  svg.classList.add("sparkline");
  if (lags.length > 1) {
    const max = Math.max(1, ...lags);
    const line = document.createElementNS(SVG, "polyline");
    line.setAttribute("points", lags.map((v, i) =>
      `${(120 * i / (lags.length - 1)).toFixed(1)},${(19 - 18 * v / max).toFixed(1)}`).join(" "));
    svg.appendChild(line);
  }
  return svg;
}

function renderGroups(s) {
  const groups = s.groups || [];
  const names = new Map(s.tables.map((t) => [t.id, t.name]));
  $("groups-read").textContent = s.groups_read ? `(offsets read ${new Date(s.groups_read * 1000).toLocaleTimeString()})` : "";
  fill($("group-members").tBodies[0], groups.flatMap((g) => (g.members.length ? g.members : [null]).map((m) => {
    const tr = row([g.name, g.state, m ? m.id : "—", m ? m.host : "—",
      m ? m.b.map(([t, b]) => `${names.get(t) || t}/${b}`).join(", ") || "—" : "—"]);
    tr.dataset.group = g.name;
    return tr;
  })));
  fill($("group-offsets").tBodies[0], groups.flatMap((g) => g.offsets.map(([t, b, committed, hw, lag, lags]) => {
    const tr = row([g.name, names.get(t) || String(t), b, committed, hw < 0 ? "—" : hw, lag === null ? "—" : lag, ""]);
    tr.lastChild.appendChild(sparkline(lags || []));
    tr.dataset.group = g.name;
    return tr;
  })));
}

function render() {
  const s = state.snapshot;
  if (!s) return;
  if (s.error) { $("coordinator").textContent = `snapshot failed: ${s.error}`; return; }
  renderHeader(s);
  renderCoordinators(s);
  renderServers(s);
  renderTables(s);
  renderBuckets(s);
  renderGroups(s);
  renderRebalance(s);
  renderTimeline(s);
  document.body.dataset.renders = String(Number(document.body.dataset.renders || 0) + 1);
}

async function rebalance(method, query) {
  // the header a cross-site form cannot send: the server refuses state changes without it (docs/security.md)
  const response = await fetch(`/rebalance${query}`, { method, headers: { "X-Fluss-Request": "1" } });
  const text = await response.text();
  let body;
  try { body = JSON.parse(text); } catch (e) { body = { message: text }; }
  if (!response.ok) {
    $("rebalance-plan").textContent = `${response.status}: ${body.error || ""} ${body.message || ""}`;
    $("rebalance-plan").className = "error";
    return null;
  }
  $("rebalance-plan").className = "";
  return body;
}

$("rebalance-dry-run").addEventListener("click", async () => {
  const plan = await rebalance("POST", "?dry_run=true");
  if (!plan) return;
  $("rebalance-plan").textContent = `${plan.status}\n${plan.summary || ""}\n` +
    (plan.moves || []).map((m) => `${m.table_id}[${m.bucket}]: ${m.from} → ${m.to} (${m.kind})`).join("\n");
  state.planned = plan.status === "PLANNED";
  $("rebalance-start").disabled = !state.planned;
});

$("rebalance-start").addEventListener("click", async () => {
  if (!state.planned || !window.confirm("Start the rebalance just planned? Replicas will move.")) return;
  $("rebalance-start").disabled = true;
  state.planned = false;
  await rebalance("POST", "?dry_run=false");
});

$("rebalance-cancel").addEventListener("click", async () => {
  if (!window.confirm("Cancel the running rebalance? Its open moves are rolled back.")) return;
  await rebalance("DELETE", "");
});

$("problems-only").addEventListener("change", () => { state.page = 0; render(); });
$("prev-page").addEventListener("click", () => { state.page = Math.max(0, state.page - 1); render(); });
$("next-page").addEventListener("click", () => { state.page += 1; render(); });

function connect() {
  const source = new EventSource("/console/events");
  source.addEventListener("open", () => { $("stream").textContent = "live"; $("stream").className = "badge live"; });
  source.addEventListener("error", () => { $("stream").textContent = "reconnecting"; $("stream").className = "badge"; });
  source.addEventListener("closed", (event) => {  // the server ended the stream: its credentials no longer hold
    source.close();  // no reconnect with them; reloading the page asks for new ones
    $("stream").textContent = "closed: " + JSON.parse(event.data).reason;
    $("stream").className = "badge";
  });
  source.addEventListener("snapshot", (event) => {
    state.snapshot = JSON.parse(event.data);
    if (!state.snapshot.buckets && !state.snapshot.error) return;
    if (state.snapshot.coordinator && state.snapshot.coordinator.state !== "Leader") {
      source.close();  // this coordinator stepped down: /console redirects to the leader once one is known
      window.setTimeout(() => window.location.assign("/console"), 2000);
      return;
    }
    render();
  });
}

connect();
