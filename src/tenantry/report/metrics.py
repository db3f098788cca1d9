"""The paper's measurements over a classified dataset, as one JSON-able dict.

Formulas (as Open XDMoD and Slurm define them):

- core-hours = AllocCPUS x ElapsedRaw / 3600 per allocation record, clipped to
  the window (:mod:`tenantry.report.window`); GPU-hours likewise with the GPUs
  of ``AllocTRES``.
- submissions = distinct sbatch-level ids submitted in the window (an array or
  het job is one; jobs that never started count; requeues do not add).
- users = users with a counted submission, usage or a telemetry command in the window.
- command rate of a user = commands / active hours, where commands are their
  submissions plus any Tenantry-run commands from telemetry, and an active hour
  is a UTC clock hour in which they issued at least one command. The pooled
  rate of a class is its commands over its active hours; the headline ratio is
  pooled agent rate / pooled human rate (the ratio of the classes' median user
  rates is reported next to it).
- every share is agent / all users' total, with the unknown class shown and
  bounds [agent, agent + unknown] from assigning all unknown to either side.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import polars as pl

from tenantry.report import behaviour
from tenantry.report import classify as cl
from tenantry.report import window as win
from tenantry.report.schema import WASTE_STATES, Dataset

CLASSES = ("agent", "human", "unknown")
# "unknown" is the agent-like class: behaviour without evidence (an upper bound only)
CLASS_LABELS = {
    "agent": "agent (evidence)",
    "human": "human",
    "unknown": "agent-like (no evidence)",
}
SIZE_BUCKETS = [(1, 1), (2, 4), (5, 16), (17, 64), (65, 256), (257, 10**9)]
DURATION_BUCKETS = [
    ("<1m", 0, 60),
    ("1-10m", 60, 600),
    ("10-60m", 600, 3600),
    ("1-6h", 3600, 21600),
    ("6-24h", 21600, 86400),
    (">24h", 86400, 10**12),
]
LOOP_MIN, LOOP_GAP_S = 3, 1800
COMMAND_RATE_DEFINITION = (
    "commands per active hour: commands are job submissions (one per sbatch, array or het job) "
    "plus Tenantry-run commands; an active hour is a UTC clock hour with at least one command "
    "by that user. Pooled rate = a class's commands / its active hours; ratio = agent / human."
)


def _r(x: Any, nd: int = 4) -> float | None:
    """A rounded float, or None for missing/NaN/inf (polars medians may be any of these)."""
    if x is None or not isinstance(x, int | float):
        return None
    if math.isnan(x) or math.isinf(x):
        return None
    return round(float(x), nd)


def shares(totals: dict[str, float]) -> dict[str, Any]:
    total = sum(totals.values())
    a, u = totals.get("agent", 0.0), totals.get("unknown", 0.0)
    pct = {c: (100.0 * totals.get(c, 0.0) / total if total else 0.0) for c in CLASSES}
    return {
        "total": _r(total, 3),
        "by_class": {c: _r(totals.get(c, 0.0), 3) for c in CLASSES},
        "share_pct": {c: _r(v, 2) for c, v in pct.items()},
        "agent_bounds_pct": [_r(pct["agent"], 2), _r(100.0 * (a + u) / total if total else 0, 2)],
    }


def _by_class(df: pl.DataFrame, value: pl.Expr) -> dict[str, float]:
    out = df.group_by("class").agg(value.alias("v"))
    return {str(k): float(v or 0) for k, v in out.iter_rows()}


def gini(values: list[float]) -> float | None:
    xs = sorted(v for v in values if v >= 0)
    n, s = len(xs), sum(xs)
    if n == 0 or s == 0:
        return None
    cum = sum((i + 1) * x for i, x in enumerate(xs))
    return (2.0 * cum) / (n * s) - (n + 1.0) / n


def top_share(values: list[float], frac: float = 0.1) -> float | None:
    xs = sorted(values, reverse=True)
    s = sum(xs)
    if not xs or s == 0:
        return None
    k = max(1, math.ceil(frac * len(xs)))
    return 100.0 * sum(xs[:k]) / s


def hour_of_week(subs: pl.DataFrame, tz: str = "UTC") -> dict[str, list[list[int]]]:
    """Per class, a 7x24 matrix (Monday first, local hours of ``tz``) of submissions."""
    t = cl.local(pl.col("ts"), tz)
    counts = subs.group_by("class", (t.dt.weekday() - 1).alias("d"), t.dt.hour().alias("h")).len()
    out = {c: [[0] * 24 for _ in range(7)] for c in CLASSES}
    for c, d, h, n in counts.iter_rows():
        out[str(c)][int(d)][int(h)] = int(n)
    return out


def trial_error(subs: pl.DataFrame) -> pl.DataFrame:
    """Per class: loops (>= 3 consecutive failing submissions of one name, gaps <= 30 min)."""
    s = subs.sort("user", "ts", "seq", nulls_last=True).with_columns(
        gap=pl.col("ts").diff().dt.total_seconds().over("user"),
        prev_name=pl.col("name").shift().over("user"),
        prev_failed=pl.col("failed").shift().over("user"),
    )
    new_run = (
        pl.col("gap").is_null()
        | (pl.col("gap") > LOOP_GAP_S)
        | (pl.col("name") != pl.col("prev_name")).fill_null(True)
        | ~pl.col("failed")
        | ~pl.col("prev_failed").fill_null(False)
    )
    runs = (
        s.with_columns(run=new_run.cum_sum())
        .filter(pl.col("failed"))
        .group_by("run")
        .agg(pl.col("class").first(), n=pl.len())
        .filter(pl.col("n") >= LOOP_MIN)
    )
    return runs.group_by("class").agg(loops=pl.len(), jobs=pl.col("n").sum())


def _buckets(df: pl.DataFrame, col: str, edges: list[tuple[str, int, int]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in CLASSES:
        sub = df.filter(pl.col("class") == c)[col]
        out[c] = {
            "buckets": {name: int(((sub >= lo) & (sub < hi)).sum()) for name, lo, hi in edges},
            "p50": _r(sub.median()),
            "p90": _r(sub.quantile(0.9)),
        }
    return out


def facility_zone(data: Dataset, tz: str | None = None) -> tuple[str, str]:
    """(zone, where it came from): the setting, else the inputs' headers, else UTC."""
    if tz:
        return tz, "setting (--tz)"
    declared = sorted({s.tz for s in data.stats if s.tz})
    if len(declared) == 1:
        return declared[0], "trace header"
    if len(declared) > 1:
        return "UTC", f"UTC: the inputs declare different zones ({', '.join(declared)})"
    return "UTC", "default: no zone given (say --tz ZONE for local hours)"


