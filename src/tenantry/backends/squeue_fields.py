"""``squeue`` of named jobs in its own columns, and the parser of what it prints.

Slurm 22.05's ``squeue --json`` ignores every filter (``--me``, ``--jobs``,
``--states``): it prints every user's jobs, finished ones included, so a daemon
asking after its own few jobs would read and parse the whole cluster's queue on
each poll (megabytes on a busy machine). Its column output honours the filters.
Each column is printed whole (``:0``), followed by a unit separator; a job's
record ends with a record separator, so a newline in a comment does not split it.
A record whose free text holds a separator itself does not parse into the right
number of columns and is left out (its job is then looked up in ``sacct``).

The same columns of every user's jobs are the facility service's snapshot
(``argv_all``): about a twentieth of the JSON's bytes, and squeue spends a
tenth of the CPU printing them. Timestamps are asked for as epoch seconds
(``SLURM_TIME_FORMAT=%s`` in the client's environment: ``TIME_ENV``); a local
ISO time is read too.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from tenantry.backends.slurm_parse import SlurmJob, exit_of, map_state, parse_time, state_name

FIELDS = (
    "JobID",
    "ArrayJobID",
    "ArrayTaskID",
    "State",
    "exit_code",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "Reason",
    "Partition",
    "NodeList",
    "UserName",
    "Account",
    "Name",
    "Comment",
)
UNIT, RECORD = "\x1f", "\x1e"
TIME_ENV = {"SLURM_TIME_FORMAT": "%s"}
MAX_IDS = 200  # more ids than this: the user's whole queue (``--me``) instead of a list
# squeue's word for a job id it does not know, when it knows none of those asked for
UNKNOWN_IDS = "invalid job id specified"
_UNSET = frozenset({"", "N/A", "(null)", "None", "Unknown"})
_NO_TEXT = frozenset({"", "(null)"})  # free text (a name, a comment) may be "None"


def client_env() -> dict[str, str]:
    """This process's environment with ``TIME_ENV``: what ``argv``'s squeue runs in."""
    return {**os.environ, **TIME_ENV}


def format_option() -> str:
    """The ``--Format`` value: every field whole, separated, the record closed."""
    last = len(FIELDS) - 1
    return ",".join(f"{f}:0{RECORD if i == last else UNIT}" for i, f in enumerate(FIELDS))


def argv(ids: Sequence[str]) -> list[str]:
    """``squeue`` of the caller's own jobs among ``ids``, in any state Slurm still holds,
    hidden partitions too (as ``--json`` lists them)."""
    out = ["squeue", "--noheader", "--me", "--all", "--states=all"]
    if 0 < len(ids) <= MAX_IDS:
        out.append(f"--jobs={','.join(ids)}")
    out.append(f"--Format={format_option()}")
    return out


def argv_all() -> list[str]:
    """``squeue`` of every user's jobs in any state Slurm still holds, hidden partitions
    too (what the facility service's poller reads once per interval)."""
    return ["squeue", "--noheader", "--all", "--states=all", f"--Format={format_option()}"]


def _text(value: str, unset: frozenset[str] = _UNSET) -> str:
    v = value.strip()
    return "" if v in unset else v


def _time(value: str) -> float | None:
    v = value.strip()
    if v.isdigit():
        n = int(v)
        return float(n) if n > 0 else None
    return parse_time(v)


def _job(row: dict[str, str]) -> SlurmJob:
    raw_id = row["JobID"].strip()
    task = _text(row["ArrayTaskID"]).strip("[]")
    array_id = row["ArrayJobID"].strip() if task else ""
    if array_id and task.isdigit():
        job_id = f"{array_id}_{task}"
    elif array_id:
        job_id = f"{array_id}_[{task}]"
    else:
        job_id = raw_id
    raw_state = state_name(row["State"])
    state = map_state(raw_state)
    code = row["exit_code"].strip()
    exit_code, signal = exit_of(int(code)) if code.isdigit() else (None, None)
    return SlurmJob(
        job_id=job_id,
        raw_state=raw_state,
        state=state,
        array_job_id=array_id,
        array_task=task if array_id else "",
        name=_text(row["Name"], _NO_TEXT),
        partition=_text(row["Partition"]),
        reason=_text(row["Reason"]),
        exit_code=exit_code,
        signal=signal,
        submit_time=_time(row["SubmitTime"]),
        start_time=_time(row["StartTime"]),
        end_time=_time(row["EndTime"]) if state.terminal else None,
        nodes=_text(row["NodeList"]),
        user=_text(row["UserName"]),
        account=_text(row["Account"]),
        comment=_text(row["Comment"], _NO_TEXT),
        extra={"job_id_raw": raw_id},
    )


def parse(text: str) -> list[SlurmJob]:
    """The jobs of ``argv``'s output (records that do not parse are left out)."""
    jobs: list[SlurmJob] = []
    for record in text.split(RECORD):
        parts = record.split(UNIT)
        # whatever precedes the record on its first line's start (a newline, a
        # "CLUSTER: name" line of a multi-cluster listing) is not the job id
        parts[0] = parts[0].rsplit("\n", 1)[-1].strip()
        if len(parts) != len(FIELDS) or not parts[0]:
            continue
        jobs.append(_job(dict(zip(FIELDS, parts, strict=True))))
    return jobs
