"""Pure formatters: Tenantry jobs printed as ``squeue``, ``sacct`` and ``scontrol`` would.

Agents parse these outputs with habits learnt on real Slurm, so the layouts
follow Slurm 22.05's (recorded in ``tests/fixtures/slurm/22.05``): squeue's
``%[.][size]type`` format language and default columns, ``squeue --json``'s
job keys, sacct's fixed-width table and ``--parsable2``, and scontrol's
``Key=Value`` records. Standard library only.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tenantry.core.models import AgentProduct, Principal

__all__ = [
    "SACCT_DEFAULT",
    "SQUEUE_DEFAULT",
    "ShimJob",
    "format_sacct",
    "format_scontrol_job",
    "format_squeue",
    "squeue_json",
]

SQUEUE_DEFAULT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SACCT_DEFAULT = ("JobID", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode")

SHORT = {
    "PENDING": "PD",
    "RUNNING": "R",
    "SUSPENDED": "S",
    "COMPLETED": "CD",
    "CANCELLED": "CA",
    "FAILED": "F",
    "TIMEOUT": "TO",
    "NODE_FAIL": "NF",
    "OUT_OF_MEMORY": "OOM",
    "PREEMPTED": "PR",
    "BOOT_FAIL": "BF",
    "DEADLINE": "DL",
    "REQUEUED": "RQ",
    "LOST": "F",
    "UNKNOWN": "PD",
}


@dataclass(frozen=True, slots=True)
class ShimJob:
    """What the formatters need of a job, from a Tenantry Job dict or a Slurm record."""

    job_id: str  # the scheduler's id (what agents see from sbatch)
    name: str
    user: str
    uid: int
    state: str  # JobState value
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    time_limit_s: float | None = None
    partition: str = ""
    account: str = ""
    cpus: int = 1
    mem_mb: int | None = None
    nodes: str = ""
    cwd: str = ""
    stdout: str = ""
    stderr: str = ""
    comment: str = ""
    command: str = ""
    tenantry_id: str = ""

    @classmethod
    def from_job(cls, d: Mapping[str, Any]) -> ShimJob:
        """From ``Job.to_dict()`` as the daemon's ``jobs.*`` ops return it."""
        res = d.get("resources") or {}
        principal = str(d.get("principal") or "")
        user, _, rest = principal.partition("/")
        agent, _, session = rest.partition("/")
        comment = ""
        if agent:
            from tenantry.core.attribution import encode

            try:
                product = AgentProduct(agent)
            except ValueError:
                product = AgentProduct.OTHER_AGENT
            who = Principal(
                uid=int(d.get("uid", -1)),
                user=user,
                agent=product,
                session="" if session == "-" else session,
            )
            comment = encode(who, str(d.get("id", "")))
        extra = d.get("extra") or {}
        return cls(
            job_id=str(d.get("backend_id") or d.get("id") or ""),
            name=str(d.get("name") or ""),
            user=user,
            uid=int(d.get("uid", -1)),
            state=str(d.get("state") or "UNKNOWN"),
            reason=str(d.get("reason") or ""),
            exit_code=d.get("exit_code"),
            submit_time=d.get("submitted_at") or None,
            start_time=d.get("started_at"),
            end_time=d.get("ended_at"),
            time_limit_s=res.get("time_s"),
            partition=str(res.get("partition") or extra.get("partition") or ""),
            account=str(res.get("account") or ""),
            cpus=int(res.get("cpus") or 1),
            mem_mb=res.get("mem_mb"),
            nodes=str(d.get("nodes") or extra.get("nodes") or ""),
            cwd=str(d.get("cwd") or ""),
            stdout=str(d.get("output") or ""),
            stderr=str(d.get("error") or d.get("output") or ""),
            comment=comment,
            tenantry_id=str(d.get("id") or ""),
        )


# --- small renderings ----------------------------------------------------------


def _ts(t: float | None, none: str = "Unknown") -> str:
    if not t:
        return none
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")