def build(
    data: Dataset,
    since: datetime | None = None,
    until: datetime | None = None,
    tz: str | None = None,
) -> dict[str, Any]:
    """Every metric of the report; hours of day and week in the facility's zone."""
    zone, zone_source = facility_zone(data, tz)
    jobs, window = win.apply(data.jobs, since, until)
    jobs = cl.job_evidence(jobs)
    subs = cl.submissions(jobs)
    cmds = data.commands
    if since is not None:
        cmds = cmds.filter(pl.col("ts") >= since)
    if until is not None:
        cmds = cmds.filter(pl.col("ts") < until)
    cmd_table = cl.command_table(subs, cmds)
    feats = cl.user_features(subs, cmd_table, zone)
    # who is who comes from everything ingested; the window only selects what counts
    classes = (
        classify_all(data, zone) if since or until else cl.classify_users(feats, data.sessions)
    ).select("user", "class", "evidence", "basis", "score")
    usage_users = jobs.filter(pl.col("used_s") > 0).select("user")
    active = pl.concat([feats.select("user"), usage_users]).unique()
    users = (
        active.join(feats, on="user", how="left")
        .join(classes, on="user", how="left")
        .with_columns(
            pl.col("n_sub", "commands", "active_hours").fill_null(0),
            pl.col("class").fill_null("unknown"),
            pl.col("evidence").fill_null("no evidence"),
            pl.col("basis").fill_null("none"),
        )
    )
    ucls = users.select("user", "class")
    jobs = jobs.join(ucls, on="user", how="left").with_columns(pl.col("class").fill_null("unknown"))
    subs = subs.join(ucls, on="user", how="left").with_columns(pl.col("class").fill_null("unknown"))
    cmd_table = cmd_table.join(ucls, on="user", how="left").with_columns(
        pl.col("class").fill_null("unknown")
    )

    headline = {
        "users": shares(_by_class(users, pl.len())),
        "submissions": shares(_by_class(subs, pl.len())),
        "core_hours": shares(_by_class(jobs, pl.col("core_h").sum())),
        "gpu_hours": shares(_by_class(jobs, pl.col("gpu_h").sum())),
    }
    return {
        "generated_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
        "window": window.to_dict(),
        "time_zone": {"zone": zone, "source": zone_source},
        "class_labels": CLASS_LABELS,
        "inputs": [s.to_dict() for s in data.stats],
        "combined": dict(data.combined),
        "headline": headline,
        "classification": _classification(users),
        "command_rate": _command_rate(users),
        "hour_of_week": hour_of_week(subs, zone),
        "off_hours": _off_hours(subs, zone),
        "job_sizes": _buckets(
            jobs.filter(pl.col("start").is_not_null()),
            "cpus",
            [(f"{lo}-{hi}" if hi < 10**9 else f">{lo - 1}", lo, hi + 1) for lo, hi in SIZE_BUCKETS],
        ),
        "durations": _buckets(
            jobs.filter(pl.col("start").is_not_null()), "elapsed_s", DURATION_BUCKETS
        ),
        "burstiness": _burstiness(users),
        "trial_error": _trial_error(subs),
        "waste": _waste(jobs),
        "concentration": _concentration(users, jobs),
        "sessions": _sessions(jobs, data),
        "job_evidence": _job_evidence(subs),
        "attribution": _attribution(subs, users, zone, zone_source),
        "telemetry": _telemetry(cmds),
        "behaviour": behaviour.table(data.actions, cmds, zone),
        "top_users": _top_users(users, jobs),
    }


