"""Classify jobs and users as agent, human or unattributed agent-like, keeping the evidence.

Evidence, strongest first (a stronger kind decides when kinds disagree):

1. ``tag`` -- a Tenantry attribution tag in the job comment (the daemon
   submitted the job for that principal), or a Tenantry telemetry session of
   the user with an agent product.
2. ``controller`` -- the tag Tenantry's ``job_submit.lua`` writes into
   ``AdminComment`` inside slurmctld (not user-writable): the agent markers the
   submitting environment carried, and whether the job came through Tenantry.
   No markers there is evidence of a human submission.
3. ``env`` -- an agent environment marker (``CLAUDECODE``, ``CODEX_THREAD_ID``,
   ``GEMINI_CLI``, ...) in the job's recorded environment (``--env-vars``),
   submit line or comment.

Behaviour alone never labels a user "agent". A user without evidence is
scored (rate per active hour, ``--wrap`` share, short failing jobs, bursts,
off-hours in the facility's time zone); a score >= AGENT_SCORE puts the user
in the class ``unknown``, shown as "unattributed, agent-like": it widens the
upper bound of the agent share, never the share itself. Scripted, bursty and
night-running humans (cron pipelines, sweeps, workflow managers) look like
this too, which is why it is only a bound.
"""

from __future__ import annotations

import polars as pl

from tenantry.core import attribution
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
CTLD_PREFIX = "tenantry-ctld:v1"
CTLD_RE = r"tenantry-ctld:v1;via=([a-z]*);markers=([A-Z0-9_,]*)"
AGENT_SCORE = 3
HUMAN_SCORE = 1
NIGHT_START, NIGHT_END = 20, 8  # local hours: night is [20:00, 08:00)
EVIDENCE_RANK = {"tag": 3, "controller": 2, "env": 1}


def local(ts: pl.Expr, tz: str = "UTC") -> pl.Expr:
    """``ts`` (UTC) as wall-clock time in the facility's zone (DST-correct)."""
    return ts if tz == "UTC" else ts.dt.convert_time_zone(tz)


def off_hours(ts: pl.Expr, tz: str = "UTC") -> pl.Expr:
    """True at night (20:00-08:00 local) or at the weekend (Saturday, Sunday local)."""
    t = local(ts, tz)
    hour = t.dt.hour()
    return (hour >= NIGHT_START) | (hour < NIGHT_END) | (t.dt.weekday() >= 6)


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


def _human_or_agent(column: str) -> pl.Expr:
    """A column of evidence as a class: null stays null, "human" is human, else agent."""
    return (
        pl.when(pl.col(column).is_null())
        .then(pl.lit(None, dtype=pl.String))
        .when(pl.col(column) == "human")
        .then(pl.lit("human"))
        .otherwise(pl.lit("agent"))
    )


def job_evidence(jobs: pl.DataFrame) -> pl.DataFrame:
    """Add ``tag_agent``, ``tag_session``, ``ctld_agent``, ``env_agent``, ``wrap``,
    ``job_direct`` (agent/human/None) and ``job_basis`` (tag/controller/env/None)."""
    tags = _tags(jobs["comment"].drop_nulls())
    df = (
        jobs.join(tags, on="comment", how="left")
        if tags.height
        else jobs.with_columns(
            tag_agent=pl.lit(None, dtype=pl.String), tag_session=pl.lit(None, dtype=pl.String)
        )
    )
    text = pl.concat_str(
        [
            pl.col("env").fill_null(""),
            pl.col("submit_line").fill_null(""),
            pl.col("comment").fill_null(""),
        ],
        separator="\n",
    )
    marker = text.str.extract(MARKER_RE, 1)
    ctld = pl.col("admin_comment").str.extract_groups(CTLD_RE)
    ctld_markers = ctld.struct.field("2")
    ctld_marker = ctld_markers.str.extract(MARKER_RE, 1)
    ctld_agent = (
        pl.when(ctld_marker.is_not_null())
        .then(ctld_marker.replace_strict(MARKERS, default="agent", return_dtype=pl.String))
        .when(ctld_markers.is_not_null() & (ctld_markers == ""))
        .then(pl.lit("human"))
        .otherwise(pl.lit(None, dtype=pl.String))
    )
    tag_cls, ctld_cls = _human_or_agent("tag_agent"), _human_or_agent("ctld_agent")
    env_cls = pl.when(pl.col("env_agent").is_not_null()).then(pl.lit("agent"))
    return df.with_columns(
        env_agent=marker.replace_strict(MARKERS, default=None, return_dtype=pl.String),
        ctld_agent=ctld_agent,
        ctld_via=ctld.struct.field("1"),
        # sbatch names a --wrap job "wrap" unless told otherwise (XDMoD dumps have no SubmitLine)
        wrap=pl.col("submit_line").fill_null("").str.contains("--wrap", literal=True)
        | (pl.col("name") == "wrap").fill_null(False),
    ).with_columns(
        job_direct=pl.coalesce(tag_cls, ctld_cls, env_cls),
        job_basis=pl.when(tag_cls.is_not_null())
        .then(pl.lit("tag"))
        .when(ctld_cls.is_not_null())
        .then(pl.lit("controller"))
        .when(env_cls.is_not_null())
        .then(pl.lit("env"))
        .otherwise(pl.lit(None, dtype=pl.String)),
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
            pl.col("job_basis").drop_nulls().first(),
        )
        .filter(pl.col("ts").is_not_null())
    )


