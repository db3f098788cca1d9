"""The report as Markdown (tables only; figures live in the HTML)."""

from __future__ import annotations

from typing import Any

METRICS = (
    ("users", "Users"),
    ("submissions", "Job submissions"),
    ("core_hours", "CPU core-hours"),
    ("gpu_hours", "GPU-hours"),
)


def _pct(v: Any) -> str:
    return "-" if v is None else f"{float(v):.1f} %"


def _num(v: Any) -> str:
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
                _pct(h["share_pct"]["agent"]),
                _pct(h["share_pct"]["unknown"]),
                _pct(h["share_pct"]["human"]),
                f"{_pct(lo)} - {_pct(hi)}",
                _num(h["total"]),
            ]
        )
    return rows


def input_rows(report: dict[str, Any]) -> list[list[str]]:
    """One row per input file: what was read, skipped, repaired, unreadable."""
    return [
        [
            s["source"],
            s["kind"],
            _num(s["records"]),
            _num(s["skipped_steps"]),
            _num(s["repaired"]),
            _num(s["unreadable"]),
        ]
        for s in report["inputs"]
    ]


def telemetry_rows(report: dict[str, Any]) -> list[list[str]]:
    t = report.get("telemetry", {})
    return [
        [
            c,
            _num(v["commands"]),
            _num(v["principals"]),
            _num(v["active_hours"]),
            _num(v["rate_per_hour"]),
        ]
        for c, v in t.items()
        if isinstance(v, dict)
    ]


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
        _table(
            ["metric", "agent", "unknown", "human", "agent bounds", "total"],
            headline_rows(report),
        ),
        "",
        "Bounds: the agent share if every unknown user were human (low) or agent (high).",
        "",
        "## Command rate",
        "",
        f"Agent/human ratio: **{_num(cr['ratio_pooled'])}x** pooled, "
        f"{_num(cr['ratio_of_medians'])}x ratio of medians.",
        "",
        f"Definition: {cr['definition']}",
        "",
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
        "",
        "## Nights and weekends",
        "",
        report["off_hours"]["definition"],
        "",
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
        "",
        "## Trial-and-error loops and waste",
        "",
        report["trial_error"]["definition"],
        "",
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
        "",
        "## Burstiness and concentration",
        "",
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
        _table(
            ["principal class", "commands", "principals", "active hours", "rate/hour"],
            telemetry_rows(report),
        ),
        "",
        "## Inputs",
        "",
        _table(
            ["source", "kind", "records", "steps skipped", "repaired", "unreadable"],
            input_rows(report),
        ),
    ]
    bad = [u for s in report["inputs"] for u in s["unreadable_examples"]]
    if bad:
        parts += ["", "Unreadable lines (first ones):", ""]
        parts += [
            f"- {u['source']}:{u['line']}: {u['reason']}: `{u['text'][:80]}`" for u in bad[:20]
        ]
    return "\n".join(parts) + "\n"