def _attribution(
    subs: pl.DataFrame, users: pl.DataFrame, zone: str, zone_source: str
) -> dict[str, Any]:
    """What each share rests on: submissions and users by kind of evidence."""
    by_sub = subs.group_by("job_basis", "job_direct").len()
    jobs = {
        f"{b or 'none'}:{d or 'none'}": int(n) for b, d, n in by_sub.sort("job_basis").iter_rows()
    }
    agent_users = users.filter(pl.col("class") == "agent").group_by("basis").len()
    like = users.filter(pl.col("class") == "unknown").height
    basis = {str(b): int(n) for b, n in agent_users.sort("basis").iter_rows()}
    kinds = ", ".join(f"{n} by {b}" for b, n in basis.items()) or "none"
    return {
        "submissions_by_evidence": jobs,
        "agent_users_by_evidence": basis,
        "agent_like_users": like,
        "headline": (
            f"Agent share rests on evidence only (agent users: {kinds}); "
            f"{like} user(s) with agent-like behaviour but no evidence only raise the upper "
            f"bound. Hours of day and week in {zone} ({zone_source})."
        ),
    }


def classify_all(data: Dataset, tz: str = "UTC") -> pl.DataFrame:
    """Users classified on every record ingested (window-independent)."""
    jobs, _ = win.apply(data.jobs, None, None)
    subs = cl.submissions(cl.job_evidence(jobs))
    feats = cl.user_features(subs, cl.command_table(subs, data.commands), tz)
    return cl.classify_users(feats, data.sessions)


def _classification(users: pl.DataFrame) -> dict[str, Any]:
    counts = users.group_by("class", "basis").len().sort("class", "basis")
    return {
        "users_by_class_and_basis": [
            {"class": c, "basis": b, "users": int(n)} for c, b, n in counts.iter_rows()
        ],
        "thresholds": {"agent_score": cl.AGENT_SCORE, "human_score": cl.HUMAN_SCORE},
    }


