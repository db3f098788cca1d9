"""Read PBS accounting logs (PBS Pro / OpenPBS and TORQUE ``server_priv/accounting``).

One record per line, ``MM/DD/YYYY HH:MM:SS;TYPE;JOB_ID;key=value key=value ...``.
The types read here: ``Q`` (queued: a submission), ``E`` (the job ended; its
usage), ``D`` (deleted) and ``A`` (aborted by the server). A job is one row:
its ``E`` record when it ran, else its ``D``/``A`` record (it never started),
else its ``Q`` record (still queued when the log ends); the other types
(``S`` start, ``R`` rerun, reservations, licenses ...) add nothing the report
counts. Times come from the epoch fields (``ctime`` created, ``start``,
``end``), so they need no zone. CPUs are ``resources_used.ncpus``, else
``Resource_List.ncpus``, else counted from ``exec_host`` (PBS Pro's
``node/0*4``, TORQUE's ``node/0+node/1`` and ``node/0-5``), else TORQUE's
``Resource_List.nodes=N:ppn=P``; GPUs ``resources_used.ngpus``, else
``Resource_List.ngpus``, else ``nodes=N:ppn=P:gpus=G``. Array subjobs
``123[4].server`` are ``123_4`` of submission ``123``, as sacct names them.
The server (after the job number) is the cluster. Rows go through the sacct
reader's normalization, so every input gives the same job table.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from tenantry.report import ingest_sacct
from tenantry.report.files import read_text
from tenantry.report.schema import Dataset, IngestStats, Unreadable

_RECORD = re.compile(
    r"^(?P<when>\d\d/\d\d/\d{4} \d\d:\d\d:\d\d);(?P<type>[A-Za-z]);(?P<id>[^;]+);(?P<msg>.*)$"
)
_JOB_ID = re.compile(r"^(?P<num>\d+)(?:\[(?P<index>\d*)\])?(?:\.(?P<server>.+))?$")
_PAIR = re.compile(r"(?:^|\s)([A-Za-z_][\w.]*)=")
_EXEC_PART = re.compile(r"^[^/]+/(?P<lo>\d+)(?:-(?P<hi>\d+))?(?:\*(?P<n>\d+))?$")
_NODES = re.compile(r"^(?P<n>\d+)(?P<props>(?::[\w=]+)*)$")
_TS = "%Y-%m-%dT%H:%M:%S"
# what the report counts a job by: ended > deleted/aborted > queued
_RANK = {"E": 3, "D": 2, "A": 2, "Q": 1}
# PBS Pro's exit status for a job killed for running past its walltime
_WALLTIME_EXCEEDED = -29


def looks_like(head: str) -> bool:
    """True when the first non-empty lines are PBS accounting records."""
    lines = [ln for ln in head.splitlines() if ln.strip()][:5]
    return bool(lines) and all(_RECORD.match(ln) for ln in lines)


def pairs(msg: str) -> dict[str, str]:
    """``key=value`` pairs of a record's message (a value runs to the next key)."""
    marks = list(_PAIR.finditer(msg))
    out: dict[str, str] = {}
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        end = nxt.start() if nxt is not None else len(msg)
        out[m.group(1)] = msg[m.end() : end].strip()
    return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _exec_cpus(exec_host: str) -> int | None:
    """CPUs named by ``exec_host``: ``n1/0*4+n2/0*4`` (PBS Pro), ``n1/0+n1/1`` or
    ``n1/0-5`` (TORQUE)."""
    total = 0
    for part in exec_host.split("+"):
        m = _EXEC_PART.match(part.strip())
        if m is None:
            return None
        if m.group("n"):
            total += int(m.group("n"))
        elif m.group("hi"):
            total += int(m.group("hi")) - int(m.group("lo")) + 1
        else:
            total += 1
    return total or None


def _nodes_spec(spec: str) -> tuple[int | None, int | None]:
    """(CPUs, GPUs) of TORQUE's ``Resource_List.nodes=2:ppn=6:gpus=1`` (per node x nodes)."""
    cpus = gpus = 0
    for part in spec.split("+"):
        m = _NODES.match(part.strip())
        if m is None:
            return None, None
        n = int(m.group("n"))
        props = dict(p.split("=", 1) for p in m.group("props").split(":") if "=" in p)
        cpus += n * (_int(props.get("ppn")) or 1)
        gpus += n * (_int(props.get("gpus")) or 0)
    return cpus, gpus


def _iso(epoch: str | None) -> str:
    secs = _int(epoch)
    if not secs:
        return ""
    return datetime.fromtimestamp(secs, UTC).strftime(_TS)


