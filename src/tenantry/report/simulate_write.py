"""Write a simulated :class:`~tenantry.report.simulate.Trace` in real formats.

- ``sacct``: ``sacct --parsable2`` with a header, a wide field set including
  ``Comment`` (the attribution tag) and ``SubmitLine`` (``--wrap`` pipelines
  contain ``|``, as real ones do);
- ``xdmod``: Open XDMoD's field set, no header (no comment: behaviour only);
- ``swf``: the Standard Workload Format with a PWA-style header;
- ``json``: ``sacct --json`` in the 22.05 shape.

Ground truth goes to ``<out>.labels.csv`` (user, class, agent, hidden).
"""

from __future__ import annotations

import csv
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from tenantry.report.ingest_sacct import XDMOD_FIELDS
from tenantry.report.simulate import Trace

WIDE = [
    "JobID",
    "JobIDRaw",
    "Cluster",
    "Partition",
    "QOS",
    "Account",
    "Group",
    "User",
    "UID",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "ElapsedRaw",
    "ExitCode",
    "State",
    "NNodes",
    "NCPUS",
    "AllocCPUS",
    "ReqMem",
    "AllocTRES",
    "Timelimit",
    "NodeList",
    "JobName",
    "Comment",
    "SubmitLine",
]
FORMATS = ("sacct", "xdmod", "swf", "json")
CLUSTER = "sim"


