"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, no network."""

from __future__ import annotations

from html import escape
from typing import Any

from tenantry.report import figures, tables
from tenantry.report.tables import num as _num

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
            report["hour_of_week"][c],
            f"{tables.LABELS[c]} submissions by hour of week ({report['time_zone']['zone']})",
            figures.COLORS[c],
        )
        for c in ("agent", "human", "unknown")
        if any(any(row) for row in report["hour_of_week"][c])
    )
    sections = [
        "<h1>Tenantry characterization report</h1>",
        f'<p class="note">Window (UTC): {escape(str(w["since"]))} to {escape(str(w["until"]))}. '
        f"Hours of day and week in {escape(report['time_zone']['zone'])} "
        f"({escape(report['time_zone']['source'])}). "
        f"Generated {escape(report['generated_at'])}.</p>",
        "<h2>Agent share of the facility</h2>",
        f"<p><b>{escape(report['attribution']['headline'])}</b></p>",
        _table(*tables.headline(report)),
        figures.share_bars(report["headline"]),
        '<p class="note">Agent = users with evidence (Tenantry tag, job_submit.lua '
        "AdminComment tag, agent marker in --env-vars/SubmitLine/Comment). Bounds: low = "
        "evidence only; high = also every agent-like user without evidence. "
        "Core-hours = AllocCPUS x ElapsedRaw; GPU-hours from AllocTRES gres/gpu.</p>",
        "<h2>Command rate</h2>",
        f"<p>Agent/human ratio: <b>{escape(_num(cr['ratio_pooled']))}x</b> pooled, "
        f"{escape(_num(cr['ratio_of_medians']))}x ratio of medians.</p>",
        f'<p class="note">{escape(cr["definition"])}</p>',
        _table(*tables.command_rate(report)),
        "<h2>Agents' and humans' own commands</h2>",
        f'<p class="note">{escape(report["behaviour"]["definition"])} Hours in '
        f"{escape(report['behaviour']['time_zone'])}.</p>",
        _table(*tables.behaviour(report))
        + (
            f"<p>Agent/human commands per active hour: <b>{report['behaviour']['ratio']}x</b></p>"
            if "ratio" in report["behaviour"]
            else ""
        ),
        "<h2>When: hour of week</h2>",
        f'<div class="grid">{heat}</div>',
        _table(*tables.off_hours(report)),
        f'<p class="note">{escape(report["off_hours"]["definition"])}</p>',
        "<h2>Job sizes and durations</h2>",
        figures.grouped_bars(report["job_sizes"], "Allocated CPUs per job (share of class's jobs)"),
        figures.grouped_bars(report["durations"], "Run time per job (share of class's jobs)"),
        "<h2>Trial-and-error loops and waste</h2>",
        f'<p class="note">{escape(report["trial_error"]["definition"])}; waste = usage of jobs '
        f"ending {escape(', '.join(report['waste']['states']))}.</p>",
        _table(*tables.waste(report)),
        "<h2>Burstiness and concentration</h2>",
        _table(*tables.burstiness(report)),
        "<h2>Top users</h2>",
        _table(*tables.top_users(report)),
        "<h2>Tenantry telemetry, by principal</h2>",
        f'<p class="note">{escape(report["telemetry"]["definition"])}</p>',
        _table(*tables.telemetry(report)),
        "<h2>Inputs</h2>",
        _table(*tables.inputs(report)),
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
