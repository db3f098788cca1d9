"""Classify jobs and users as agent, human or unknown, keeping the evidence.

Evidence, strongest first:

1. ``tag`` -- a Tenantry attribution tag in the job comment (ground truth: the
   daemon submitted the job for that principal), or a Tenantry telemetry
   session of the user with an agent product.
2. ``env`` -- an agent environment marker (``CLAUDECODE``, ``CODEX_THREAD_ID``,
   ``GEMINI_CLI``, ...) in the job's recorded environment or submit line.
3. ``behaviour`` -- a score from the user's submissions: rate per active hour,
   ``--wrap`` share, short failing jobs, off-hours share, burstiness.

A user with any tag/env evidence of an agent is an agent user. A user whose
only direct evidence says human (tags with ``agent=human``) is human. Anyone
else is scored: score >= AGENT_SCORE -> agent, <= HUMAN_SCORE -> human, in
between -> unknown (shown as its own class, never folded in silently).
"""

from __future__ import annotations

import polars as pl

from tenantry import attribution
from tenantry.report.schema import FAIL_STATES

MARKERS: dict[str, str] = {
    "CLAUDECODE": "claude-code",
    "CLAUDE_CODE_SESSION_ID": "claude-code",
    "CLAUDE_CODE_ENTRYPOINT": "claude-code",
    "CODEX_THREAD_ID": "codex",
    "CODEX_SANDBOX": "codex",
    "CODEX_MANAGED_BY_NPM": "codex",
    "GEMINI_CLI": "gemini-cli",
    "OPENCODE": "opencode",
    "CURSOR_AGENT": "cursor",
    "OPENHANDS": "openhands",
}
MARKER_RE = r"\b(" + "|".join(sorted(MARKERS, key=len, reverse=True)) + r")\b"
AGENT_SCORE = 3
HUMAN_SCORE = 1
NIGHT_START, NIGHT_END = 20, 8  # UTC hours: night is [20:00, 08:00)


def off_hours(ts: pl.Expr) -> pl.Expr:
    """True at night (20:00-08:00 UTC) or at the weekend (Saturday, Sunday)."""
    hour = ts.dt.hour()
    return (hour >= NIGHT_START) | (hour < NIGHT_END) | (ts.dt.weekday() >= 6)


def _tags(comments: pl.Series) -> pl.DataFrame:
    """Parse the distinct tagged comments once (there are few distinct ones per user)."""
    uniq = comments.filter(comments.str.contains("tenantry:v1", literal=True)).unique()
    rows = []
    for c in uniq.to_list():
        tag = attribution.parse(c) or {}
        rows.append((c, tag.get("agent"), tag.get("session")))
    return pl.DataFrame(
        rows,
        schema={"comment": pl.String, "tag_agent": pl.String, "tag_session": pl.String},
        orient="row",
    )


