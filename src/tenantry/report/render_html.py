"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, no network."""

from __future__ import annotations

from html import escape
from typing import Any

from tenantry.report import figures
from tenantry.report.render_markdown import (
    _num,
    _pct,
    headline_rows,
    input_rows,
    telemetry_rows,
)

CSS = """
body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}
.note{color:#555;font-size:.9em}
.grid{display:flex;flex-wrap:wrap;gap:1em}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}
"""


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render(report: dict[str, Any]) -> str:
    w = report["window"]
    cr = report["command_rate"]
    heat = "".join(
        figures.heatmap(
            report["hour_of_week"][c], f"{c} submissions by hour of week (UTC)", figures.COLORS[c]
        )
        for c in ("agent", "human", "unknown")
        if any(any(row) for row in report["hour_of_week"][c])
    )
    sections = [
        "<h1>Tenantry characterization report</h1>",
        f'<p class="note">Window (UTC): {escape(str(w["since"]))} to {escape(str(w["until"]))}. '
        f"Generated {escape(report['generated_at'])}.</p>",
        "<h2>Agent share of the facility</h2>",
        _table(
            ["metric", "agent", "unknown", "human", "agent bounds", "total"], headline_rows(report)
        ),
        figures.share_bars(report["headline"]),
        '<p class="note">Bounds: the agent share if every unknown user were human (low) or agent '
        "(high). Core-hours = AllocCPUS x ElapsedRaw; GPU-hours from AllocTRES gres/gpu.</p>",
        "<h2>Command rate</h2>",
        f"<p>Agent/human ratio: <b>{escape(_num(cr['ratio_pooled']))}x</b> pooled, "
        f"{escape(_num(cr['ratio_of_medians']))}x ratio of medians.</p>",
        f'<p class="note">{escape(cr["definition"])}</p>',
        _table(
            ["class", "commands", "active hours", "rate/hour", "median user rate"],
            [
                [
                    c,
                    _num(v["commands"]),
                    _num(v["active_hours"]),
                    _num(v["rate_per_hour"]),
                    _num(v["median_user_rate"]),
                ]
                for c, v in cr["by_class"].items()
            ],
        ),
        "<h2>When: hour of week</h2>",
        f'<div class="grid">{heat}</div>',
        _table(
            ["class", "submissions", "night", "weekend", "off-hours"],
            [
                [
                    c,
                    _num(v["submissions"]),
                    _pct(v["night_pct"]),
                    _pct(v["weekend_pct"]),
                    _pct(v["off_hours_pct"]),
                ]
                for c, v in report["off_hours"].items()
                if isinstance(v, dict)
            ],
        ),
        f'<p class="note">{escape(report["off_hours"]["definition"])}</p>',
        "<h2>Job sizes and durations</h2>",
        figures.grouped_bars(report["job_sizes"], "Allocated CPUs per job (share of class's jobs)"),
        figures.grouped_bars(report["durations"], "Run time per job (share of class's jobs)"),
        "<h2>Trial-and-error loops and waste</h2>",
        f'<p class="note">{escape(report["trial_error"]["definition"])}; waste = usage of jobs '
        f"ending {escape(', '.join(report['waste']['states']))}.</p>",
        _table(
            ["class", "loops", "submissions in loops", "share", "wasted core-h", "wasted GPU-h"],
            [
                [
                    c,
                    _num(report["trial_error"][c]["loops"]),
                    _num(report["trial_error"][c]["submissions_in_loops"]),
                    _pct(report["trial_error"][c]["share_pct"]),
                    _num(report["waste"].get(c, {}).get("wasted_core_hours")),
                    _num(report["waste"].get(c, {}).get("wasted_gpu_hours")),
                ]
                for c in ("agent", "human", "unknown")
            ],
        ),
        "<h2>Burstiness and concentration</h2>",
        _table(
            ["class", "median burstiness", "Gini (core-h)", "top 10 % users' core-h"],
            [
                [
                    c,
                    _num(report["burstiness"][c]["median_burstiness"]),
                    _num(report["concentration"][c]["gini"]),
                    _pct(report["concentration"][c]["top10_pct"]),
                ]
                for c in ("agent", "human", "unknown")
            ],
        ),
        "<h2>Top users</h2>",
        _table(
            ["user", "class", "evidence", "submissions", "rate/h", "core-h", "GPU-h"],
            [
                [
                    str(u["user"]),
                    str(u["class"]),
                    str(u["evidence"]),
                    _num(u["n_sub"]),
                    _num(u["rate"]),
                    _num(u["core_h"]),
                    _num(u["gpu_h"]),
                ]
                for u in report["top_users"]
            ],
        ),
        "<h2>Tenantry telemetry, by principal</h2>",
        f'<p class="note">{escape(report["telemetry"]["definition"])}</p>',
        _table(
            ["principal class", "commands", "principals", "active hours", "rate/hour"],
            telemetry_rows(report),
        ),
        "<h2>Inputs</h2>",
        _table(
            ["source", "kind", "records", "steps skipped", "repaired", "unreadable"],
            input_rows(report),
        ),
    ]
    bad = [u for s in report["inputs"] for u in s["unreadable_examples"]]
    if bad:
        items = "".join(
            f"<li>{escape(u['source'])}:{u['line']}: {escape(u['reason'])}: "
            f"<code>{escape(u['text'][:120])}</code></li>"
            for u in bad[:50]
        )
        sections.append(f"<p>Unreadable lines (first ones):</p><ul>{items}</ul>")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>Tenantry characterization report</title>"
        f"<style>{CSS}</style></head><body>" + "\n".join(sections) + "</body></html>\n"
    )
