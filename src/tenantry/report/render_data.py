"""The report as JSON (everything) or CSV (long form: section, metric, class, value)."""

from __future__ import annotations

import csv
import io
import json
from typing import Any


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, sort_keys=True, default=str) + "\n"


def rows(report: dict[str, Any]) -> list[tuple[str, str, str, Any]]:
    """Flat (section, metric, class, value) rows of the scalar metrics."""
    out: list[tuple[str, str, str, Any]] = []
    for key, h in report["headline"].items():
        for cls, v in h["by_class"].items():
            out.append(("headline", f"{key}_total", cls, v))
        for cls, v in h["share_pct"].items():
            out.append(("headline", f"{key}_share_pct", cls, v))
        out.append(("headline", f"{key}_agent_low_pct", "agent", h["agent_bounds_pct"][0]))
        out.append(("headline", f"{key}_agent_high_pct", "agent", h["agent_bounds_pct"][1]))
    cr = report["command_rate"]
    for cls, v in cr["by_class"].items():
        for k, x in v.items():
            out.append(("command_rate", k, cls, x))
    out.append(("command_rate", "ratio_pooled", "agent/human", cr["ratio_pooled"]))
    out.append(("command_rate", "ratio_of_medians", "agent/human", cr["ratio_of_medians"]))
    for section in ("off_hours", "trial_error", "waste", "burstiness", "concentration"):
        for cls, v in report[section].items():
            if isinstance(v, dict):
                for k, x in v.items():
                    out.append((section, k, cls, x))
    for cls, m in report["hour_of_week"].items():
        for d, row in enumerate(m):
            for h, n in enumerate(row):
                if n:
                    out.append(("hour_of_week", f"d{d}h{h:02d}", cls, n))
    return out


def to_csv(report: dict[str, Any]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["section", "metric", "class", "value"])
    for r in rows(report):
        w.writerow(["" if x is None else x for x in r])
    return buf.getvalue()
