"""The report's tables as (header, rows) of plain strings, for every renderer.

The HTML and Markdown renderers (and the terminal summary) format these the
same way, so each table is defined once here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

Table = tuple[list[str], list[list[str]]]

CLASSES = ("agent", "human", "unknown")
LABELS = {"agent": "agent", "human": "human", "unknown": "agent-like (no evidence)"}

METRICS = (
    ("users", "Users"),
    ("submissions", "Job submissions"),
    ("core_hours", "CPU core-hours"),
    ("gpu_hours", "GPU-hours"),
)


def pct(v: Any) -> str:
    return "-" if v is None else f"{float(v):.1f} %"


def num(v: Any) -> str:
    if v is None:
        return "-"
    f = float(v)
    return f"{f:,.0f}" if abs(f) >= 100 else f"{f:,.2f}".rstrip("0").rstrip(".")


# a column: its header, the record's key, how the value is written
Column = tuple[str, str, Callable[[Any], str]]


def _cells(columns: Sequence[Column], record: Mapping[str, Any]) -> list[str]:
    return [fmt(record[key]) for _, key, fmt in columns]


def records(columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> Table:
    """One row per record, one cell per column."""
    return [h for h, _, _ in columns], [_cells(columns, r) for r in rows]


def by_class(first: str, columns: Sequence[Column], items: Iterable[tuple[str, Any]]) -> Table:
    """One row per (class, record) pair that holds a record, the class first."""
    header = [first, *(h for h, _, _ in columns)]
    return header, [[c, *_cells(columns, v)] for c, v in items if isinstance(v, dict)]


def headline_rows(report: dict[str, Any]) -> list[list[str]]:
    """[metric, agent %, unknown %, human %, agent bounds, total] rows."""
    rows = []
    for key, label in METRICS:
        h = report["headline"][key]
        lo, hi = h["agent_bounds_pct"]
        rows.append(
            [
                label,
                pct(h["share_pct"]["agent"]),
                pct(h["share_pct"]["unknown"]),
                pct(h["share_pct"]["human"]),
                f"{pct(lo)} - {pct(hi)}",
                num(h["total"]),
            ]
        )
    return rows


def headline(report: dict[str, Any]) -> Table:
    header = ["metric", "agent", LABELS["unknown"], "human", "agent bounds", "total"]
    return header, headline_rows(report)


def command_rate(report: dict[str, Any]) -> Table:
    return by_class(
        "class",
        [
            ("commands", "commands", num),
            ("active hours", "active_hours", num),
            ("rate/hour", "rate_per_hour", num),
            ("median user rate", "median_user_rate", num),
        ],
        report["command_rate"]["by_class"].items(),
    )


def off_hours(report: dict[str, Any]) -> Table:
    return by_class(
        "class",
        [
            ("submissions", "submissions", num),
            ("night", "night_pct", pct),
            ("weekend", "weekend_pct", pct),
            ("off-hours", "off_hours_pct", pct),
        ],
        report["off_hours"].items(),
    )


def waste(report: dict[str, Any]) -> Table:
    te, w = report["trial_error"], report["waste"]
    return (
        ["class", "loops", "submissions in loops", "share", "wasted core-h", "wasted GPU-h"],
        [
            [
                c,
                num(te[c]["loops"]),
                num(te[c]["submissions_in_loops"]),
                pct(te[c]["share_pct"]),
                num(w.get(c, {}).get("wasted_core_hours")),
                num(w.get(c, {}).get("wasted_gpu_hours")),
            ]
            for c in CLASSES
        ],
    )


def burstiness(report: dict[str, Any]) -> Table:
    return (
        ["class", "median burstiness", "Gini (core-h)", "top 10 % users' core-h"],
        [
            [
                c,
                num(report["burstiness"][c]["median_burstiness"]),
                num(report["concentration"][c]["gini"]),
                pct(report["concentration"][c]["top10_pct"]),
            ]
            for c in CLASSES
        ],
    )


def telemetry(report: dict[str, Any]) -> Table:
    return by_class(
        "principal class",
        [
            ("commands", "commands", num),
            ("principals", "principals", num),
            ("active hours", "active_hours", num),
            ("rate/hour", "rate_per_hour", num),
        ],
        report.get("telemetry", {}).items(),
    )


def inputs(report: dict[str, Any]) -> Table:
    """One row per input file: what was read, skipped, repaired, unreadable."""
    return records(
        [
            ("source", "source", str),
            ("kind", "kind", str),
            ("records", "records", num),
            ("steps skipped", "skipped_steps", num),
            ("repaired", "repaired", num),
            ("unreadable", "unreadable", num),
        ],
        report["inputs"],
    )


def top_users(report: dict[str, Any]) -> Table:
    return records(
        [
            ("user", "user", str),
            ("class", "class", str),
            ("evidence", "evidence", str),
            ("submissions", "n_sub", num),
            ("rate/h", "rate", num),
            ("core-h", "core_h", num),
            ("GPU-h", "gpu_h", num),
        ],
        report["top_users"],
    )


def behaviour(report: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The behavioural table: agents' and humans' own commands."""
    b = report.get("behaviour", {})
    header = ["actor", "commands", "active hours", "per hour", "explore", "modify", "execute"]
    header += ["night", "weekend"]
    rows = []
    for c in ("agent", "human"):
        r = b.get(c)
        if not r:
            continue
        shape = r["loop_shape_pct"]
        rows.append(
            [
                c,
                f"{r['commands']:,}",
                f"{r['active_hours']:,}",
                num(r["rate_per_hour"]),
                pct(shape["explore"]),
                pct(shape["modify"]),
                pct(shape["execute"]),
                pct(r["night_pct"]),
                pct(r["weekend_pct"]),
            ]
        )
    return header, rows
