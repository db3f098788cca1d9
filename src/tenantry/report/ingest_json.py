"""Read ``sacct --json`` output (Slurm 22.05 and the 23.02+ shapes).

Shapes differ between releases: 22.05 gives plain numbers and
``state.current`` as a string; 23.02+ wraps numbers as
``{"set": true, "infinite": false, "number": N}`` and gives ``state.current``
as a list. :func:`num` and :func:`state_of` absorb both. Steps are ignored;
one row per job allocation, as with ``sacct --allocations``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from tenantry.core.errors import IngestError
from tenantry.report.files import read_bytes
from tenantry.report.schema import JOB_SCHEMA, Dataset, IngestStats, Unreadable, conform


def num(value: Any) -> int | None:
    """A number from a plain value or a ``{"set", "infinite", "number"}`` wrapper."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


def state_of(job: dict[str, Any]) -> str:
    state = job.get("state")
    current: Any = state.get("current") if isinstance(state, dict) else state
    if isinstance(current, list):
        current = current[0] if current else ""
    return str(current or "").split(" ")[0].upper()


def _ts(value: Any) -> datetime | None:
    n = num(value)
    if n is None or n <= 0:
        return None
    return datetime.fromtimestamp(n, tz=UTC)


def _tres_count(items: Any, kind: str, name: str | None = None) -> int | None:
    if not isinstance(items, list):
        return None
    total: int | None = None
    for item in items:
        if not isinstance(item, dict) or item.get("type") != kind:
            continue
        if name is not None and (item.get("name") or "") != name:
            continue
        total = (total or 0) + (num(item.get("count")) or 0)
    return total


def gpus_of(tres: Any) -> int:
    """Allocated GPUs: the untyped ``gres/gpu`` entry, else the sum of typed ones."""
    allocated = tres.get("allocated") if isinstance(tres, dict) else None
    if not isinstance(allocated, list):
        return 0
    untyped = _tres_count(allocated, "gres", "gpu")
    if untyped is not None:
        return untyped
    typed = 0
    for item in allocated:
        if isinstance(item, dict) and item.get("type") == "gres":
            name = str(item.get("name") or "")
            if name.startswith("gpu:"):
                typed += num(item.get("count")) or 0
    return typed


def job_id_of(job: dict[str, Any]) -> tuple[str, str]:
    """(display job id like ``12_3`` or ``12+1``, submission base id)."""
    jid = num(job.get("job_id")) or 0
    array = job.get("array") or {}
    het = job.get("het") or {}
    master = num(array.get("job_id")) or 0
    task = num(array.get("task_id"))
    het_id = num(het.get("job_id")) or 0
    het_off = num(het.get("job_offset"))
    if master and task is not None:
        return f"{master}_{task}", str(master)
    if master and array.get("task"):
        return f"{master}_[{array.get('task')}]", str(master)
    if het_id and het_off is not None:
        return f"{het_id}+{het_off}", str(het_id)
    return str(jid), str(jid)


def row_of(job: dict[str, Any], source: str) -> dict[str, Any]:
    time = job.get("time") or {}
    comment = job.get("comment")
    admin = job.get("admin_comment")
    if isinstance(comment, dict):
        admin = comment.get("administrator") or admin
        comment = comment.get("job")
    assoc = job.get("association") or {}
    display, base = job_id_of(job)
    cpus = _tres_count((job.get("tres") or {}).get("allocated"), "cpu")
    if cpus is None:
        cpus = num((job.get("required") or {}).get("CPUs")) or 0
    exit_code = job.get("exit_code") or {}
    rc = num(exit_code.get("return_code")) if isinstance(exit_code, dict) else None
    return {
        "source": source,
        "cluster": job.get("cluster"),
        "job_id": display,
        "submission_id": f"{job.get('cluster') or ''}:{base}",
        "user": job.get("user") or assoc.get("user"),
        "account": job.get("account") or assoc.get("account"),
        "partition": job.get("partition"),
        "name": job.get("name"),
        "state": state_of(job),
        "submit": _ts(time.get("submission")),
        "start": _ts(time.get("start")),
        "end": _ts(time.get("end")),
        "elapsed_s": num(time.get("elapsed")) or 0,
        "cpus": cpus,
        "gpus": gpus_of(job.get("tres")),
        "exit_code": None if rc is None else str(rc),
        "comment": comment,
        "admin_comment": admin,
        "submit_line": job.get("submit_line"),
        "env": None,
    }


def parse_jobs(doc: Any, source: str) -> tuple[list[dict[str, Any]], list[Unreadable]]:
    """Rows from a decoded ``sacct --json`` document (pure)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("jobs"), list):
        raise IngestError(f"{source}: not sacct --json output (no 'jobs' list)")
    rows, lost = [], []
    for i, job in enumerate(doc["jobs"]):
        try:
            rows.append(row_of(job, source))
        except (AttributeError, TypeError, ValueError) as exc:
            lost.append(Unreadable(source, i + 1, f"job #{i + 1}: {exc}", str(job)[:200]))
    return rows, lost


def read_json(path: str | Path) -> Dataset:
    p = Path(path)
    try:
        doc = json.loads(read_bytes(p))
    except (OSError, ValueError) as exc:
        raise IngestError(f"cannot read {p} as JSON: {exc}") from exc
    rows, lost = parse_jobs(doc, p.name)
    stats = IngestStats(source=str(p), kind="sacct-json", records=len(rows), unreadable=lost)
    errs = doc.get("errors") or []
    if errs:
        stats.notes.append(f"sacct reported {len(errs)} error(s): {str(errs)[:200]}")
    jobs = conform(pl.DataFrame(rows, schema=JOB_SCHEMA), JOB_SCHEMA) if rows else None
    return Dataset(jobs=jobs, stats=[stats]) if jobs is not None else Dataset(stats=[stats])
