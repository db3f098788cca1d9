"""Read Slurm's job completion log (``JobCompType=jobcomp/filetxt``).

slurmctld appends one line per finished job to ``JobCompLoc``
(``/var/log/slurm_jobcomp.log`` by default)::

    JobId=42 UserId=alice(1000) GroupId=alice(1000) Name=train JobState=COMPLETED
    Partition=gpu TimeLimit=60 StartTime=2026-12-06T21:18:34 EndTime=... NodeList=n1
    NodeCnt=1 ProcCnt=4 WorkDir=/home/alice ReservationName= Tres=cpu=4,mem=8G,node=1
    Account=chem QOS=normal WcKey= Cluster=c1 SubmitTime=... EligibleTime=...
    [ArrayJobId=41 ArrayTaskId=1] [HetJobId=40 HetJobOffset=0] DerivedExitCode=0:0
    ExitCode=0:0

(one line, in this order; the array and heterogeneous-job pairs only where they
apply). Times are slurmctld's local time, ``Unknown`` when unset. It is a log
many clusters keep beside (or instead of) slurmdbd. The reader splits each line
at the keys it knows, so a job name or a working directory holding spaces stays
whole, and hands the fields to the sacct reader's normalization under sacct's
names: the same job table, the same time zone handling. The log has no job
comment and no submit line, so jobs are attributed by behaviour only (the
input's notes say so).
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from tenantry.report import ingest_sacct
from tenantry.report.files import read_text
from tenantry.report.schema import Dataset, IngestStats, Unreadable

# the keys of a record, in the order slurmctld writes them (and sacct's name for each)
KEYS = {
    "JobId": "jobidraw",
    "UserId": "user",
    "GroupId": "group",
    "Name": "jobname",
    "JobState": "state",
    "Partition": "partition",
    "TimeLimit": "timelimit",
    "StartTime": "start",
    "EndTime": "end",
    "NodeList": "nodelist",
    "NodeCnt": "nnodes",
    "ProcCnt": "alloccpus",
    "WorkDir": "workdir",
    "ReservationName": "reservation",
    "Tres": "alloctres",
    "Gres": "gres",
    "Account": "account",
    "QOS": "qos",
    "WcKey": "wckey",
    "Cluster": "cluster",
    "SubmitTime": "submit",
    "EligibleTime": "eligible",
    "ArrayJobId": "arrayjobid",
    "ArrayTaskId": "arraytaskid",
    "HetJobId": "hetjobid",
    "HetJobOffset": "hetjoboffset",
    "DerivedExitCode": "derivedexitcode",
    "ExitCode": "exitcode",
}
_SPLIT = re.compile(r"(?:^| )(" + "|".join(KEYS) + r")=")
_START = re.compile(r"^JobId=\d+ UserId=\S")
_OWNER = re.compile(r"^(?P<name>.*?)\((?P<id>\d+)\)$")
_TS = "%Y-%m-%dT%H:%M:%S"


def looks_like(head: str) -> bool:
    """True when the first non-empty line is a job completion record."""
    for line in head.splitlines():
        if line.strip():
            return bool(_START.match(line)) and " JobState=" in line
    return False


def parse_line(line: str) -> dict[str, str] | None:
    """One record's fields under sacct's names, or None when it is not a record."""
    line = line.rstrip("\r\n")
    if not _START.match(line):
        return None
    marks = list(_SPLIT.finditer(line))
    out: dict[str, str] = {}
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        end = nxt.start() if nxt is not None else len(line)
        out.setdefault(KEYS[m.group(1)], line[m.end() : end].strip())
    if "state" not in out:
        return None
    for key, idcol in (("user", "uid"), ("group", "gid")):
        owner = _OWNER.match(out.get(key, ""))
        if owner:
            out[key], out[idcol] = owner.group("name"), owner.group("id")
    out["jobid"] = _job_id(out)
    for key in ("start", "end", "submit", "eligible"):
        if out.get(key) in ("Unknown", "None", ""):
            out[key] = ""
    if out.get("nodelist") in ("(null)", ""):  # never allocated (cancelled while pending)
        out["nodelist"] = "None assigned"
    out["elapsedraw"] = _elapsed(out.get("start", ""), out.get("end", ""))
    return out


def _job_id(rec: dict[str, str]) -> str:
    """sacct's JobID: ``ARRAY_TASK`` for an array task, ``HET+OFFSET`` for a component."""
    if rec.get("arrayjobid", "0") not in ("", "0"):
        return f"{rec['arrayjobid']}_{rec.get('arraytaskid', '0')}"
    if rec.get("hetjobid", "0") not in ("", "0"):
        return f"{rec['hetjobid']}+{rec.get('hetjoboffset', '0')}"
    return rec.get("jobidraw", "")


def _elapsed(start: str, end: str) -> str:
    """Seconds from start to end (both local wall-clock times), '' when either is unset."""
    try:
        secs = (datetime.strptime(end, _TS) - datetime.strptime(start, _TS)).total_seconds()
    except ValueError:
        return ""
    return str(max(int(secs), 0))


def read_jobcomp(path: str | Path, *, tz: str | None = None) -> Dataset:
    """Ingest one job completion log into a :class:`Dataset`."""
    p = Path(path)
    stats = IngestStats(source=str(p), kind="jobcomp")
    rows: list[dict[str, str]] = []
    for no, line in enumerate(read_text(p).splitlines(), start=1):
        if not line.strip():
            continue
        rec = parse_line(line)
        if rec is None:
            stats.unreadable.append(
                Unreadable(source=str(p), line=no, reason="not a job record", text=line[:200])
            )
            continue
        rows.append(rec)
    return ingest_sacct.from_rows(
        rows,
        stats,
        tz,
        "a job completion log has no job comments or submit lines: Tenantry's tags are not"
        " in it, so agents are told apart by behaviour only",
    )