def _hms(col: str) -> pl.Expr:
    s = pl.col(col)
    d, rem = s // 86400, s % 86400
    body = pl.format(
        "{}:{}:{}",
        (rem // 3600).cast(pl.String).str.zfill(2),
        ((rem % 3600) // 60).cast(pl.String).str.zfill(2),
        (rem % 60).cast(pl.String).str.zfill(2),
    )
    return pl.when(d > 0).then(pl.format("{}-{}", d, body)).otherwise(body)


def _ts(col: str) -> pl.Expr:
    return pl.from_epoch(pl.col(col), "s").dt.strftime("%Y-%m-%dT%H:%M:%S").fill_null("Unknown")


def frame(trace: Trace) -> pl.DataFrame:
    rows = {
        "JobID": [j.job_id for j in trace.jobs],
        "raw": [j.raw_id for j in trace.jobs],
        "user": [j.user for j in trace.jobs],
        "uid": [j.uid for j in trace.jobs],
        "account": [j.account for j in trace.jobs],
        "name": [j.name for j in trace.jobs],
        "submit": [j.submit for j in trace.jobs],
        "start": [j.start for j in trace.jobs],
        "elapsed": [j.elapsed for j in trace.jobs],
        "cpus": [j.cpus for j in trace.jobs],
        "gpus": [j.gpus for j in trace.jobs],
        "state": [j.state for j in trace.jobs],
        "exit_code": [j.exit_code for j in trace.jobs],
        "comment": [j.comment for j in trace.jobs],
        "submit_line": [j.submit_line for j in trace.jobs],
        "timelimit": [max(j.timelimit, j.elapsed) for j in trace.jobs],
        "submission": [j.submission for j in trace.jobs],
    }
    return pl.DataFrame(rows).with_columns(
        end=pl.when(pl.col("start").is_not_null()).then(pl.col("start") + pl.col("elapsed"))
    )


def _sacct_columns(df: pl.DataFrame) -> pl.DataFrame:
    started = pl.col("start").is_not_null()
    tres = pl.format("billing={},cpu={},mem={}G,node=1", "cpus", "cpus", pl.col("cpus") * 4)
    tres = (
        pl.when(pl.col("gpus") > 0)
        .then(pl.format("{},gres/gpu:a100={},gres/gpu={}", tres, "gpus", "gpus"))
        .otherwise(tres)
    )
    return df.select(
        pl.col("JobID").alias("jobid"),
        pl.col("raw").cast(pl.String).alias("jobidraw"),
        pl.lit(CLUSTER).alias("cluster"),
        pl.when(pl.col("gpus") > 0).then(pl.lit("gpu")).otherwise(pl.lit("cpu")).alias("partition"),
        pl.lit("normal").alias("qos"),
        pl.col("account"),
        pl.col("account").alias("group"),
        pl.col("uid").cast(pl.String).alias("gid"),
        pl.col("user"),
        pl.col("uid").cast(pl.String),
        _ts("submit").alias("submit"),
        _ts("submit").alias("eligible"),
        _ts("start").alias("start"),
        _ts("end").alias("end"),
        _hms("elapsed").alias("elapsed"),
        pl.col("elapsed").cast(pl.String).alias("elapsedraw"),
        pl.col("exit_code").alias("exitcode"),
        pl.col("state"),
        pl.lit("1").alias("nnodes"),
        pl.col("cpus").cast(pl.String).alias("ncpus"),
        pl.col("cpus").cast(pl.String).alias("alloccpus"),
        pl.col("cpus").cast(pl.String).alias("reqcpus"),
        pl.format("{}G", pl.col("cpus") * 4).alias("reqmem"),
        pl.format("billing={},cpu={},mem={}G,node=1", "cpus", "cpus", pl.col("cpus") * 4).alias(
            "reqtres"
        ),
        pl.when(started).then(tres).otherwise(pl.lit("")).alias("alloctres"),
        _hms("timelimit").alias("timelimit"),
        pl.when(started)
        .then(pl.lit("node01"))
        .otherwise(pl.lit("None assigned"))
        .alias("nodelist"),
        pl.col("name").alias("jobname"),
        pl.col("comment"),
        pl.col("submit_line").alias("submitline"),
    )


def write_sacct(trace: Trace, path: Path, *, xdmod: bool = False) -> None:
    cols = _sacct_columns(frame(trace))
    names = list(XDMOD_FIELDS) if xdmod else [c.lower() for c in WIDE]
    lines = cols.select(pl.concat_str([pl.col(c) for c in names], separator="|").alias("l"))
    with path.open("w", encoding="utf-8") as fh:
        if not xdmod:
            fh.write("|".join(WIDE) + "\n")
        for chunk in lines.iter_slices(200_000):
            text = "\n".join(chunk["l"].to_list())
            fh.write(text + "\n")


def write_swf(trace: Trace, path: Path) -> None:
    df = frame(trace)
    t0 = int(trace.start.timestamp())
    status = (
        pl.when(pl.col("state") == "COMPLETED")
        .then(1)
        .when(pl.col("state") == "CANCELLED")
        .then(5)
        .otherwise(0)
    )
    # SWF has one line per job: array tasks and het parts are folded into their submission
    sub = (
        df.filter(pl.col("state") != "REQUEUED")
        .group_by("submission")
        .agg(
            pl.col("submit").min(),
            pl.col("start").min(),
            pl.col("elapsed").max(),
            pl.col("cpus").sum(),
            pl.col("timelimit").max(),
            pl.col("uid").first(),
            pl.col("state").first(),
        )
        .sort("submission")
        .with_row_index("n", offset=1)
    )
    users = {u: i + 1 for i, u in enumerate(sorted({j.uid for j in trace.jobs}))}
    lines = sub.select(
        pl.format(
            "{} {} {} {} {} -1 -1 {} {} -1 {} {} 1 -1 1 1 -1 -1",
            "n",
            pl.col("submit") - t0,
            pl.when(pl.col("start").is_null())
            .then(-1)
            .otherwise(pl.col("start") - pl.col("submit")),
            pl.when(pl.col("start").is_null()).then(-1).otherwise(pl.col("elapsed")),
            pl.when(pl.col("start").is_null()).then(-1).otherwise(pl.col("cpus")),
            "cpus",
            "timelimit",
            status,
            pl.col("uid").replace_strict(users),
        ).alias("l")
    )
    end = trace.end.strftime("%a %b %d %H:%M:%S UTC %Y")
    header = [
        "; Version: 2.2",
        "; Computer: Tenantry simulated facility",
        "; Installation: tenantry simulate",
        f"; MaxJobs: {sub.height}",
        f"; MaxRecords: {sub.height}",
        "; Preemption: No",
        f"; UnixStartTime: {t0}",
        "; TimeZoneString: UTC",
        f"; StartTime: {trace.start.strftime('%a %b %d %H:%M:%S UTC %Y')}",
        f"; EndTime: {end}",
        f"; MaxNodes: {max(1, len(trace.users))}",
        "; Note: user ids are dense; labels are in the .labels.csv file",
    ]
    with path.open("w", encoding="utf-8") as fh:
        fh.write("\n".join(header) + "\n")
        fh.write("\n".join(lines["l"].to_list()) + "\n")
    # SWF users are numbers: write the label file in those terms as well
    write_labels(trace, path, user_map={f"u{u}": users[u] for u in users})


def write_json(trace: Trace, path: Path) -> None:
    jobs: list[dict[str, Any]] = []
    for j in trace.jobs:
        base, _, task = j.job_id.partition("_")
        het_base, _, het_off = j.job_id.partition("+")
        alloc = (
            []
            if j.start is None
            else [
                {"type": "cpu", "name": None, "id": 1, "count": j.cpus},
                {"type": "node", "name": None, "id": 4, "count": 1},
            ]
        )
        if j.gpus and j.start is not None:
            alloc.append({"type": "gres", "name": "gpu", "id": 1001, "count": j.gpus})
            alloc.append({"type": "gres", "name": "gpu:a100", "id": 1002, "count": j.gpus})
        end = 0 if j.start is None else j.start + j.elapsed
        jobs.append(
            {
                "account": j.account,
                "array": {
                    "job_id": int(base) if task else 0,
                    "task_id": int(task) if task else None,
                    "task": None,
                },
                "association": {"account": j.account, "cluster": CLUSTER, "user": j.user},
                "cluster": CLUSTER,
                "comment": {"administrator": None, "job": j.comment or None, "system": None},
                "exit_code": {
                    "status": "SUCCESS" if j.exit_code == "0:0" else "FAILED",
                    "return_code": int(j.exit_code.split(":")[0]),
                },
                "het": {
                    "job_id": int(het_base) if het_off else 0,
                    "job_offset": int(het_off) if het_off else None,
                },
                "job_id": j.raw_id,
                "name": j.name,
                "partition": "gpu" if j.gpus else "cpu",
                "state": {"current": j.state, "reason": "None"},
                "time": {
                    "elapsed": j.elapsed,
                    "submission": j.submit,
                    "start": j.start or 0,
                    "end": end,
                    "suspended": 0,
                    "limit": j.timelimit // 60,
                },
                "tres": {"allocated": alloc, "requested": []},
                "user": j.user,
            }
        )
    doc = {
        "meta": {
            "plugin": {"type": "openapi/dbv0.0.37"},
            "Slurm": {"version": {"major": 22, "micro": 0, "minor": 5}},
        },
        "errors": [],
        "jobs": jobs,
    }
    path.write_text(json.dumps(doc), encoding="utf-8")


def labels_path(out: Path) -> Path:
    return out.with_name(out.name + ".labels.csv")


def write_labels(trace: Trace, out: Path, user_map: dict[str, int] | None = None) -> Path:
    path = labels_path(out)
    by_uid = {u.uid: u for u in trace.users}
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["user", "class", "agent", "hidden"])
        for u in trace.users:
            name = u.name
            if user_map is not None:
                name = f"u{user_map.get(f'u{u.uid}', u.uid)}"
            w.writerow([name, "agent" if u.agent else "human", u.product, int(u.hidden)])
    del by_uid
    return path


def write(trace: Trace, out: Path, fmt: str) -> list[Path]:
    """Write the trace in ``fmt`` plus its labels; the paths written."""
    if fmt == "sacct":
        write_sacct(trace, out)
    elif fmt == "xdmod":
        write_sacct(trace, out, xdmod=True)
    elif fmt == "swf":
        write_swf(trace, out)
        return [out, labels_path(out)]
    elif fmt == "json":
        write_json(trace, out)
    else:
        raise ValueError(fmt)
    return [out, write_labels(trace, out)]


def calibration_note(trace: Trace) -> dict[str, Any]:
    return {
        "start": trace.start.astimezone(UTC).isoformat(),
        "end": trace.end.astimezone(UTC).isoformat(),
        "users": len(trace.users),
        "agent_users": sum(u.agent for u in trace.users),
        "records": len(trace.jobs),
        **trace.calibration,
        "generated_at": datetime.now(tz=UTC).isoformat(timespec="seconds"),
    }