def _command_rate(users: pl.DataFrame) -> dict[str, Any]:
    per = users.filter(pl.col("active_hours") > 0)
    pooled: dict[str, Any] = {}
    for c in CLASSES:
        g = per.filter(pl.col("class") == c)
        n, h = int(g["commands"].sum()), int(g["active_hours"].sum())
        pooled[c] = {
            "commands": n,
            "active_hours": h,
            "rate_per_hour": _r(n / h if h else None),
            "median_user_rate": _r(g["rate"].median() if g.height else None),
        }
    a, h_ = pooled["agent"], pooled["human"]
    ratio = (
        a["rate_per_hour"] / h_["rate_per_hour"]
        if a["rate_per_hour"] and h_["rate_per_hour"]
        else None
    )
    med = (
        a["median_user_rate"] / h_["median_user_rate"]
        if a["median_user_rate"] and h_["median_user_rate"]
        else None
    )
    return {
        "definition": COMMAND_RATE_DEFINITION,
        "by_class": pooled,
        "ratio_pooled": _r(ratio, 3),
        "ratio_of_medians": _r(med, 3),
    }


def _off_hours(subs: pl.DataFrame, tz: str = "UTC") -> dict[str, Any]:
    t = cl.local(pl.col("ts"), tz)
    g = subs.group_by("class").agg(
        n=pl.len(),
        night=((t.dt.hour() >= cl.NIGHT_START) | (t.dt.hour() < cl.NIGHT_END)).mean(),
        weekend=(t.dt.weekday() >= 6).mean(),
        off=cl.off_hours(pl.col("ts"), tz).mean(),
    )
    out: dict[str, Any] = {
        "definition": f"night = 20:00-08:00 {tz}; weekend = Saturday and Sunday ({tz}); "
        "off-hours = night or weekend; shares of each class's submissions"
    }
    for c, n, night, weekend, off in g.iter_rows():
        out[str(c)] = {
            "submissions": int(n),
            "night_pct": _r(100 * night, 2),
            "weekend_pct": _r(100 * weekend, 2),
            "off_hours_pct": _r(100 * off, 2),
        }
    return out


def _burstiness(users: pl.DataFrame) -> dict[str, Any]:
    out: dict[str, Any] = {
        "definition": "B = (sd - mean) / (sd + mean) of a user's inter-submission gaps "
        "(-1 periodic, 0 Poisson, 1 bursty); median over users with >= 3 submissions"
    }
    g = users.filter(pl.col("n_sub") >= 3)
    for c in CLASSES:
        s = g.filter(pl.col("class") == c)
        out[c] = {
            "median_burstiness": _r(s["burstiness"].median() if s.height else None),
            "median_mean_gap_s": _r(s["median_gap_s"].median() if s.height else None),
        }
    return out


def _trial_error(subs: pl.DataFrame) -> dict[str, Any]:
    loops = {str(c): (int(n), int(j)) for c, n, j in trial_error(subs).iter_rows()}
    totals = {str(c): int(n) for c, n in subs.group_by("class").len().iter_rows()}
    out: dict[str, Any] = {
        "definition": f">= {LOOP_MIN} consecutive failing submissions by one user with the same "
        f"job name, each within {LOOP_GAP_S // 60} min of the previous"
    }
    for c in CLASSES:
        n, j = loops.get(c, (0, 0))
        t = totals.get(c, 0)
        out[c] = {
            "loops": n,
            "submissions_in_loops": j,
            "share_pct": _r(100 * j / t if t else 0, 2),
        }
    return out


def _waste(jobs: pl.DataFrame) -> dict[str, Any]:
    wasted = pl.col("state").is_in(WASTE_STATES)
    g = jobs.group_by("class").agg(
        core_h=pl.col("core_h").sum(),
        gpu_h=pl.col("gpu_h").sum(),
        wasted_core_h=pl.col("core_h").filter(wasted).sum(),
        wasted_gpu_h=pl.col("gpu_h").filter(wasted).sum(),
    )
    out: dict[str, Any] = {"states": list(WASTE_STATES)}
    for c, ch, gh, wch, wgh in g.iter_rows():
        out[str(c)] = {
            "wasted_core_hours": _r(wch, 2),
            "wasted_gpu_hours": _r(wgh, 2),
            "wasted_core_pct": _r(100 * wch / ch if ch else 0, 2),
            "wasted_gpu_pct": _r(100 * wgh / gh if gh else 0, 2),
        }
    return out