def _clock(seconds: float | None, *, short: bool) -> str:
    """Slurm durations: squeue ``M:SS``/``H:MM:SS``; others ``HH:MM:SS``; days ``D-``."""
    if seconds is None:
        return "INVALID" if short else "Unknown"
    if seconds == math.inf:
        return "UNLIMITED"
    s = max(0, int(seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    mins, secs = divmod(s, 60)
    if days:
        return f"{days}-{hours:02d}:{mins:02d}:{secs:02d}"
    if short and not hours:
        return f"{mins}:{secs:02d}"
    if short:
        return f"{hours}:{mins:02d}:{secs:02d}"
    return f"{hours:02d}:{mins:02d}:{secs:02d}"


def _elapsed(job: ShimJob, now: float) -> float:
    if not job.start_time:
        return 0.0
    return max(0.0, (job.end_time or now) - job.start_time)


def _exit(job: ShimJob) -> str:
    return f"{job.exit_code or 0}:{job.signal or 0}"


# --- squeue -------------------------------------------------------------------

_FIELD = re.compile(r"%(\.)?(\d+)?([a-zA-Z%])")


def _squeue_value(job: ShimJob, key: str, now: float) -> str:
    pending = job.state == "PENDING"
    limit = _clock(job.time_limit_s, short=True) if job.time_limit_s else "UNLIMITED"
    values = {
        "i": job.job_id,
        "A": job.job_id.split("_")[0],
        "j": job.name,
        "u": job.user,
        "U": str(job.uid),
        "t": SHORT.get(job.state, "PD"),
        "T": job.state,
        "P": job.partition,
        "a": job.account,
        "M": _clock(_elapsed(job, now), short=True),
        "l": limit,
        "L": _clock(max(0.0, (job.time_limit_s or 0) - _elapsed(job, now)), short=True)
        if job.time_limit_s and not pending
        else limit,
        "D": "1",
        "C": str(job.cpus),
        "m": f"{job.mem_mb}M" if job.mem_mb else "0",
        "r": job.reason or "None",
        "R": f"({job.reason or 'None'})" if pending else job.nodes,
        "N": "" if pending else job.nodes,
        "V": _ts(job.submit_time, "N/A"),
        "S": _ts(job.start_time, "N/A"),
        "e": _ts(job.end_time, "N/A"),
        "Z": job.cwd,
        "k": job.comment,
        "o": job.command,
        "q": "normal",
        "%": "%",
    }
    return values.get(key, "")


def _fit(value: str, size: str | None, right: bool) -> str:
    if not size:
        return value
    n = int(size)
    value = value[:n]
    return value.rjust(n) if right else value.ljust(n)


_HEADERS = {
    "i": "JOBID",
    "A": "JOBID",
    "j": "NAME",
    "u": "USER",
    "U": "UID",
    "t": "ST",
    "T": "STATE",
    "P": "PARTITION",
    "a": "ACCOUNT",
    "M": "TIME",
    "l": "TIME_LIMIT",
    "L": "TIME_LEFT",
    "D": "NODES",
    "C": "CPUS",
    "m": "MIN_MEMORY",
    "r": "REASON",
    "R": "NODELIST(REASON)",
    "N": "NODELIST",
    "V": "SUBMIT_TIME",
    "S": "START_TIME",
    "e": "END_TIME",
    "Z": "WORK_DIR",
    "k": "COMMENT",
    "o": "COMMAND",
    "q": "QOS",
}


def format_squeue(
    jobs: Iterable[ShimJob],
    fmt: str = SQUEUE_DEFAULT,
    *,
    header: bool = True,
    now: float | None = None,
) -> str:
    """Rows as ``squeue -o FMT`` prints them (``%.18i`` right-justified, truncated)."""
    now = time.time() if now is None else now

    def render(pick: Any) -> str:
        out: list[str] = []
        pos = 0
        for m in _FIELD.finditer(fmt):
            out.append(fmt[pos : m.start()])
            right, size, key = m.groups()
            out.append(_fit(pick(key), size, bool(right)))
            pos = m.end()
        out.append(fmt[pos:])
        return "".join(out)

    lines = [render(lambda k: _HEADERS.get(k, k.upper()))] if header else []
    lines += [render(lambda k, j=j: _squeue_value(j, k, now)) for j in jobs]
    return "".join(line + "\n" for line in lines)


def squeue_json(jobs: Iterable[ShimJob], *, now: float | None = None) -> str:
    """``squeue --json`` in Slurm 22.05's shape (``openapi/v0.0.38``), core keys only."""
    now = time.time() if now is None else now
    out = []
    for j in jobs:
        master, _, task = j.job_id.partition("_")
        status = 0
        if j.exit_code is not None:
            status = (j.exit_code & 0xFF) << 8
        if j.signal:
            status = j.signal & 0x7F
        out.append(
            {
                "account": j.account,
                "array_job_id": int(master) if task and master.isdigit() else 0,
                "array_task_id": int(task) if task.isdigit() else None,
                "comment": j.comment,
                "command": j.command,
                "cpus": j.cpus,
                "current_working_directory": j.cwd,
                "end_time": int(j.end_time or 0),
                "exit_code": status,
                "job_id": int(master) if master.isdigit() else master,
                "job_state": j.state if j.state in SHORT and j.state != "LOST" else "FAILED",
                "name": j.name,
                "node_count": 1,
                "nodes": j.nodes,
                "partition": j.partition,
                "standard_error": j.stderr,
                "standard_output": j.stdout,
                "start_time": int(j.start_time or 0),
                "state_reason": j.reason or "None",
                "submit_time": int(j.submit_time or 0),
                "time_limit": math.ceil(j.time_limit_s / 60)
                if j.time_limit_s and j.time_limit_s != math.inf
                else None,
                "user_id": j.uid,
                "user_name": j.user,
            }
        )
    doc = {
        "meta": {
            "plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
            "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"},
            "tenantry": {"served_from": "cache", "generated": int(now)},
        },
        "errors": [],
        "jobs": out,
    }
    return json.dumps(doc, indent=2) + "\n"


# --- sacct --------------------------------------------------------------------

_SACCT_WIDTH = {"JobID": 12, "JobIDRaw": 12, "ExitCode": 8, "DerivedExitCode": 15}
_SACCT_WIDE = {"Submit": 19, "Start": 19, "End": 19, "Eligible": 19, "WorkDir": 20}
_SACCT_LEFT = {"JobID", "JobIDRaw"}


def _sacct_value(job: ShimJob, field: str, now: float) -> str:
    key = field.lower()
    limit = job.time_limit_s
    values: dict[str, str] = {
        "jobid": job.job_id,
        "jobidraw": job.job_id,
        "jobname": job.name,
        "user": job.user,
        "uid": str(job.uid),
        "account": job.account,
        "partition": job.partition,
        "qos": "normal",
        "state": job.state if job.state != "LOST" else "FAILED",
        "exitcode": _exit(job),
        "derivedexitcode": "0:0",
        "submit": _ts(job.submit_time),
        "start": _ts(job.start_time),
        "end": _ts(job.end_time),
        "elapsed": _clock(_elapsed(job, now), short=False),
        "elapsedraw": str(int(_elapsed(job, now))),
        "timelimit": _clock(limit, short=False) if limit else "UNLIMITED",
        "timelimitraw": str(math.ceil(limit / 60)) if limit and limit != math.inf else "UNLIMITED",
        "alloccpus": str(job.cpus) if job.start_time else "0",
        "ncpus": str(job.cpus),
        "reqcpus": str(job.cpus),
        "nnodes": "1",
        "nodelist": job.nodes or "None assigned",
        "reqmem": f"{job.mem_mb}M" if job.mem_mb else "",
        "reason": job.reason or "None",
        "comment": job.comment,
        "workdir": job.cwd,
        "cluster": "",
    }
    return values.get(key, "")


def _split_field(spec: str) -> tuple[str, int | None]:
    name, _, width = spec.partition("%")
    return name, int(width) if width.isdigit() else None


def format_sacct(
    jobs: Iterable[ShimJob],
    fields: Sequence[str] = SACCT_DEFAULT,
    *,
    parsable: str = "",  # "" table, "2" --parsable2, "1" --parsable
    header: bool = True,
    now: float | None = None,
) -> str:
    """Allocation rows as ``sacct`` prints them (steps are not known to Tenantry)."""
    now = time.time() if now is None else now
    specs = [_split_field(f) for f in fields]
    rows = [[_sacct_value(j, name, now) for name, _ in specs] for j in jobs]
    names = [name for name, _ in specs]
    lines: list[str] = []
    if parsable:
        end = "|" if parsable == "1" else ""
        if header:
            lines.append("|".join(names) + end)
        lines += ["|".join(r) + end for r in rows]
    else:
        widths = [w or _SACCT_WIDTH.get(n) or _SACCT_WIDE.get(n) or 10 for n, w in specs]

        def cell(value: str, name: str, width: int) -> str:
            if len(value) > width:
                value = value[: width - 1] + "+"
            return value.ljust(width) if name in _SACCT_LEFT else value.rjust(width)

        if header:
            lines.append(
                " ".join(
                    n.ljust(w) if n in _SACCT_LEFT else n.rjust(w)
                    for n, w in zip(names, widths, strict=True)
                )
                + " "
            )
            lines.append(" ".join("-" * w for w in widths) + " ")
        for r in rows:
            lines.append(
                " ".join(cell(v, n, w) for v, n, w in zip(r, names, widths, strict=True)) + " "
            )
    return "".join(line + "\n" for line in lines)


# --- scontrol show job ----------------------------------------------------------------


def _scontrol_lines(job: ShimJob, now: float) -> list[list[tuple[str, str]]]:
    limit = _clock(job.time_limit_s, short=False) if job.time_limit_s else "UNLIMITED"
    run = _clock(_elapsed(job, now), short=False)
    nodes = "" if job.state == "PENDING" else job.nodes
    return [
        [("JobId", job.job_id), ("JobName", job.name)],
        [("UserId", f"{job.user}({job.uid})"), ("GroupId", f"{job.user}({job.uid})")],
        [("Account", job.account or "(null)"), ("QOS", "normal")],
        [("JobState", job.state), ("Reason", job.reason or "None"), ("Dependency", "(null)")],
        [("Requeue", "1"), ("Restarts", "0"), ("BatchFlag", "1"), ("ExitCode", _exit(job))],
        [("RunTime", run), ("TimeLimit", limit), ("TimeMin", "N/A")],
        [("SubmitTime", _ts(job.submit_time)), ("EligibleTime", _ts(job.submit_time))],
        [("StartTime", _ts(job.start_time)), ("EndTime", _ts(job.end_time)), ("Deadline", "N/A")],
        [("Partition", job.partition)],
        [("NodeList", nodes)],
        [
            ("NumNodes", "1"),
            ("NumCPUs", str(job.cpus)),
            ("NumTasks", "1"),
            ("CPUs/Task", str(job.cpus)),
        ],
        [("Command", job.command)],
        [("WorkDir", job.cwd)],
        [("Comment", job.comment)],
        [("StdErr", job.stderr)],
        [("StdIn", "/dev/null")],
        [("StdOut", job.stdout)],
    ]


def format_scontrol_job(
    jobs: Iterable[ShimJob], *, oneliner: bool = False, now: float | None = None
) -> str:
    """Records as ``scontrol show job [-o]`` prints them (a subset of its keys, same order)."""
    now = time.time() if now is None else now
    out: list[str] = []
    for job in jobs:
        lines = _scontrol_lines(job, now)
        if job.comment == "":
            lines = [ln for ln in lines if ln[0][0] != "Comment"]
        if oneliner:
            out.append(" ".join(f"{k}={v}" for line in lines for k, v in line) + "\n")
        else:
            text = lines[0]
            body = " ".join(f"{k}={v}" for k, v in text) + "\n"
            body += "".join(
                "   " + " ".join(f"{k}={v}" for k, v in line) + "\n" for line in lines[1:]
            )
            out.append(body + "   \n\n")
    return "".join(out)
