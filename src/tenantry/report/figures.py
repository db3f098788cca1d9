"""Figures as inline SVG strings (no plotting library, no network, no scripts).

Each function takes plain report data and returns one ``<svg>`` element; the
HTML renderer embeds them as they are.
"""

from __future__ import annotations

from html import escape
from typing import Any

COLORS = {"agent": "#d95f02", "human": "#1b9e77", "unknown": "#9e9e9e"}
DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
FONT = 'font-family="sans-serif" font-size="11"'


def _svg(width: int, height: int, body: list[str], title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>" + "".join(body) + "</svg>"
    )


def share_bars(headline: dict[str, Any]) -> str:
    """Stacked 100 % bars: agent | unknown | human, one per headline metric."""
    labels = {
        "users": "users",
        "submissions": "submissions",
        "core_hours": "CPU core-hours",
        "gpu_hours": "GPU-hours",
    }
    w, left, bar_w, row_h = 640, 120, 480, 30
    body: list[str] = []
    y = 10
    for key, label in labels.items():
        pct = headline[key]["share_pct"]
        body.append(f'<text x="{left - 8}" y="{y + 18}" text-anchor="end" {FONT}>{label}</text>')
        x = float(left)
        for cls in ("agent", "unknown", "human"):
            v = float(pct.get(cls) or 0)
            width = bar_w * v / 100
            if width > 0:
                body.append(
                    f'<rect x="{x:.1f}" y="{y}" width="{width:.1f}" height="24" '
                    f'fill="{COLORS[cls]}"><title>{cls}: {v:.1f} %</title></rect>'
                )
                if width > 34:
                    body.append(
                        f'<text x="{x + 4:.1f}" y="{y + 16}" fill="white" {FONT}>{v:.1f}%</text>'
                    )
            x += width
        y += row_h
    y += 6
    x = float(left)
    for cls in ("agent", "unknown", "human"):
        body.append(f'<rect x="{x}" y="{y}" width="12" height="12" fill="{COLORS[cls]}"/>')
        body.append(f'<text x="{x + 16}" y="{y + 10}" {FONT}>{cls}</text>')
        x += 90
    return _svg(w, y + 20, body, "Shares by class")


def heatmap(matrix: list[list[int]], title: str, color: str) -> str:
    """A 7x24 hour-of-week heatmap (Monday first, UTC hours)."""
    cell, left, top = 16, 36, 24
    peak = max((v for row in matrix for v in row), default=0) or 1
    body = [f'<text x="{left}" y="14" {FONT} font-weight="bold">{escape(title)}</text>']
    for h in range(0, 24, 3):
        body.append(f'<text x="{left + h * cell}" y="{top + 7 * cell + 12}" {FONT}>{h:02d}</text>')
    for d, row in enumerate(matrix):
        y = top + d * cell
        body.append(f'<text x="{left - 4}" y="{y + 12}" text-anchor="end" {FONT}>{DAYS[d]}</text>')
        for h, v in enumerate(row):
            opacity = 0.05 + 0.95 * (v / peak) if v else 0.0
            body.append(
                f'<rect x="{left + h * cell}" y="{y}" width="{cell - 1}" height="{cell - 1}" '
                f'fill="{color}" fill-opacity="{opacity:.3f}" stroke="#eee">'
                f"<title>{DAYS[d]} {h:02d}:00 UTC: {v}</title></rect>"
            )
    return _svg(left + 24 * cell + 8, top + 7 * cell + 18, body, title)


def grouped_bars(dist: dict[str, Any], title: str) -> str:
    """Share of each class's jobs per bucket (bars grouped by bucket)."""
    classes = [c for c in ("agent", "human", "unknown") if sum(dist[c]["buckets"].values())]
    names = list(dist["agent"]["buckets"].keys())
    w, h, left, bottom = 640, 220, 40, 180
    group_w = (w - left - 10) / max(1, len(names))
    bar_w = group_w * 0.8 / max(1, len(classes))
    body = [f'<text x="{left}" y="14" {FONT} font-weight="bold">{escape(title)}</text>']
    for i, name in enumerate(names):
        gx = left + i * group_w
        cx = gx + group_w / 2
        body.append(
            f'<text x="{cx:.1f}" y="{bottom + 14}" text-anchor="middle" {FONT}>'
            f"{escape(name)}</text>"
        )
        for j, cls in enumerate(classes):
            total = sum(dist[cls]["buckets"].values()) or 1
            share = dist[cls]["buckets"][name] / total
            bh = (bottom - 30) * share
            x = gx + group_w * 0.1 + j * bar_w
            body.append(
                f'<rect x="{x:.1f}" y="{bottom - bh:.1f}" width="{bar_w - 1:.1f}" '
                f'height="{bh:.1f}" fill="{COLORS[cls]}">'
                f"<title>{cls} {escape(name)}: {100 * share:.1f} %</title></rect>"
            )
    body.append(f'<line x1="{left}" y1="{bottom}" x2="{w - 10}" y2="{bottom}" stroke="#333"/>')
    lx = float(w - 10 - 90 * len(classes))
    for cls in classes:
        body.append(f'<rect x="{lx}" y="4" width="12" height="12" fill="{COLORS[cls]}"/>')
        body.append(f'<text x="{lx + 16}" y="14" {FONT}>{cls}</text>')
        lx += 90
    return _svg(w, h, body, title)
