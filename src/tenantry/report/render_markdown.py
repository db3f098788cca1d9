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


def _section(title: str, table: tables.Table, *before: str, after: str = "") -> list[str]:
    """One section: its heading, the paragraphs before its table, the table, a note."""
    out = [f"## {title}", ""]
    for text in before:
        out += [text, ""]
    out += [_table(*table), ""]
    return [*out, after, ""] if after else out


def render(report: dict[str, Any]) -> str:
    w = report["window"]
    cr = report["command_rate"]
    sessions = report["sessions"]
    classes = (
        ["class", "basis", "users"],
        [
            [r["class"], r["basis"], str(r["users"])]
            for r in report["classification"]["users_by_class_and_basis"]
        ],
    )
    evidence = (
        ["user class", "submissions", "with agent tag/marker", "with human tag"],
        [
            [c, _num(v["submissions"]), _pct(v["direct_agent_pct"]), _num(v["direct_human"])]
            for c, v in report["job_evidence"].items()
            if isinstance(v, dict)
        ],
    )
    parts = [
        "# Tenantry characterization report",
        "",
        f"Window (UTC): {w['since']} to {w['until']}. Generated {report['generated_at']}.",
        "",
        *_section(
            "Agent share of the facility",
            tables.headline(report),
            f"**{report['attribution']['headline']}**",
            after="Bounds: low = evidence only;"
            " high = also every agent-like user without evidence.",
        ),
        *_section(
            "Command rate",
            tables.command_rate(report),
            f"Agent/human ratio: **{_num(cr['ratio_pooled'])}x** pooled, "
            f"{_num(cr['ratio_of_medians'])}x ratio of medians.",
            f"Definition: {cr['definition']}",
        ),
        *_section(
            "Nights and weekends", tables.off_hours(report), report["off_hours"]["definition"]
        ),
        *_section(
            "Trial-and-error loops and waste",
            tables.waste(report),
            report["trial_error"]["definition"],
        ),
        *_section("Burstiness and concentration", tables.burstiness(report)),
        *_section("Classification", classes),
        *_section(
            "Sessions and job-level evidence",
            evidence,
            f"Sessions seen: {sessions['sessions']} ({sessions['agent_sessions']} agent sessions: "
            + ", ".join(f"{k} {v}" for k, v in sessions["by_agent"].items())
            + ").",
        ),
        *_section(
            "Tenantry telemetry, by principal",
            tables.telemetry(report),
            report["telemetry"]["definition"],
        ),
        *_section("Inputs", tables.inputs(report))[:-1],
    ]
    bad = [u for s in report["inputs"] for u in s["unreadable_examples"]]
    if bad:
        parts += ["", "Unreadable lines (first ones):", ""]
        parts += [
            f"- {u['source']}:{u['line']}: {u['reason']}: `{u['text'][:80]}`" for u in bad[:20]
        ]
    return "\n".join(parts) + "\n"
