"""Pure parsers of Slurm client output, and Slurm error text to Tenantry errors.

Nothing here runs a command: every function takes the text a client printed
and returns plain data, so each is tested on recorded real output
(``tests/fixtures/slurm/``). Two JSON shapes are understood:

- Slurm 22.05 (``openapi/v0.0.38``): states are strings, numbers plain
  (``null`` when unset), sacct times plain integers;
- Slurm 23.02 and later (``data_parser/v0.0.39+``): states are lists of
  flags (``["RUNNING"]``), most numbers are ``{"set", "infinite", "number"}``.

``number`` and ``state_name`` absorb the difference; the rest reads fields
both shapes share.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tenantry.core import errors
from tenantry.core.models import JobState

__all__ = [
    "SlurmJob",
    "aggregate_state",
    "error_from",
    "exit_of",
    "expand_path",
    "format_duration",
    "map_state",
    "number",
    "parse_duration",
    "parse_partitions",
    "parse_sacct_json",
    "parse_sacct_parsable",
    "parse_sbatch",
    "parse_scontrol",
    "parse_sinfo_json",
    "parse_squeue_json",
    "parse_time",
    "slurm_minutes",
    "state_name",
]


# --- values -------------------------------------------------------------------


def number(value: Any) -> int | float | None:
    """A Slurm number in either shape; None when unset, ``math.inf`` when infinite."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    if isinstance(value, Mapping):
        if value.get("infinite"):
            return math.inf
        if not value.get("set", True):
            return None
        inner = value.get("number")
        return inner if isinstance(inner, int | float) and not isinstance(inner, bool) else None
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _int(value: Any) -> int | None:
    n = number(value)
    if n is None or n == math.inf:
        return None
    return int(n)


def _epoch(value: Any) -> float | None:
    """A timestamp field; Slurm writes 0 for "not yet"."""
    n = number(value)
    if n is None or n == math.inf or n <= 0:
        return None
    return float(n)


def state_name(value: Any) -> str:
    """The base state of a job: ``"RUNNING"`` from a string or a list of flags."""
    if isinstance(value, str):
        # sacct text says e.g. "CANCELLED by 0"
        return value.split()[0].upper() if value.strip() else ""
    if isinstance(value, list | tuple):
        names = [str(v).upper() for v in value]
        for name in names:
            if name in _STATES:
                return name
        return names[0] if names else ""
    return ""


_STATES: dict[str, JobState] = {
    "PENDING": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "CONFIGURING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "SUSPENDED": JobState.SUSPENDED,
    "STOPPED": JobState.SUSPENDED,
    "COMPLETED": JobState.COMPLETED,
    "CANCELLED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "FAILED": JobState.FAILED,
    "SPECIAL_EXIT": JobState.FAILED,
    "TIMEOUT": JobState.TIMEOUT,
    "NODE_FAIL": JobState.NODE_FAIL,
    "OUT_OF_MEMORY": JobState.OUT_OF_MEMORY,
    "PREEMPTED": JobState.PREEMPTED,
    "BOOT_FAIL": JobState.BOOT_FAIL,
    "DEADLINE": JobState.DEADLINE,
    "REQUEUED": JobState.REQUEUED,
    "REQUEUE_FED": JobState.REQUEUED,
    "REQUEUE_HOLD": JobState.PENDING,
}

# sacct/squeue short codes (``%t``) for completeness.
_SHORT = {
    "PD": "PENDING",
    "R": "RUNNING",
    "CG": "COMPLETING",
    "CF": "CONFIGURING",
    "S": "SUSPENDED",
    "ST": "STOPPED",
    "CD": "COMPLETED",
    "CA": "CANCELLED",
    "F": "FAILED",
    "TO": "TIMEOUT",
    "NF": "NODE_FAIL",
    "OOM": "OUT_OF_MEMORY",
    "PR": "PREEMPTED",
    "BF": "BOOT_FAIL",
    "DL": "DEADLINE",
    "RQ": "REQUEUED",
    "RH": "REQUEUE_HOLD",
    "SE": "SPECIAL_EXIT",
    "SO": "STAGE_OUT",
    "RV": "REVOKED",
    "RS": "RESIZING",
    "SI": "SIGNALING",
}


