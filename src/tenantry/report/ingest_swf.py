"""Read Standard Workload Format traces (Parallel Workloads Archive).

Eighteen whitespace-separated numeric fields per line; ``;`` starts a header
comment (``; UnixStartTime: 1199145600``, ``; TimeZoneString: Europe/Berlin``,
``; MaxProcs: 4096`` ...). ``-1`` means unknown. Times are seconds relative to
``UnixStartTime``. Status: 1 completed, 0 failed, 5 cancelled; a job that was
checkpointed or swapped has one summary line plus partial-execution lines with
status 2 (to be continued), 3 (last part, completed) or 4 (last part, failed).
Usage is taken from the partial lines when a job has them (they exclude the
time it spent swapped out) and from the summary otherwise; the job counts as
one submission either way. Users are numeric ids, reported as ``u<ID>``.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from tenantry.report.files import read_text
from tenantry.report.schema import JOB_SCHEMA, Dataset, IngestStats, Unreadable, conform

FIELDS = (
    "job",
    "submit",
    "wait",
    "run",
    "procs",
    "cpu_avg",
    "mem_used",
    "req_procs",
    "req_time",
    "req_mem",
    "status",
    "user",
    "group",
    "app",
    "queue",
    "partition",
    "prev_job",
    "think",
)
STATUS = {0: "FAILED", 1: "COMPLETED", 5: "CANCELLED", 2: "PARTIAL", 3: "COMPLETED", 4: "FAILED"}
_NUM = re.compile(r"^-?\d+(\.\d+)?$")


def parse_header(lines: list[str]) -> dict[str, str]:
    """``; Key: value`` header comments as a dict (first occurrence wins)."""
    out: dict[str, str] = {}
    for line in lines:
        body = line.lstrip(";").strip()
        key, sep, value = body.partition(":")
        if sep and key and " " not in key.strip():
            out.setdefault(key.strip(), value.strip())
    return out


def looks_like(head: str) -> bool:
    for line in head.splitlines():
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            return True
        return len(s.split()) == 18 and all(_NUM.match(x) for x in s.split())
    return False


def read_swf(path: str | Path, *, tz: str | None = None) -> Dataset:
    p = Path(path)
    stats = IngestStats(source=str(p), kind="swf")
    text = read_text(p)
    header_lines: list[str] = []
    rows: list[list[float]] = []
    for no, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s:
            continue
        if s.startswith(";"):
            header_lines.append(s)
            continue
        cells = s.split()
        if len(cells) != 18 or not all(_NUM.match(c) for c in cells):
            stats.unreadable.append(
                Unreadable(str(p), no, f"expected 18 numbers, got {len(cells)} fields", s[:200])
            )
            continue
        rows.append([float(c) for c in cells])
    header = parse_header(header_lines)
    start = header.get("UnixStartTime", "0")
    if not start.lstrip("-").isdigit():
        stats.notes.append(f"UnixStartTime is {start!r}; times are relative to the epoch")
        start = "0"
    if header.get("TimeZoneString"):
        stats.notes.append(
            f"trace time zone {header['TimeZoneString']}; timestamps are reported in UTC"
        )
    if not rows:
        return Dataset(stats=[stats])
    raw = pl.DataFrame(rows, schema=dict.fromkeys(FIELDS, pl.Float64), orient="row").with_columns(
        pl.all().cast(pl.Int64)
    )
    # Jobs with partial-execution lines: use the partials for usage, the summary to count.
    partial = raw.filter(pl.col("status").is_in([2, 3, 4]))
    has_parts = partial.select("job").unique()
    summary = raw.filter(~pl.col("status").is_in([2, 3, 4]))
    usage = pl.concat(
        [
            summary.join(has_parts, on="job", how="anti"),
            partial,
            # a summary whose job has parts keeps its submission but no usage
            summary.join(has_parts, on="job", how="semi").with_columns(
                run=pl.lit(-1, dtype=pl.Int64), procs=pl.lit(0, dtype=pl.Int64)
            ),
        ]
    )
    epoch = int(start)
    secs = pl.col("submit").clip(0) + epoch
    started = (pl.col("wait") >= 0) & (pl.col("run") >= 0) & (pl.col("status") != 5) | (
        pl.col("run") > 0
    )
    begin = secs + pl.col("wait").clip(0)
    jobs = usage.select(
        pl.lit(p.name).alias("source"),
        pl.col("job").cast(pl.String).alias("job_id"),
        (pl.lit("swf:") + pl.col("job").cast(pl.String)).alias("submission_id"),
        (pl.lit("u") + pl.col("user").cast(pl.String)).alias("user"),
        (pl.lit("g") + pl.col("group").cast(pl.String)).alias("account"),
        pl.col("queue").cast(pl.String).alias("partition"),
        pl.col("app").cast(pl.String).alias("name"),
        pl.col("status").replace_strict(STATUS, default="UNKNOWN").alias("state"),
        pl.from_epoch(secs, "s").dt.replace_time_zone("UTC").alias("submit"),
        pl.when(started).then(pl.from_epoch(begin, "s")).dt.replace_time_zone("UTC").alias("start"),
        pl.when(started)
        .then(pl.from_epoch(begin + pl.col("run").clip(0), "s"))
        .dt.replace_time_zone("UTC")
        .alias("end"),
        pl.col("run").clip(0).alias("elapsed_s"),
        pl.when(pl.col("procs") > 0)
        .then(pl.col("procs"))
        .otherwise(pl.col("req_procs").clip(0))
        .alias("cpus"),
        pl.lit(0).alias("gpus"),
    )
    stats.records = jobs.height
    if tz:
        stats.notes.append("--tz is ignored for SWF (times are epoch offsets)")
    return Dataset(jobs=conform(jobs, JOB_SCHEMA), stats=[stats])
