"""The report's tables as (header, rows) of plain strings, for every renderer.

The HTML and Markdown renderers (and the terminal summary) format these the
same way, so each table is defined once here.
"""

from __future__ import annotations

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
    return (
        ["class", "commands", "active hours", "rate/hour", "median user rate"],
        [
            [
                c,
                num(v["commands"]),
                num(v["active_hours"]),
                num(v["rate_per_hour"]),
                num(v["median_user_rate"]),
            ]
            for c, v in report["command_rate"]["by_class"].items()
        ],
    )


def off_hours(report: dict[str, Any]) -> Table:
    return (
        ["class", "submissions", "night", "weekend", "off-hours"],
        [
            [
                c,
                num(v["submissions"]),
                pct(v["night_pct"]),
                pct(v["weekend_pct"]),
                pct(v["off_hours_pct"]),
            ]
            for c, v in report["off_hours"].items()
            if isinstance(v, dict)
        ],
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
    t = report.get("telemetry", {})
    return (
        ["principal class", "commands", "principals", "active hours", "rate/hour"],
        [
            [
                c,
                num(v["commands"]),
                num(v["principals"]),
                num(v["active_hours"]),
                num(v["rate_per_hour"]),
            ]
            for c, v in t.items()
            if isinstance(v, dict)
        ],
    )


def inputs(report: dict[str, Any]) -> Table:
    """One row per input file: what was read, skipped, repaired, unreadable."""
    return (
        ["source", "kind", "records", "steps skipped", "repaired", "unreadable"],
        [
            [
                s["source"],
                s["kind"],
                num(s["records"]),
                num(s["skipped_steps"]),
                num(s["repaired"]),
                num(s["unreadable"]),
            ]
            for s in report["inputs"]
        ],
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
