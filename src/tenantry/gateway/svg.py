"""Inline SVG charts rendered on the server (no JavaScript, no CDN).

``bars`` draws stacked bars over time buckets with axes, a legend and a
``<title>`` per bar segment (the browser shows it on hover); ``hbars`` draws
one horizontal bar per label. All text is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

PALETTE = ("#2563eb", "#16a34a", "#dc2626", "#d97706", "#7c3aed", "#0891b2", "#64748b")
GREEN, RED, BLUE, AMBER, GRAY, PURPLE = (
    "#16a34a",
    "#dc2626",
    "#2563eb",
    "#d97706",
    "#64748b",
    "#7c3aed",
)
# series names with a meaning get the colour a reader expects
MEANING = {
    "completed": GREEN,
    "hit": GREEN,
    "answered from cache": GREEN,
    "ready": GREEN,
    "failed": RED,
    "error": RED,
    "lost": RED,
    "miss": RED,
    "policy": RED,
    "node_fail": RED,
    "out_of_memory": RED,
    "running": BLUE,
    "requested": BLUE,
    "batch jobs": BLUE,
    "pending": AMBER,
    "timeout": AMBER,
    "passed to the scheduler": AMBER,
    "hook": PURPLE,
    "cancelled": GRAY,
    "released": GRAY,
    "commands": PURPLE,
}


def color(name: str, j: int) -> str:
    return MEANING.get(name.lower(), PALETTE[j % len(PALETTE)])


def nice_max(value: float) -> float:
    """A round axis maximum at or above ``value``."""
    if value <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * exp:
            return float(step * exp)
    return float(10 * exp)


def _fmt(v: float) -> str:
    if 0 < abs(v) < 0.01:
        return "<0.01"
    if v == int(v) or abs(v) >= 10:
        return f"{v:.0f}"
    return f"{v:.2g}"


def _tick(v: float) -> str:
    return f"{v:.0e}" if 0 < abs(v) < 0.01 else _fmt(v)


def _axis(top_value: float, integer: bool) -> float:
    """An axis maximum whose quarter is a round step (whole for counts)."""
    step = nice_max(top_value / 4) if top_value > 0 else 0.25
    if integer:
        step = max(1.0, math.ceil(step))
    return 4 * step


def bars(
    labels: Sequence[str],
    series: Sequence[tuple[str, Sequence[float]]],
    *,
    title: str,
    width: int = 760,
    height: int = 220,
    unit: str = "",
) -> str:
    """Stacked bars: one per label (time bucket), one colour per series."""
    left, right, top, bottom = 44, 12, 12, 46
    plot_w, plot_h = width - left - right, height - top - bottom
    n = max(len(labels), 1)
    totals = [sum(s[1][i] for s in series if i < len(s[1])) for i in range(n)]
    integer = all(float(v).is_integer() for _, values in series for v in values)
    ymax = _axis(max(totals, default=0.0), integer)
    slot = plot_w / n
    bar_w = max(slot * 0.72, 1.0)
    out = [
        f'<svg class="chart" viewBox="0 0 {width} {height + 22}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for k in range(5):
        y = top + plot_h - plot_h * k / 4
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" class="grid"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" class="ytick">{_tick(ymax * k / 4)}</text>'
        )
    for i in range(n):
        x = left + i * slot + (slot - bar_w) / 2
        base = float(top + plot_h)
        for j, (name, values) in enumerate(series):
            v = values[i] if i < len(values) else 0.0
            if v <= 0:
                continue
            h = plot_h * v / ymax
            base -= h
            tip = f"{labels[i] if i < len(labels) else ''}: {name} {_fmt(v)}{unit}"
            out.append(
                f'<rect x="{x:.1f}" y="{base:.1f}" width="{bar_w:.1f}" height="{h:.1f}" '
                f'fill="{color(name, j)}"><title>{escape(tip)}</title></rect>'
            )
    every = max(1, math.ceil(n / 8))
    for i in range(0, n, every):
        x = left + i * slot + slot / 2
        text = escape(labels[i]) if i < len(labels) else ""
        out.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" class="xtick">{text}</text>')
    lx = float(left)
    for j, (name, values) in enumerate(series):
        total = sum(values)
        label = escape(f"{name} ({_fmt(total)})")
        out.append(
            f'<rect x="{lx}" y="{height + 4}" width="10" height="10" fill="{color(name, j)}"/>'
            f'<text x="{lx + 14}" y="{height + 13}" class="legend">{label}</text>'
        )
        lx += 24 + 7 * len(f"{name} ({_fmt(total)})")
    out.append("</svg>")
    return "".join(out)


def hbars(items: Sequence[tuple[str, float]], *, title: str, width: int = 520) -> str:
    """One horizontal bar per (label, value)."""
    row = 26
    left = 150
    height = max(row * len(items), row) + 8
    vmax = nice_max(max((v for _, v in items), default=0.0))
    out = [
        f'<svg class="chart h" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">',
        f"<title>{escape(title)}</title>",
    ]
    for i, (label, value) in enumerate(items):
        y = 4 + i * row
        w = (width - left - 60) * value / vmax
        out.append(
            f'<text x="{left - 8}" y="{y + 16}" class="hlabel">{escape(label)}</text>'
            f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{row - 8}" '
            f'fill="{PALETTE[i % len(PALETTE)]}">'
            f"<title>{escape(label)}: {_fmt(value)}</title></rect>"
            f'<text x="{left + w + 6:.1f}" y="{y + 16}" class="hvalue">{_fmt(value)}</text>'
        )
    if not items:
        out.append(f'<text x="{left}" y="20" class="hvalue">no data</text>')
    out.append("</svg>")
    return "".join(out)