def map_state(raw: Any) -> JobState:
    """Tenantry's state for a Slurm state (string, list of flags or short code)."""
    name = state_name(raw)
    name = _SHORT.get(name, name)
    return _STATES.get(name, JobState.UNKNOWN)


_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+(?:\.\d+)?)$")


def parse_duration(text: str) -> float | None:
    """Seconds of a Slurm duration (``1-02:03:04``, ``02:03:04``, ``03:04``, ``00:01.500``).

    ``UNLIMITED``/``INFINITE`` give ``math.inf``; empty or unknown give None.
    """
    t = text.strip()
    if not t or t in {"Unknown", "N/A", "None", "(null)", "INVALID"}:
        return None
    if t.upper() in {"UNLIMITED", "INFINITE"}:
        return math.inf
    if t.isdigit():  # TimelimitRaw etc.: minutes
        return float(int(t) * 60)
    m = _DURATION.match(t)
    if not m:
        return None
    days, hours, minutes, seconds = m.groups()
    total = float(seconds) + int(minutes) * 60
    if hours is not None:
        total += int(hours) * 3600
    if days is not None:
        total += int(days) * 86400
    return total


def parse_time(text: str) -> float | None:
    """Epoch seconds of a Slurm timestamp (``2026-11-30T23:38:13``, local time)."""
    t = text.strip()
    if not t or t in {"Unknown", "None", "N/A", "(null)"}:
        return None
    try:
        return datetime.fromisoformat(t).timestamp()
    except ValueError:
        return None


def format_duration(seconds: float) -> str:
    """``[D-]HH:MM:SS`` as Slurm prints limits (``01:00:00``, ``2-00:00:00``)."""
    s = int(seconds)
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    mins, secs = divmod(s, 60)
    clock = f"{hours:02d}:{mins:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def slurm_minutes(seconds: float) -> str:
    """An sbatch ``--time`` value for ``seconds`` (rounded up to whole minutes)."""
    minutes = max(1, math.ceil(seconds / 60))
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:02d}:{mins:02d}:00"


def expand_path(pattern: str, *, job_id: str, name: str, user: str, cwd: str) -> str:
    """Resolve an sbatch ``--output`` pattern as far as it is known at submission.

    ``%j``/``%J`` job id, ``%A`` array master id, ``%x`` job name, ``%u`` user,
    ``%%`` a percent sign. Per-task (``%a``) and per-node (``%N``, ``%n``)
    fields stay as they are. A relative path is relative to ``cwd``.
    """
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c != "%" or i + 1 >= len(pattern):
            out.append(c)
            i += 1
            continue
        j = i + 1
        while j < len(pattern) and pattern[j].isdigit():  # zero padding: %5j
            j += 1
        if j >= len(pattern):
            out.append(pattern[i:])
            break
        key, width = pattern[j], pattern[i + 1 : j]
        pad = int(width) if width else 0
        if key in "jJA":
            out.append(job_id.zfill(pad))
        elif key == "x":
            out.append(name)
        elif key == "u":
            out.append(user)
        elif key == "%":
            out.append("%")
        else:
            out.append(pattern[i : j + 1])
        i = j + 1
    path = "".join(out)
    if not path.startswith("/"):
        path = cwd.rstrip("/") + "/" + path
    return path


# --- jobs ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """One job (or one array task) as a Slurm client reported it."""

    job_id: str  # "42", or "41_3" for an array task
    raw_state: str
    state: JobState
    array_job_id: str = ""  # "41" for tasks of array 41
    array_task: str = ""  # "3", or "0-9%2" for the pending rest of an array
    name: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    time_limit_s: float | None = None
    nodes: str = ""
    cpus: int | None = None
    comment: str = ""
    stdout: str = ""
    stderr: str = ""
    cwd: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def parent_id(self) -> str:
        """The id sbatch returned for this job (the array's id for an array task)."""
        return self.array_job_id or self.job_id


