"""Tell what each input is and load them all into one :class:`Dataset`.

Inputs are combined honestly:

- a job read twice (the same dump given twice, overlapping dumps) is kept
  once: a record whose cluster + job id + submit time was already read from an
  earlier input is dropped and counted in that input's ``duplicates``;
- each input keeps its namespace (the sacct ``Cluster``, the SWF
  ``Computer``/``Installation`` header, else the file name): when the jobs come
  from more than one namespace, users become ``namespace/user`` so users and
  job ids of different clusters never merge;
- reading no records at all is an error, with what was unreadable as a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from tenantry.core.errors import IngestError
from tenantry.report import (
    ingest_jobcomp,
    ingest_json,
    ingest_pbs,
    ingest_sacct,
    ingest_swf,
    ingest_telemetry,
    ingest_transcripts,
)
from tenantry.report.files import read_bytes
from tenantry.report.schema import Dataset

KINDS = (
    "auto", "sacct", "json", "swf", "jobcomp", "pbs", "telemetry", *ingest_transcripts.KINDS
)  # fmt: skip
Progress = Callable[[int], None]


def sniff(path: Path) -> str:
    """The kind of an input file from its first bytes."""
    head = read_bytes(path, 65536)
    if ingest_telemetry.looks_like(head):
        return "telemetry"
    text = head.decode("utf-8", errors="replace")
    transcript = ingest_transcripts.sniff(text)
    if transcript is not None:
        return transcript
    if text.lstrip().startswith("{"):
        return "json"
    if ingest_jobcomp.looks_like(text):
        return "jobcomp"
    if ingest_pbs.looks_like(text):
        return "pbs"
    if ingest_sacct.looks_like(text):
        return "sacct"
    if ingest_swf.looks_like(text):
        return "swf"
    raise IngestError(
        f"{path}: not a format the report reads",
        hint="give a sacct --parsable2 (or --parsable) dump, sacct --json output, Slurm's "
        "job completion log (jobcomp/filetxt), a PBS accounting log, an SWF trace, a "
        "Tenantry store (tenantry.db), an agent transcript (Claude Code, Codex, Gemini CLI) "
        "or a timestamped shell history; force one with --input-format",
    )


def load(
    paths: Sequence[str | Path],
    *,
    kind: str = "auto",
    tz: str | None = None,
    local_tz: str | None = None,
    fields: list[str] | None = None,
    progress: Progress | None = None,
    require_records: bool = True,
) -> Dataset:
    data = Dataset()
    heights: list[int] = []
    for raw in paths:
        p = Path(raw)
        if not p.is_file():
            raise IngestError(f"{p}: no such file")
        k = sniff(p) if kind == "auto" else kind
        if k == "sacct":
            part = ingest_sacct.read_sacct(p, tz=tz, fields=fields, progress=progress)
        elif k == "json":
            part = ingest_json.read_json(p)
        elif k == "swf":
            part = ingest_swf.read_swf(p, tz=tz)
        elif k == "jobcomp":
            part = ingest_jobcomp.read_jobcomp(p, tz=tz)
        elif k == "pbs":
            part = ingest_pbs.read_pbs(p, tz=tz)
        elif k == "telemetry":
            part = ingest_telemetry.read_telemetry(p)
        elif k in ingest_transcripts.KINDS:
            acts, st = ingest_transcripts.read(p, k, local_tz or tz or "UTC")
            part = Dataset(stats=[st], actions=acts)
        else:
            raise IngestError(f"unknown input format {k!r}", hint=f"one of {', '.join(KINDS)}")
        if k != "sacct" and progress is not None:
            progress(p.stat().st_size)
        if not part.jobs.is_empty():
            part.jobs = part.jobs.with_columns(
                pl.col("cluster").fill_null("").replace("", p.name).alias("cluster")
            )
            for st in part.stats:
                st.namespace = st.namespace or ", ".join(sorted(part.jobs["cluster"].unique()))
        heights.append(part.jobs.height)
        data.extend(part)
    combine(data, heights)
    if data.actions is not None:
        before = data.actions.height
        data.actions = data.actions.unique("key", keep="first", maintain_order=True)
        data.combined["duplicate_actions_dropped"] = before - data.actions.height
    no_actions = data.actions is None or data.actions.is_empty()
    if (
        require_records
        and data.jobs.is_empty()
        and data.commands.is_empty()
        and data.sessions.is_empty()
        and no_actions
    ):
        lost = sum(len(s.unreadable) for s in data.stats)
        first = next((u for s in data.stats for u in s.unreadable), None)
        where = f"; first: {first.source} line {first.line}: {first.reason}" if first else ""
        raise IngestError(
            f"read no records from {len(data.stats)} input(s) ({lost} unreadable line(s){where})",
            hint="check the format (--input-format), the header or --fields, and the dump's "
            "time range (sacct --starttime/--endtime)",
        )
    return data


KEY = ("cluster", "job_id", "submit")


def combine(data: Dataset, heights: list[int]) -> None:
    """Drop records already read from an earlier input; namespace users per cluster.

    ``heights[i]`` is how many job rows input ``i`` added (rows are in input order).
    """
    jobs = data.jobs
    n_inputs = len(heights)
    if jobs.is_empty():
        data.combined = {"inputs": n_inputs, "namespaces": [], "duplicates_dropped": 0}
        return
    idx = pl.concat(
        [pl.repeat(i, h, dtype=pl.Int32, eager=True) for i, h in enumerate(heights) if h]
    )
    jobs = jobs.with_columns(idx.alias("_in"))
    dup = pl.col("_in") > pl.col("_in").min().over(list(KEY)) if n_inputs > 1 else pl.lit(False)
    dropped = jobs.filter(dup).group_by("_in").len()
    per = {int(i): int(n) for i, n in dropped.iter_rows()}
    for i, st in enumerate(data.stats[:n_inputs]):
        st.duplicates = per.get(i, 0)
    jobs = jobs.filter(~dup).drop("_in")
    namespaces = sorted(jobs["cluster"].unique().to_list())
    prefixed = len(namespaces) > 1
    if prefixed:
        jobs = jobs.with_columns(
            user=pl.col("cluster") + "/" + pl.col("user").fill_null("?"),
            submission_id=pl.col("cluster") + "|" + pl.col("submission_id"),
        )
    data.jobs = jobs
    data.combined = {
        "inputs": n_inputs,
        "namespaces": namespaces,
        "users_namespaced": prefixed,
        "duplicate_key": "cluster + job id + submit time",
        "duplicates_dropped": sum(per.values()),
        "note": (
            "users and job ids are kept apart per namespace (shown as namespace/user)"
            if prefixed
            else "one namespace: users are shown as they are"
        ),
    }