def job_evidence(jobs: pl.DataFrame) -> pl.DataFrame:
    """Add ``tag_agent``, ``tag_session``, ``env_agent``, ``wrap`` and ``job_direct``."""
    tags = _tags(jobs["comment"].drop_nulls())
    df = (
        jobs.join(tags, on="comment", how="left")
        if tags.height
        else jobs.with_columns(
            tag_agent=pl.lit(None, dtype=pl.String), tag_session=pl.lit(None, dtype=pl.String)
        )
    )
    text = pl.concat_str(
        [pl.col("env").fill_null(""), pl.col("submit_line").fill_null("")], separator="\n"
    )
    marker = text.str.extract(MARKER_RE, 1)
    return df.with_columns(
        env_agent=marker.replace_strict(MARKERS, default=None, return_dtype=pl.String),
        # sbatch names a --wrap job "wrap" unless told otherwise (XDMoD dumps have no SubmitLine)
        wrap=pl.col("submit_line").fill_null("").str.contains("--wrap", literal=True)
        | (pl.col("name") == "wrap").fill_null(False),
    ).with_columns(
        job_direct=pl.when(pl.col("tag_agent").is_not_null() & (pl.col("tag_agent") != "human"))
        .then(pl.lit("agent"))
        .when(pl.col("env_agent").is_not_null())
        .then(pl.lit("agent"))
        .when(pl.col("tag_agent") == "human")
        .then(pl.lit("human"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def submissions(jobs: pl.DataFrame) -> pl.DataFrame:
    """One row per counted submission: user, time, name, failed, wrap, direct evidence."""
    return (
        jobs.filter(pl.col("counted"))
        .group_by("submission_id")
        .agg(
            pl.col("user").first(),
            pl.col("submit").min().alias("ts"),
            # submission order within one second: the scheduler's job id
            pl.col("job_id")
            .str.extract(r"^(\d+)", 1)
            .cast(pl.Int64, strict=False)
            .min()
            .alias("seq"),
            pl.col("name").first(),
            pl.col("state").is_in(FAIL_STATES).any().alias("failed"),
            (pl.col("state").is_in(FAIL_STATES) & (pl.col("elapsed_s") < 300))
            .any()
            .alias("short_fail"),
            pl.col("wrap").any(),
            pl.col("job_direct").drop_nulls().first(),
        )
        .filter(pl.col("ts").is_not_null())
    )


def command_table(subs: pl.DataFrame, commands: pl.DataFrame) -> pl.DataFrame:
    """Commands: every submission, plus every telemetry command (user, ts)."""
    a = subs.select("user", "ts")
    b = commands.select("user", "ts").drop_nulls()
    return pl.concat([a, b], how="vertical")


def user_features(subs: pl.DataFrame, cmds: pl.DataFrame) -> pl.DataFrame:
    gaps = (
        subs.select("user", "ts")
        .sort("user", "ts")
        .with_columns(gap=pl.col("ts").diff().dt.total_seconds().over("user"))
        .group_by("user")
        .agg(mu=pl.col("gap").mean(), sd=pl.col("gap").std())
        .with_columns(
            burstiness=pl.when((pl.col("mu") + pl.col("sd")) > 0)
            .then((pl.col("sd") - pl.col("mu")) / (pl.col("sd") + pl.col("mu")))
            .otherwise(None)
        )
        .select("user", "burstiness", pl.col("mu").alias("median_gap_s"))
    )
    per_user = subs.group_by("user").agg(
        n_sub=pl.len(),
        wrap_share=pl.col("wrap").mean(),
        short_fail_share=pl.col("short_fail").mean(),
        off_hours_share=off_hours(pl.col("ts")).mean(),
        direct_agent=(pl.col("job_direct") == "agent").sum(),
        direct_human=(pl.col("job_direct") == "human").sum(),
    )
    activity = cmds.group_by("user").agg(
        commands=pl.len(), active_hours=pl.col("ts").dt.truncate("1h").n_unique()
    )
    return (
        activity.join(per_user, on="user", how="left")
        .join(gaps, on="user", how="left")
        .with_columns(
            pl.col("n_sub", "direct_agent", "direct_human").fill_null(0),
            rate=pl.col("commands") / pl.col("active_hours"),
        )
    )


def score(f: pl.DataFrame) -> pl.Expr:
    """Behavioural score; each feature adds points (see docs/report.md)."""
    pts = [
        pl.when(pl.col("rate") >= 6).then(2).when(pl.col("rate") >= 3).then(1).otherwise(0),
        (pl.col("wrap_share").fill_null(0) >= 0.5).cast(pl.Int32),
        (pl.col("short_fail_share").fill_null(0) >= 0.25).cast(pl.Int32),
        (pl.col("off_hours_share").fill_null(0) >= 0.5).cast(pl.Int32),
        (pl.col("burstiness").fill_null(0) >= 0.5).cast(pl.Int32),
    ]
    return pl.sum_horizontal(pts).alias("score")


def classify_users(features: pl.DataFrame, sessions: pl.DataFrame) -> pl.DataFrame:
    """user, class, evidence, score (+ the features)."""
    tele = sessions.filter(pl.col("agent") != "human").group_by("user").agg(tele_agent=pl.len())
    f = features.join(tele, on="user", how="full", coalesce=True).with_columns(
        pl.col("tele_agent", "direct_agent", "direct_human", "n_sub", "commands").fill_null(0),
    )
    f = f.with_columns(score(f))
    cls = (
        pl.when((pl.col("direct_agent") > 0) | (pl.col("tele_agent") > 0))
        .then(pl.lit("agent"))
        .when(pl.col("direct_human") > 0)
        .then(pl.lit("human"))
        .when(pl.col("score") >= AGENT_SCORE)
        .then(pl.lit("agent"))
        .when(pl.col("score") <= HUMAN_SCORE)
        .then(pl.lit("human"))
        .otherwise(pl.lit("unknown"))
    )
    evidence = (
        pl.when(pl.col("direct_agent") > 0)
        .then(pl.format("jobs with tag/env marker: {}", pl.col("direct_agent")))
        .when(pl.col("tele_agent") > 0)
        .then(pl.format("telemetry agent sessions: {}", pl.col("tele_agent")))
        .when(pl.col("direct_human") > 0)
        .then(pl.format("tags say human: {}", pl.col("direct_human")))
        .otherwise(pl.format("behaviour score {}", pl.col("score")))
    )
    basis = (
        pl.when(
            (pl.col("direct_agent") > 0) | (pl.col("tele_agent") > 0) | (pl.col("direct_human") > 0)
        )
        .then(pl.lit("direct"))
        .otherwise(pl.lit("behaviour"))
    )
    return f.with_columns(cls.alias("class"), evidence.alias("evidence"), basis.alias("basis"))


def precision_recall(predicted: pl.DataFrame, truth: pl.DataFrame) -> dict[str, float]:
    """Agent-class precision and recall of ``predicted`` (user, class) vs ``truth`` (user, class).

    ``unknown`` counts as "not called agent": it lowers recall, never precision.
    """
    j = truth.join(predicted.select("user", pl.col("class").alias("pred")), on="user", how="left")
    tp = j.filter((pl.col("class") == "agent") & (pl.col("pred") == "agent")).height
    fp = j.filter((pl.col("class") != "agent") & (pl.col("pred") == "agent")).height
    fn = j.filter((pl.col("class") == "agent") & (pl.col("pred") != "agent")).height
    unknown = j.filter(pl.col("pred") == "unknown").height
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "true_positive": tp,
        "false_positive": fp,
        "false_negative": fn,
        "unknown": unknown,
    }