def _concentration(users: pl.DataFrame, jobs: pl.DataFrame) -> dict[str, Any]:
    per = jobs.group_by("user", "class").agg(core_h=pl.col("core_h").sum())
    out: dict[str, Any] = {"definition": "Gini of core-hours across users; top 10% users' share"}
    for c in (*CLASSES, "all"):
        g = per if c == "all" else per.filter(pl.col("class") == c)
        v = g["core_h"].to_list()
        out[c] = {"users": len(v), "gini": _r(gini(v)), "top10_pct": _r(top_share(v), 2)}
    return out


def _telemetry(cmds: pl.DataFrame) -> dict[str, Any]:
    """Tenantry-run commands by the principal's own class (its agent product), not its user's."""
    out: dict[str, Any] = {
        "definition": "commands from Tenantry's store, classed by the principal that ran them "
        "(a user may run some commands as a human and some through an agent)"
    }
    if cmds.is_empty():
        return out
    g = (
        cmds.with_columns(
            cls=pl.when(pl.col("agent") == "human").then(pl.lit("human")).otherwise(pl.lit("agent"))
        )
        .group_by("cls")
        .agg(
            commands=pl.len(),
            principals=pl.struct("user", "agent", "session").n_unique(),
            active_hours=pl.struct("user", pl.col("ts").dt.truncate("1h")).n_unique(),
        )
    )
    for c, n, p, h in g.iter_rows():
        out[str(c)] = {
            "commands": int(n),
            "principals": int(p),
            "active_hours": int(h),
            "rate_per_hour": _r(n / h if h else None),
        }
    return out


def _job_evidence(subs: pl.DataFrame) -> dict[str, Any]:
    """Per user class: submissions with direct agent evidence (tag/env), human tags, none."""
    g = subs.group_by("class").agg(
        n=pl.len(),
        agent=(pl.col("job_direct") == "agent").sum(),
        human=(pl.col("job_direct") == "human").sum(),
    )
    out: dict[str, Any] = {
        "definition": "submissions whose own record carries agent evidence (Tenantry tag or "
        "environment marker) or a human tag; the rest inherit their user's class"
    }
    for c, n, a, h in g.iter_rows():
        out[str(c)] = {
            "submissions": int(n),
            "direct_agent": int(a),
            "direct_human": int(h),
            "direct_agent_pct": _r(100 * a / n if n else 0, 2),
        }
    return out


def _sessions(jobs: pl.DataFrame, data: Dataset) -> dict[str, Any]:
    tagged = jobs.filter(pl.col("tag_session").is_not_null()).select(
        "user", pl.col("tag_agent").alias("agent"), pl.col("tag_session").alias("session")
    )
    both = pl.concat([tagged, data.sessions.select("user", "agent", "session")]).unique()
    agent = both.filter(pl.col("agent") != "human")
    return {
        "sessions": both.height,
        "agent_sessions": agent.height,
        "by_agent": {
            str(a): int(n) for a, n in agent.group_by("agent").len().sort("agent").iter_rows()
        },
    }


def _top_users(users: pl.DataFrame, jobs: pl.DataFrame, n: int = 20) -> list[dict[str, Any]]:
    per = jobs.group_by("user").agg(core_h=pl.col("core_h").sum(), gpu_h=pl.col("gpu_h").sum())
    top = (
        users.join(per, on="user", how="left")
        .sort("n_sub", descending=True)
        .head(n)
        .select(
            "user",
            "class",
            "evidence",
            "n_sub",
            "commands",
            "active_hours",
            "rate",
            "core_h",
            "gpu_h",
        )
    )
    return [
        {k: (_r(v, 2) if isinstance(v, float) else v) for k, v in row.items()}
        for row in top.iter_rows(named=True)
    ]


def users_table(data: Dataset, tz: str | None = None) -> pl.DataFrame:
    """Per-user classification with its evidence and features (for CSV and evaluation)."""
    return classify_all(data, facility_zone(data, tz)[0])
