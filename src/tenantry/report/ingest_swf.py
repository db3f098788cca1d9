"""Read Standard Workload Format traces (Parallel Workloads Archive), plain or extended.

Eighteen whitespace-separated numeric fields per line; ``;`` starts a header
comment (``; UnixStartTime: 1199145600``, ``; TimeZoneString: Europe/Berlin``,
``; MaxProcs: 4096`` ...). ``-1`` means unknown. Times are seconds relative to
``UnixStartTime``. Status: 1 completed, 0 failed, 5 cancelled; a job that was
checkpointed or swapped has one summary line plus partial-execution lines with
status 2 (to be continued), 3 (last part, completed) or 4 (last part, failed).
Usage is taken from the partial lines when a job has them (they exclude the
time it spent swapped out) and from the summary otherwise; the job counts as
one submission either way. Users are numeric ids, reported as ``u<ID>``.

*Extended* SWF, as workload simulators export it, appends columns (node
list, queue name, node spec: 21 in all) and often has no header and absolute
epoch times. The extra columns are kept verbatim in ``extra``; submit times
above ``ABSOLUTE_AFTER`` with no ``UnixStartTime`` are read as epoch seconds.
The file is split and typed by polars, not line by line in Python.
"""

from __future__ import annotations

import re
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

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
_NUM_RS = r"^-?\d+(\.\d+)?$"
# 1973-03-03: a relative trace never has submit offsets this large (3 years in seconds)
ABSOLUTE_AFTER = 100_000_000


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
        cells = s.split()
        return len(cells) >= 18 and all(_NUM.match(x) for x in cells[:18])
    return False


def _lines(p: Path) -> pl.DataFrame:
    """(no, text) of every non-empty line, split natively."""
    text = read_text(p)
    lines = (
        pl.DataFrame({"t": [text]})
        .select(pl.col("t").str.split("\n").explode().alias("text"))
        .with_row_index("no", offset=1)
        .with_columns(pl.col("text").str.strip_chars())
        .filter(pl.col("text") != "")
    )
    del text
    return lines


def read_swf(path: str | Path, *, tz: str | None = None) -> Dataset:
    p = Path(path)
    stats = IngestStats(source=str(p), kind="swf")
    lines = _lines(p)
    is_head = pl.col("text").str.starts_with(";")
    header = parse_header(lines.filter(is_head)["text"].to_list())
    body = (
        lines.filter(~is_head)
        .with_columns(cells=pl.col("text").str.replace_all(r"\s+", " ").str.split(" "))
        .with_columns(n=pl.col("cells").list.len())
    )
    del lines
    width = int(body["n"].mode().sort()[-1]) if body.height else 18
    extended = width > 18
    if extended:
        stats.kind = "swf-extended"
        stats.notes.append(f"extended SWF: {width} columns; columns 19-{width} kept in 'extra'")
    numeric = (
        pl.col("cells").list.slice(0, 18).list.eval(pl.element().str.contains(_NUM_RS)).list.all()
    )
    ok = (pl.col("n") == width) & numeric
    bad = body.filter(~ok.fill_null(False))
    for no, text, n in bad.select("no", "text", "n").iter_rows():
        reason = (
            f"expected {width} fields, got {n}"
            if n != width
            else "the first 18 fields must be numbers"
        )
        stats.unreadable.append(Unreadable(str(p), int(no), reason, str(text)[:200]))
    good = body.filter(ok.fill_null(False))
    del body
    raw = good.select(
        *(
            pl.col("cells").list.get(i).cast(pl.Float64).cast(pl.Int64).alias(name)
            for i, name in enumerate(FIELDS)
        ),
        (
            pl.col("cells").list.slice(18).list.join(" ")
            if extended
            else pl.lit(None, dtype=pl.String)
        ).alias("extra"),
    )
    del good
    start = header.get("UnixStartTime", "")
    if not start.lstrip("-").isdigit():
        top = raw["submit"].max() if raw.height else None
        if isinstance(top, int) and top > ABSOLUTE_AFTER:
            stats.notes.append("no UnixStartTime and submit times are epoch seconds: absolute")
        elif raw.height:
            stats.notes.append(f"UnixStartTime is {start or 'missing'}; times are from the epoch")
        start = "0"
    zone = (header.get("TimeZoneString") or header.get("TimeZone") or "").strip()
    if zone and zone.upper() != "UNKNOWN":
        try:
            ZoneInfo(zone)
        except (ValueError, ZoneInfoNotFoundError):
            stats.notes.append(f"TimeZoneString {zone!r} is not a known zone; ignored")
        else:
            stats.tz = zone
            stats.notes.append(f"trace time zone {zone} (hours of day and week use it)")
    stats.namespace = (header.get("Computer") or header.get("Installation") or p.name).strip()
    if raw.is_empty():
        return Dataset(stats=[stats])
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
        pl.lit(stats.namespace).alias("cluster"),
        pl.col("job").cast(pl.String).alias("job_id"),
        (pl.lit(stats.namespace + ":") + pl.col("job").cast(pl.String)).alias("submission_id"),
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
        pl.col("extra"),
    )
    stats.records = jobs.height
    if tz:
        stats.notes.append("--tz does not shift SWF times (they are epoch seconds)")
    return Dataset(jobs=conform(jobs, JOB_SCHEMA), stats=[stats])
