"""The timeline of a verify run as a self-contained SVG: each send's latency over time, faults shaded. Pure.

x: seconds since the start; y: latency of each answered send (log scale, 1 ms .. the longest); green dots
are acknowledgements, red crosses failures; a shaded band per fault, labelled with its kind.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from html import escape

from fluss_py.verify.history import ACK, FAIL, FAULT, SEND

WIDTH, HEIGHT, LEFT, BOTTOM, TOP = 1200, 420, 60, 40, 20
COLOURS = {
    "kill": "#e41a1c", "pause": "#377eb8", "term": "#4daf4a", "partition": "#984ea3",
    "netem": "#ff7f00", "zookeeper": "#a65628",
}  # fmt: skip


def timeline_svg(history: Iterable[dict]) -> str:
    events = list(history)
    sent = {(e["p"], e["s"]): e["t"] for e in events if e.get("k") == SEND}
    points = [
        (sent[(e["p"], e["s"])], max(e["t"] - sent[(e["p"], e["s"])], 1e-3), e["k"])
        for e in events
        if e.get("k") in (ACK, FAIL) and (e["p"], e["s"]) in sent
    ]
    faults = [e for e in events if e.get("k") == FAULT]
    t_end = max([t for t, _, _ in points] + [f["end"] for f in faults] + [1.0])
    y_max = max([lat for _, lat, _ in points] + [1.0])

    def x(t: float) -> float:
        return LEFT + (WIDTH - LEFT - 10) * t / t_end

    def y(lat: float) -> float:
        span = math.log10(y_max) + 3  # from 1 ms
        return HEIGHT - BOTTOM - (HEIGHT - BOTTOM - TOP) * (math.log10(lat) + 3) / span

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" '
           'font-size="11"><rect width="100%" height="100%" fill="white"/>']  # fmt: skip
    for f in faults:
        colour = COLOURS.get(f["kind"], "#999999")
        w = max(x(f["end"]) - x(f["start"]), 1.0)
        out.append(
            f'<rect x="{x(f["start"]):.1f}" y="{TOP}" width="{w:.1f}" height="{HEIGHT - BOTTOM - TOP}" '
            f'fill="{colour}" fill-opacity="0.15"><title>{escape(f["what"])}</title></rect>'
        )
    for t, lat, kind in points:
        if kind == ACK:
            out.append(f'<circle cx="{x(t):.1f}" cy="{y(lat):.1f}" r="1.2" fill="#1b7837"/>')
        else:
            out.append(f'<text x="{x(t):.1f}" y="{y(lat):.1f}" fill="#d73027" font-size="9">x</text>')
    for exp in range(-3, math.ceil(math.log10(y_max)) + 1):
        lat = 10.0**exp
        if lat <= y_max * 1.01:
            label = f"{lat * 1000:g} ms" if lat < 1 else f"{lat:g} s"
            out.append(f'<text x="4" y="{y(lat) + 4:.1f}">{label}</text>')
            out.append(f'<line x1="{LEFT}" x2="{WIDTH - 10}" y1="{y(lat):.1f}" y2="{y(lat):.1f}" stroke="#eeeeee"/>')
    step = max(1, round(t_end / 12))
    for t in range(0, int(t_end) + 1, step):
        out.append(f'<text x="{x(t):.1f}" y="{HEIGHT - BOTTOM + 15}">{t}s</text>')
    legend = "  ".join(f"{k}" for k in COLOURS)
    out.append(f'<text x="{LEFT}" y="{HEIGHT - 8}">send latency (green: acked, red x: failed); bands: {legend}</text>')
    for i, (kind, colour) in enumerate(COLOURS.items()):
        out.append(
            f'<rect x="{WIDTH - 420 + i * 68}" y="4" width="10" height="10" fill="{colour}" fill-opacity="0.4"/>'
        )
        out.append(f'<text x="{WIDTH - 406 + i * 68}" y="13">{kind}</text>')
    out.append("</svg>\n")
    return "\n".join(out)
