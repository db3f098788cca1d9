"""The report as Markdown (tables only; figures live in the HTML)."""

from __future__ import annotations

from typing import Any

from tenantry.report import tables
from tenantry.report.tables import num as _num
from tenantry.report.tables import pct as _pct


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def render(report: dict[str, Any]) -> str:
    w = report["window"]
    cr = report["command_rate"]
    parts = [
        "# Tenantry characterization report",
        "",
        f"Window (UTC): {w['since']} to {w['until']}. Generated {report['generated_at']}.",
        "",
        "## Agent share of the facility",
        "",
        f"**{report['attribution']['headline']}**",
        "",
        _table(*tables.headline(report)),
        "",
        "Bounds: low = evidence only; high = also every agent-like user without evidence.",
        "",
        "## Command rate",
        "",
        f"Agent/human ratio: **{_num(cr['ratio_pooled'])}x** pooled, "
        f"{_num(cr['ratio_of_medians'])}x ratio of medians.",
        "",
        f"Definition: {cr['definition']}",
        "",
        _table(*tables.command_rate(report)),
        "",
        "## Nights and weekends",
        "",
        report["off_hours"]["definition"],
        "",
        _table(*tables.off_hours(report)),
        "",
        "## Trial-and-error loops and waste",
        "",
        report["trial_error"]["definition"],
        "",
        _table(*tables.waste(report)),
        "",
        "## Burstiness and concentration",
        "",
        _table(*tables.burstiness(report)),
        "",
        "## Classification",
        "",
        _table(
            ["class", "basis", "users"],
            [
                [r["class"], r["basis"], str(r["users"])]
                for r in report["classification"]["users_by_class_and_basis"]
            ],
        ),
        "",
        "## Sessions and job-level evidence",
        "",
        f"Sessions seen: {report['sessions']['sessions']} "
        f"({report['sessions']['agent_sessions']} agent sessions: "
        + ", ".join(f"{k} {v}" for k, v in report["sessions"]["by_agent"].items())
        + ").",
        "",
        _table(
            ["user class", "submissions", "with agent tag/marker", "with human tag"],
            [
                [c, _num(v["submissions"]), _pct(v["direct_agent_pct"]), _num(v["direct_human"])]
                for c, v in report["job_evidence"].items()
                if isinstance(v, dict)
            ],
        ),
        "",
        "## Tenantry telemetry, by principal",
        "",
        report["telemetry"]["definition"],
        "",
        _table(*tables.telemetry(report)),
        "",
        "## Inputs",
        "",
        _table(*tables.inputs(report)),
    ]
    bad = [u for s in report["inputs"] for u in s["unreadable_examples"]]
    if bad:
        parts += ["", "Unreadable lines (first ones):", ""]
        parts += [
            f"- {u['source']}:{u['line']}: {u['reason']}: `{u['text'][:80]}`" for u in bad[:20]
        ]
    return "\n".join(parts) + "\n"