def _state(kind: str, kv: dict[str, str]) -> tuple[str, str]:
    """(sacct state, sacct exit code) of a job's deciding record."""
    if kind == "Q":
        return "PENDING", ""
    if kind in ("D", "A"):
        return "CANCELLED", ""
    status = _int(kv.get("Exit_status"))
    if status is None:
        return "COMPLETED", ""
    if status == 0:
        return "COMPLETED", "0:0"
    if status == _WALLTIME_EXCEEDED:
        return "TIMEOUT", f"{status}:0"
    if status > 256:  # killed by signal (status - 256)
        return "CANCELLED", f"0:{status - 256}"
    return "FAILED", f"{status}:0"


def _local(when: str, tz: str | None) -> str:
    """A record's own ``MM/DD/YYYY HH:MM:SS`` (the server's local time) in UTC."""
    try:
        t = datetime.strptime(when, "%m/%d/%Y %H:%M:%S")
    except ValueError:
        return ""
    zone = ZoneInfo(tz) if tz else UTC
    return t.replace(tzinfo=zone).astimezone(UTC).strftime(_TS)


def record(
    kind: str, job: str, kv: dict[str, str], when: str = "", tz: str | None = None
) -> dict[str, str] | None:
    """One job's row under sacct's field names, from its deciding record (``when``: the
    record's own time, the submission's when no epoch field names it)."""
    jid = _JOB_ID.match(job.strip())
    if jid is None:
        return None
    num, index, server = jid.group("num"), jid.group("index"), jid.group("server") or ""
    state, exit_code = _state(kind, kv)
    cpus = _int(kv.get("resources_used.ncpus")) or _int(kv.get("Resource_List.ncpus"))
    gpus = _int(kv.get("resources_used.ngpus")) or _int(kv.get("Resource_List.ngpus"))
    if cpus is None and kv.get("exec_host"):
        cpus = _exec_cpus(kv["exec_host"])
    if kv.get("Resource_List.nodes"):
        node_cpus, node_gpus = _nodes_spec(kv["Resource_List.nodes"])
        cpus = cpus or node_cpus
        gpus = gpus or node_gpus
    started = kind == "E" and _int(kv.get("start"))
    start = _iso(kv.get("start")) if started else ""
    end = _iso(kv.get("end")) if started else ""
    elapsed = ""
    if started and _int(kv.get("end")):
        elapsed = str(max((_int(kv.get("end")) or 0) - (_int(kv.get("start")) or 0), 0))
    return {
        "jobid": f"{num}_{index}" if index else num,
        "cluster": server,
        "user": (kv.get("user") or kv.get("owner") or kv.get("requestor", "")).split("@", 1)[0],
        "group": kv.get("group", ""),
        "account": kv.get("project") or kv.get("account") or kv.get("Account_Name", ""),
        "partition": kv.get("queue", ""),
        "jobname": kv.get("jobname", ""),
        "state": state,
        "submit": _iso(kv.get("ctime") or kv.get("qtime")) or _local(when, tz),
        "start": start,
        "end": end,
        "elapsedraw": elapsed,
        "alloccpus": str(cpus or 0) if started else "0",
        "alloctres": f"cpu={cpus or 0},gres/gpu={gpus or 0}" if started else "",
        "nodelist": kv.get("exec_host", "") if started else "None assigned",
        "exitcode": exit_code,
    }


def read_pbs(path: str | Path, *, tz: str | None = None) -> Dataset:
    """Ingest one PBS accounting log into a :class:`Dataset` (``tz``: the server's zone,
    for records that carry no epoch time)."""
    p = Path(path)
    stats = IngestStats(source=str(p), kind="pbs")
    best: dict[str, tuple[int, str, dict[str, str]]] = {}
    queued: dict[str, tuple[str, dict[str, str]]] = {}
    for no, line in enumerate(read_text(p).splitlines(), start=1):
        if not line.strip():
            continue
        m = _RECORD.match(line.rstrip("\r"))
        if m is None:
            stats.unreadable.append(
                Unreadable(source=str(p), line=no, reason="not a PBS record", text=line[:200])
            )
            continue
        kind, job = m.group("type").upper(), m.group("id").strip()
        rank = _RANK.get(kind)
        if rank is None or job.endswith("[]") or "[]." in job:
            continue  # other record types; an array's parent (its subjobs are the jobs)
        kv = pairs(m.group("msg"))
        if kind == "Q":
            queued.setdefault(job, (m.group("when"), kv))
        if job not in best or rank > best[job][0]:
            best[job] = (rank, kind, kv)
    rows = []
    for job, (_, kind, kv) in best.items():
        when, first = queued.get(job, ("", {}))
        # a deletion before the start names only its requestor; the queue record, the queue
        row = record(kind, job, {**first, **kv}, when, tz)
        if row is not None:
            rows.append(row)
    return ingest_sacct.from_rows(
        rows,
        stats,
        None,
        "a PBS accounting log has no Tenantry tags: agents are told apart by behaviour only",
    )