def _json(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise errors.BackendError(
            f"{what} printed output that is not JSON",
            hint="is this Slurm 21.08 or newer with the openapi plugins installed?",
        ) from exc
    if not isinstance(data, dict):
        raise errors.BackendError(f"{what} printed unexpected JSON")
    return data


def _check_errors(data: Mapping[str, Any], what: str) -> None:
    """``--json`` commands exit 0 even when the controller is down; read ``errors``."""
    errs = [e for e in data.get("errors") or [] if isinstance(e, Mapping)]
    if not errs:
        return
    text = "; ".join(
        str(e.get("description") or e.get("error") or e) + f" ({e.get('error', '')})" for e in errs
    )
    if any(_UNAVAILABLE.search(str(e)) for e in errs) or not data.get("jobs"):
        raise errors.BackendUnavailable(
            f"{what} could not reach the Slurm controller: {text}",
            hint="the controller may be down or restarting; retry in a minute",
        )
    raise errors.BackendError(f"{what} reported: {text}")


def _array_fields(job: Mapping[str, Any]) -> tuple[str, str]:
    master = _int(job.get("array_job_id"))
    task = _int(job.get("array_task_id"))
    task_str = str(job.get("array_task_string") or "")
    if not master:
        return "", ""
    if task is not None:
        return str(master), str(task)
    return str(master), task_str


def _texts(job: Mapping[str, Any], **keys: str) -> dict[str, str]:
    """Text fields of a job record: field name -> the record's ``key`` ("" when absent)."""
    return {name: str(job.get(key) or "") for name, key in keys.items()}


def _slurm_job(
    job: Mapping[str, Any],
    job_id: str,
    raw_state: str,
    array: tuple[str, str],
    limit_min: float | None,
    **fields: Any,
) -> SlurmJob:
    """A job as squeue and sacct both derive it: the state from the raw one, exit status
    and signal from ``exit_code``, the time limit from minutes; ``array`` is (array job
    id, task)."""
    exit_code, signal = exit_of(job.get("exit_code"))
    return SlurmJob(
        job_id=job_id,
        raw_state=raw_state,
        state=map_state(raw_state),
        array_job_id=array[0],
        array_task=array[1],
        exit_code=exit_code,
        signal=signal,
        time_limit_s=None if limit_min is None else limit_min * 60,
        **fields,
    )


# the text fields squeue and sacct both give under the field's own name
_SAME_NAMED = {name: name for name in ("name", "account", "partition", "qos", "nodes")}


def _squeue_job(job: Mapping[str, Any]) -> SlurmJob:
    raw_id = str(_int(job.get("job_id")) or "")
    array_id, task = _array_fields(job)
    if array_id and task.isdigit():
        job_id = f"{array_id}_{task}"
    elif array_id:
        job_id = f"{array_id}_[{task}]" if task else raw_id
    else:
        job_id = raw_id
    raw_state = state_name(job.get("job_state"))
    return _slurm_job(
        job,
        job_id,
        raw_state,
        (array_id, task),
        number(job.get("time_limit")),
        **_texts(
            job,
            **_SAME_NAMED,
            user="user_name",
            reason="state_reason",
            comment="comment",
            stdout="standard_output",
            stderr="standard_error",
            cwd="current_working_directory",
        ),
        submit_time=_epoch(job.get("submit_time")),
        start_time=_epoch(job.get("start_time")),
        end_time=_epoch(job.get("end_time")) if map_state(raw_state).terminal else None,
        cpus=_int(job.get("cpus")),
        extra={"job_id_raw": raw_id},
    )


def exit_of(value: Any) -> tuple[int | None, int | None]:
    """(exit status, signal) from an exit code in any shape.

    22.05 squeue gives the raw wait status as an int; 22.05 sacct gives
    ``{"status", "return_code"}``; newer versions nest numbers and add ``signal``.
    """
    if value is None:
        return None, None
    if isinstance(value, int | float) and not isinstance(value, bool):
        status = int(value)
        if status & 0x7F:
            return None, status & 0x7F
        return (status >> 8) & 0xFF, None
    if isinstance(value, Mapping):
        rc = _int(value.get("return_code"))
        sig_obj = value.get("signal")
        if isinstance(sig_obj, Mapping):  # 22.05: signal_id; newer: id
            sig = _int(sig_obj.get("id", sig_obj.get("signal_id")))
        else:
            sig = _int(sig_obj)
        kind = state_name(value.get("status"))
        if kind == "SIGNALED" and sig is None:
            sig = rc
            rc = None
        return rc, sig or None
    return None, None


def parse_squeue_json(text: str) -> list[SlurmJob]:
    """Jobs of ``squeue --json``; raises BackendUnavailable when it reports errors.

    22.05 ignores ``-j/-u/-t`` with ``--json`` and includes recently finished
    jobs; filter the result yourself.
    """
    data = _json(text, "squeue --json")
    _check_errors(data, "squeue")
    return [_squeue_job(j) for j in data.get("jobs") or [] if isinstance(j, Mapping)]


def _sacct_job(job: Mapping[str, Any]) -> SlurmJob:
    raw_id = str(_int(job.get("job_id")) or "")
    array = job.get("array") if isinstance(job.get("array"), Mapping) else {}
    master = _int(array.get("job_id")) if array else None
    task = _int(array.get("task_id")) if array else None
    task_str = str(array.get("task") or "") if array else ""
    if master and task is not None:
        array_id, task_s = str(master), str(task)
        job_id = f"{master}_{task}"
    elif master:
        array_id, task_s, job_id = str(master), task_str, f"{master}_[{task_str}]"
    else:
        array_id, task_s, job_id = "", "", raw_id
    st = job.get("state") if isinstance(job.get("state"), Mapping) else {}
    raw_state = state_name(st.get("current") if st else None)
    times = job.get("time") if isinstance(job.get("time"), Mapping) else {}
    comment = job.get("comment")
    comment_text = str(comment.get("job") or "") if isinstance(comment, Mapping) else ""
    required = job.get("required") if isinstance(job.get("required"), Mapping) else {}
    return _slurm_job(
        job,
        job_id,
        raw_state,
        (array_id, task_s),
        number(times.get("limit")) if times else None,
        **_texts(job, **_SAME_NAMED, user="user", cwd="working_directory"),
        reason=str(st.get("reason") or "") if st else "",
        submit_time=_epoch(times.get("submission")) if times else None,
        start_time=_epoch(times.get("start")) if times else None,
        end_time=_epoch(times.get("end")) if times else None,
        cpus=_int(required.get("CPUs")) if required else None,
        comment=comment_text,
        extra={"job_id_raw": raw_id, "submit_line": str(job.get("submit_line") or "")},
    )


def parse_sacct_json(text: str) -> list[SlurmJob]:
    """Jobs of ``sacct --json`` (allocations; steps are left out)."""
    data = _json(text, "sacct --json")
    _check_errors(data, "sacct")
    return [_sacct_job(j) for j in data.get("jobs") or [] if isinstance(j, Mapping)]


def parse_sacct_parsable(text: str, fields: Iterable[str] | None = None) -> list[dict[str, str]]:
    """Rows of ``sacct --parsable2`` as dicts.

    With ``fields`` the output has no header (``--noheader``); without, the
    first line is the header. ``|`` inside a value (SubmitLine, Comment) is
    kept: the extra columns are joined back into the widest free-text field.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if fields is None:
        if not lines:
            return []
        header = lines[0].split("|")
        lines = lines[1:]
    else:
        header = list(fields)
    rows: list[dict[str, str]] = []
    free = [i for i, h in enumerate(header) if h in {"SubmitLine", "Comment", "JobName", "WorkDir"}]
    for line in lines:
        cells = line.split("|")
        extra = len(cells) - len(header)
        if extra > 0 and free:
            k = free[0] if "SubmitLine" not in header else header.index("SubmitLine")
            cells = [*cells[:k], "|".join(cells[k : k + extra + 1]), *cells[k + extra + 1 :]]
        rows.append(dict(zip(header, cells, strict=False)))
    return rows


def sacct_row_job(row: Mapping[str, str]) -> SlurmJob:
    """A SlurmJob from one ``--parsable2`` row (fields as in ``SACCT_FIELDS``)."""
    job_id = row.get("JobID", "")
    array_id, _, task = job_id.partition("_")
    rc_text = row.get("ExitCode", "")
    rc: int | None = None
    sig: int | None = None
    if ":" in rc_text:
        a, _, b = rc_text.partition(":")
        rc = int(a) if a.isdigit() else None
        sig = int(b) if b.isdigit() and int(b) else None
    limit = parse_duration(row.get("Timelimit", ""))
    return SlurmJob(
        job_id=job_id,
        raw_state=state_name(row.get("State", "")),
        state=map_state(row.get("State", "")),
        array_job_id=array_id if task else "",
        array_task=task.strip("[]") if task else "",
        name=row.get("JobName", ""),
        user=row.get("User", ""),
        account=row.get("Account", ""),
        partition=row.get("Partition", ""),
        qos=row.get("QOS", ""),
        reason=row.get("Reason", ""),
        exit_code=rc,
        signal=sig,
        submit_time=parse_time(row.get("Submit", "")),
        start_time=parse_time(row.get("Start", "")),
        end_time=parse_time(row.get("End", "")),
        time_limit_s=limit,
        nodes=row.get("NodeList", ""),
        cpus=int(row["NCPUS"]) if row.get("NCPUS", "").isdigit() else None,
        comment=row.get("Comment", ""),
        cwd=row.get("WorkDir", ""),
        extra={"job_id_raw": row.get("JobIDRaw", ""), "submit_line": row.get("SubmitLine", "")},
    )


# The fields the backend asks sacct for (``--format``), in this order.
SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "Submit",
    "Start",
    "End",
    "Timelimit",
    "NCPUS",
    "NodeList",
    "Reason",
    "WorkDir",
    "Comment",
    "SubmitLine",
)


_FAILURE_ORDER = (
    JobState.NODE_FAIL,
    JobState.BOOT_FAIL,
    JobState.OUT_OF_MEMORY,
    JobState.FAILED,
    JobState.TIMEOUT,
    JobState.DEADLINE,
    JobState.PREEMPTED,
    JobState.CANCELLED,
)


def aggregate_state(states: Iterable[JobState]) -> JobState:
    """One state for an array job from its tasks' states.

    Running while any task runs, pending while any waits, and at the end the
    worst outcome (a single failed task makes the array FAILED).
    """
    seen = list(states)
    if not seen:
        return JobState.UNKNOWN
    for active in (JobState.RUNNING, JobState.REQUEUED, JobState.PENDING, JobState.SUSPENDED):
        if active in seen:
            return JobState.RUNNING if active is JobState.RUNNING else active
    if JobState.UNKNOWN in seen:
        return JobState.UNKNOWN
    for bad in _FAILURE_ORDER:
        if bad in seen:
            return bad
    return JobState.COMPLETED


# --- sbatch -------------------------------------------------------------------


def parse_sbatch(stdout: str) -> tuple[str, str]:
    """(job id, cluster) from ``sbatch --parsable`` (``42`` or ``42;cluster``)."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    for line in reversed(lines):  # warnings may come first
        job_id, _, cluster = line.partition(";")
        if job_id.isdigit():
            return job_id, cluster
    raise errors.BackendError(
        f"sbatch printed no job id: {stdout.strip()[:200]!r}",
        hint="the job may or may not have been queued; check with `squeue --me`",
    )


# --- scontrol / sinfo -----------------------------------------------------------

_KV = re.compile(r"(?:^|\s)([A-Za-z][\w/:]*)=")


def parse_scontrol(text: str) -> list[dict[str, str]]:
    """Records of ``scontrol show job|partition|node`` (multi-line or ``-o``).

    Values may hold spaces (``Command=/x/job.sh arg``): a value runs until the
    next ``Key=`` that starts a token.
    """
    records: list[dict[str, str]] = []
    blocks: list[list[str]] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace() or not blocks:  # a record starts unindented
            blocks.append([])
        blocks[-1].append(line.strip())
    for block in blocks:
        flat = " ".join(block)
        matches = list(_KV.finditer(flat))
        rec: dict[str, str] = {}
        for n, m in enumerate(matches):
            end = matches[n + 1].start() if n + 1 < len(matches) else len(flat)
            rec[m.group(1)] = flat[m.end() : end].strip()
        if rec:
            records.append(rec)
    return records


def parse_partitions(text: str) -> list[dict[str, Any]]:
    """Partitions from ``scontrol show partition -o`` with limits in seconds."""
    out: list[dict[str, Any]] = []
    for rec in parse_scontrol(text):
        name = rec.get("PartitionName")
        if not name:
            continue
        out.append(
            {
                "name": name,
                "default": rec.get("Default") == "YES",
                "state": rec.get("State", ""),
                "max_time_s": parse_duration(rec.get("MaxTime", "")),
                "default_time_s": parse_duration(rec.get("DefaultTime", "")),
                "nodes": rec.get("Nodes", ""),
                "total_cpus": int(rec["TotalCPUs"]) if rec.get("TotalCPUs", "").isdigit() else None,
                "total_nodes": int(rec["TotalNodes"])
                if rec.get("TotalNodes", "").isdigit()
                else None,
                "max_nodes": rec.get("MaxNodes", ""),
                "qos": rec.get("QoS", ""),
                "tres": rec.get("TRES", ""),
            }
        )
    return out


def _gres_gpus(gres: str) -> int:
    total = 0
    for part in gres.split(","):
        bits = part.split("(")[0].split(":")
        if bits and bits[0] == "gpu" and bits[-1].isdigit():
            total += int(bits[-1])
    return total


def parse_sinfo_json(text: str) -> dict[str, Any]:
    """Nodes (and, on 23.02+, partitions) from ``sinfo --json``.

    22.05 prints ``{"nodes": [...]}``; newer versions print ``{"sinfo": [...]}``,
    one entry per partition and node state.
    """
    data = _json(text, "sinfo --json")
    errs = data.get("errors") or []
    if errs and not (data.get("nodes") or data.get("sinfo")):
        raise errors.BackendUnavailable(
            f"sinfo could not reach the Slurm controller: {errs}",
            hint="the controller may be down or restarting; retry in a minute",
        )
    nodes: list[dict[str, Any]] = []
    partitions: dict[str, dict[str, Any]] = {}
    for node in data.get("nodes") or []:
        state = node.get("state")
        nodes.append(
            {
                "name": str(node.get("name", "")),
                "state": state_name(state).lower() if isinstance(state, list) else str(state),
                "cpus": _int(node.get("cpus")),
                "alloc_cpus": _int(node.get("alloc_cpus")),
                "memory_mb": _int(node.get("real_memory")),
                "alloc_memory_mb": _int(node.get("alloc_memory")),
                "gpus": _gres_gpus(str(node.get("gres") or "")),
                "gres": str(node.get("gres") or ""),
                "partitions": [str(p) for p in node.get("partitions") or []],
                "reason": str(node.get("reason") or ""),
            }
        )
    for entry in data.get("sinfo") or []:
        part = entry.get("partition") or {}
        pname = str(part.get("name", ""))
        names = ((entry.get("nodes") or {}).get("nodes")) or []
        st = (entry.get("node") or {}).get("state")
        cpus = entry.get("cpus") or {}
        mem = entry.get("memory") or {}
        gres = str((entry.get("gres") or {}).get("total") or "")
        per_node_cpus = _int(cpus.get("maximum"))
        if per_node_cpus is None and names:
            total = _int(cpus.get("total"))
            per_node_cpus = None if total is None else total // len(names)
        for name in names:
            nodes.append(
                {
                    "name": str(name),
                    "state": state_name(st).lower(),
                    "cpus": per_node_cpus,
                    "alloc_cpus": _int(cpus.get("allocated")),
                    "memory_mb": _int(mem.get("maximum")),
                    "alloc_memory_mb": _int(mem.get("allocated")),
                    "gpus": _gres_gpus(gres),
                    "gres": gres,
                    "partitions": [pname] if pname else [],
                    "reason": str((entry.get("reason") or {}).get("description") or ""),
                }
            )
        if pname and pname not in partitions:
            maxima = (part.get("maximums") or {}) if isinstance(part, Mapping) else {}
            defaults = (part.get("defaults") or {}) if isinstance(part, Mapping) else {}
            limit = number(maxima.get("time"))
            default = number(defaults.get("time"))
            pstate = (part.get("partition") or {}).get("state")
            partitions[pname] = {
                "name": pname,
                "default": "DEFAULT" in [str(f).upper() for f in (part.get("flags") or [])]
                or bool(entry.get("default")),
                "state": state_name(pstate) if pstate is not None else "",
                "max_time_s": None if limit is None else limit * 60,
                "default_time_s": None if default is None else default * 60,
                "nodes": str((part.get("nodes") or {}).get("configured") or ""),
            }
    merged: dict[str, dict[str, Any]] = {}
    for n in nodes:
        have = merged.get(n["name"])
        if have is None:
            merged[n["name"]] = n
        else:
            have["partitions"] = sorted(set(have["partitions"]) | set(n["partitions"]))
    meta = data.get("meta") or {}
    slurm = meta.get("Slurm") or meta.get("slurm") or {}
    return {
        "version": str(slurm.get("release") or ""),
        "nodes": list(merged.values()),
        "partitions": list(partitions.values()),
    }


# --- errors -------------------------------------------------------------------

_UNAVAILABLE = re.compile(
    r"Unable to contact slurm controller|Socket timed out|Connection refused|"
    r"Problem talking to the database|Slurm backup controller in standby|"
    r"Zero Bytes were transmitted|Communication connection failure|"
    r"Unable to establish .*connection|Transport endpoint is not connected|"
    r"Unspecified error|Slurmctld is not responding|"
    r"Unable to connect to database|Sending PersistInit msg",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    kind: type[errors.TenantryError]
    reason: str
    message: str
    hint: str


def _rule(
    pattern: str, kind: type[errors.TenantryError], reason: str, message: str, hint: str
) -> _Rule:
    return _Rule(re.compile(pattern, re.IGNORECASE), kind, reason, message, hint)


_RULES: tuple[_Rule, ...] = (
    _rule(
        r"invalid partition|Invalid partition name",
        errors.SubmissionRejected,
        "invalid_partition",
        "Slurm has no partition {partition}",
        "pick one of the partitions listed by `tenantry info` (or `sinfo -s`), "
        "or leave the partition out to use the default",
    ),
    _rule(
        r"Requested time limit is invalid|time limit.*exceeds",
        errors.SubmissionRejected,
        "time_limit",
        "the time limit asked ({time}) exceeds what the partition or QOS allows",
        "ask for less time with --time (`tenantry info` shows each partition's MaxTime), "
        "or choose a partition with a longer limit",
    ),
    _rule(
        r"Job violates accounting/QOS policy|QOSMax|AssocMax|QOSGrp|AssocGrp",
        errors.SubmissionRejected,
        "qos_limit",
        "the job breaks a QOS or association limit (jobs per user, size or time)",
        "wait for some of your jobs to finish, or ask for fewer resources or less time; "
        "`sacctmgr show qos` lists the limits",
    ),
    _rule(
        r"Invalid qos specification",
        errors.SubmissionRejected,
        "invalid_qos",
        "the QOS asked for does not exist or is not allowed for your account",
        "list yours with `sacctmgr show assoc user=$USER format=account,qos`",
    ),
    _rule(
        r"Invalid account|account/partition combination",
        errors.SubmissionRejected,
        "invalid_account",
        "the account {account} does not exist or may not use this partition",
        "list yours with `sacctmgr show assoc user=$USER format=account,partition`",
    ),
    _rule(
        r"Memory specification can not be satisfied",
        errors.SubmissionRejected,
        "memory",
        "no node has as much memory as asked ({mem})",
        "ask for less memory with --mem; `tenantry info` shows each node's memory",
    ),
    _rule(
        r"Requested node configuration is not available|More processors requested",
        errors.SubmissionRejected,
        "node_config",
        "no node in the partition has the CPUs, memory or GPUs asked",
        "ask for fewer CPUs/GPUs or less memory; `tenantry info` shows node sizes",
    ),
    _rule(
        r"Invalid generic resource|Invalid GRES|gres",
        errors.SubmissionRejected,
        "gres",
        "the GPU/GRES request is not valid on this cluster",
        "ask GPUs as --gpus N; `tenantry info` shows the GPUs per node",
    ),
    _rule(
        r"Invalid job array specification",
        errors.SubmissionRejected,
        "array",
        "the job array specification is not valid",
        "use ranges like 0-9 or 1,3,5, optionally %N to limit concurrent tasks",
    ),
    _rule(
        r"Invalid --time specification|Invalid time",
        errors.UsageError,
        "time_format",
        "the time limit is not in a format Slurm accepts",
        "use minutes, MM:SS, HH:MM:SS or D-HH:MM:SS",
    ),
    _rule(
        r"Unable to open file",
        errors.UsageError,
        "script_missing",
        "sbatch cannot open the job script",
        "check the script path (relative paths are resolved in the job's cwd)",
    ),
    _rule(
        r"unrecognized option|invalid option|unknown option",
        errors.UsageError,
        "option",
        "sbatch does not know an option that was passed through",
        "remove or fix the extra sbatch option",
    ),
    _rule(
        r"Invalid job id|does not exist",
        errors.NotFound,
        "invalid_job",
        "Slurm does not know job {job}",
        "it may have finished long ago; `tenantry jobs` lists yours",
    ),
    _rule(
        r"already completing or completed|Job has already finished",
        errors.Conflict,
        "already_done",
        "job {job} has already finished",
        "nothing to cancel",
    ),
    _rule(
        r"Access/permission denied|Permission denied|not the owner|User not found",
        errors.PermissionDenied,
        "permission",
        "Slurm refused: you may not act on this job or resource",
        "act on your own jobs and accounts only",
    ),
    _rule(
        r"Job submit/allocate failed|Batch job submission failed",
        errors.SubmissionRejected,
        "rejected",
        "Slurm rejected the job",
        "read Slurm's message above and adjust the options",
    ),
)


def error_from(command: str, stderr: str, returncode: int, **context: str) -> errors.TenantryError:
    """The Tenantry error for a failed Slurm command (``stderr`` as printed).

    ``context`` fills the message: partition, time, account, mem, job.
    """
    text = stderr.strip()
    last = text.splitlines()[-1] if text else f"{command} exited with status {returncode}"
    slurm_says = " | ".join(ln.strip() for ln in text.splitlines()[-3:]) if text else last
    if _UNAVAILABLE.search(text):
        return errors.BackendUnavailable(
            f"the Slurm controller did not answer {command}: {last}",
            hint="the controller may be down or restarting; this is retryable, try again shortly",
            command=command,
            slurm=slurm_says,
        )
    for rule in _RULES:
        if rule.pattern.search(text):
            fill = {k: v or "?" for k, v in context.items()}
            part = re.search(r"invalid partition specified: (\S+)", text)
            if part:
                fill["partition"] = part.group(1)
            try:
                message = rule.message.format_map(_Default(fill))
            except (KeyError, ValueError):
                message = rule.message
            return rule.kind(
                f"{message} (Slurm: {last})",
                hint=rule.hint,
                reason=rule.reason,
                command=command,
                slurm=slurm_says,
            )
    return errors.BackendError(
        f"{command} failed (exit {returncode}): {last}",
        hint="read Slurm's message; `tenantry info` shows partitions and limits",
        command=command,
        slurm=slurm_says,
    )


class _Default(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"