def command_table(subs: pl.DataFrame, commands: pl.DataFrame) -> pl.DataFrame:
    """Commands: every submission, plus every telemetry command (user, ts)."""
    a = subs.select("user", "ts")
    b = commands.select("user", "ts").drop_nulls()
    return pl.concat([a, b], how="vertical")


def user_features(subs: pl.DataFrame, cmds: pl.DataFrame, tz: str = "UTC") -> pl.DataFrame:
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
        off_hours_share=off_hours(pl.col("ts"), tz).mean(),
        direct_agent=(pl.col("job_direct") == "agent").sum(),
        direct_human=(pl.col("job_direct") == "human").sum(),
        agent_basis=pl.col("job_basis")
        .filter(pl.col("job_direct") == "agent")
        .replace_strict(EVIDENCE_RANK, default=0, return_dtype=pl.Int32)
        .max(),
        human_basis=pl.col("job_basis")
        .filter(pl.col("job_direct") == "human")
        .replace_strict(EVIDENCE_RANK, default=0, return_dtype=pl.Int32)
        .max(),
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
    if "agent_basis" not in f.columns:
        f = f.with_columns(agent_basis=pl.lit(None, dtype=pl.Int32))
    if "human_basis" not in f.columns:
        f = f.with_columns(human_basis=pl.lit(None, dtype=pl.Int32))
    # a stronger kind of evidence decides: a human tag outranks an env marker in a comment
    a_rank = pl.max_horizontal(
        pl.col("agent_basis").fill_null(0), pl.when(pl.col("tele_agent") > 0).then(3).otherwise(0)
    )
    h_rank = pl.col("human_basis").fill_null(0)
    is_agent = (a_rank > 0) & (a_rank >= h_rank)
    is_human = (h_rank > 0) & ~is_agent
    cls = (
        pl.when(is_agent)
        .then(pl.lit("agent"))
        .when(is_human)
        .then(pl.lit("human"))
        .when(pl.col("score") >= AGENT_SCORE)
        .then(pl.lit("unknown"))
        .otherwise(pl.lit("human"))
    )
    names = {3: "tag", 2: "controller", 1: "env"}
    a_name = a_rank.replace_strict(names, default="", return_dtype=pl.String)
    h_name = h_rank.replace_strict(names, default="", return_dtype=pl.String)
    evidence = (
        pl.when(is_agent & (pl.col("tele_agent") > 0) & (pl.col("direct_agent") == 0))
        .then(pl.format("telemetry agent sessions: {}", pl.col("tele_agent")))
        .when(is_agent)
        .then(pl.format("jobs with agent evidence ({}): {}", a_name, pl.col("direct_agent")))
        .when(is_human)
        .then(pl.format("evidence says human ({}): {}", h_name, pl.col("direct_human")))
        .when(pl.col("score") >= AGENT_SCORE)
        .then(pl.format("no evidence; agent-like behaviour score {}", pl.col("score")))
        .otherwise(pl.format("no evidence; behaviour score {}", pl.col("score")))
    )
    basis = (
        pl.when(is_agent).then(a_name).when(is_human).then(h_name).otherwise(pl.lit("behaviour"))
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
