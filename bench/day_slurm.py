"""The facility day's view of the machine: Unix users, Slurm accounting, sdiag, process CPU.

Small wrappers with argv lists; the parsers (``parse_sdiag_users``,
``parse_sacct``) are pure and unit-tested on recorded output.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from collections.abc import Iterable

import sdiag
from day_replay import SlurmJob

SACCT_FIELDS = (
    "JobID,JobIDRaw,Cluster,Partition,Account,User,Submit,Start,End,ElapsedRaw,State,"
    "ExitCode,AllocCPUS,AllocTRES,JobName,Comment,AdminComment,SubmitLine"
)


def parse_sdiag_users(text: str) -> dict[str, int]:
    """RPC count per user from ``sdiag``'s "statistics by user" section."""
    section = text.split("Remote Procedure Call statistics by user", 1)
    if len(section) < 2:
        return {}
    return sdiag.counts(section[1].split("Pending RPC statistics", 1)[0])


def sdiag_users() -> dict[str, int]:
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True, timeout=30)
    return parse_sdiag_users(out.stdout)


class RpcCounter:
    """Per-user RPC totals accumulated over samples, robust to ``sdiag -r`` by others."""

    def __init__(self, users: Iterable[str]) -> None:
        self.users = set(users)
        self.last: dict[str, int] = {}
        self.total: dict[str, int] = dict.fromkeys(self.users, 0)
        self.resets = 0

    def sample(self, counts: dict[str, int]) -> None:
        for u in self.users:
            cur = counts.get(u, 0)
            prev = self.last.get(u)
            if prev is None:
                self.last[u] = cur
                continue
            if cur < prev:  # statistics were reset: the new count is all new
                self.resets += 1
                self.total[u] += cur
            else:
                self.total[u] += cur - prev
            self.last[u] = cur

    def sum(self, users: Iterable[str] | None = None) -> int:
        return sum(self.total[u] for u in (self.users if users is None else users))


def parse_sacct(text: str) -> list[SlurmJob]:
    """Allocations from a ``--parsable2`` dump with header (``SACCT_FIELDS``)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return []
    head = lines[0].split("|")
    ix = {name: i for i, name in enumerate(head)}
    jobs = []
    for ln in lines[1:]:
        f = ln.split("|")
        if len(f) < len(head) or "." in f[ix["JobID"]]:
            continue
        submit = f[ix["Submit"]]
        try:
            ts = time.mktime(time.strptime(submit, "%Y-%m-%dT%H:%M:%S")) - time.timezone
        except ValueError:
            continue
        jobs.append(
            SlurmJob(
                user=f[ix["User"]],
                submit=ts,
                cpus=int(f[ix["AllocCPUS"]] or 0),
                elapsed_s=float(f[ix["ElapsedRaw"]] or 0),
            )
        )
    return jobs


def sacct_dump(users: Iterable[str], start: float, end: float) -> str:
    fmt = "%Y-%m-%dT%H:%M:%S"
    argv = [
        "sacct",
        "--parsable2",
        "--allocations",
        "--duplicates",
        "-u",
        ",".join(sorted(users)),
        "-S",
        time.strftime(fmt, time.gmtime(start - 5)),
        "-E",
        time.strftime(fmt, time.gmtime(end + 5)),
        f"--format={SACCT_FIELDS}",
    ]
    out = subprocess.run(
        argv, capture_output=True, text=True, check=True, env={**os.environ, "TZ": "UTC"}
    )
    return out.stdout


def settled_sacct_dump(
    users: Iterable[str], start: float, limit_s: float = 45.0, every_s: float = 3.0
) -> str:
    """``sacct_dump`` once accounting has caught up: the same rows twice, every ``every_s``.

    slurmctld hands finished jobs to slurmdbd asynchronously; on a loaded machine
    the last seconds' jobs reach accounting a while after they ended.
    """
    users = sorted(users)
    deadline = time.monotonic() + limit_s
    dump = sacct_dump(users, start, time.time())
    while time.monotonic() < deadline:
        time.sleep(every_s)
        again = sacct_dump(users, start, time.time())
        if again == dump:
            break
        dump = again
    return dump


def queued(users: Iterable[str]) -> list[str]:
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i", "-u", ",".join(sorted(users))],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.split()


def wait_drained(users: Iterable[str], timeout_s: float) -> bool:
    users = list(users)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not queued(users):
            return True
        time.sleep(1.0)
    return False


def ensure_user(name: str, home: str) -> pwd.struct_passwd:
    """A normal Unix user (idempotent) with an association in Slurm's accounting."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(
            ["useradd", "-M", "-d", home, "-s", "/bin/sh", name], check=True, capture_output=True
        )
        pw = pwd.getpwnam(name)
    if pw.pw_dir != home:  # made by a run with another --work: its home is this run's now
        subprocess.run(["usermod", "-d", home, name], check=True, capture_output=True)
        pw = pwd.getpwnam(name)
    os.makedirs(home, exist_ok=True)
    os.chown(home, pw.pw_uid, pw.pw_gid)
    os.chmod(home, 0o700)
    have = subprocess.run(
        ["sacctmgr", "-nP", "show", "user", name, "format=user"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    if name not in have:
        subprocess.run(
            ["sacctmgr", "-i", "add", "user", name, "account=root"],
            check=True,
            capture_output=True,
        )
    return pw


def wait_association(names: Iterable[str], timeout_s: float = 30) -> None:
    """slurmctld learns new associations from slurmdbd asynchronously."""
    pending = set(names)
    deadline = time.monotonic() + timeout_s
    while pending and time.monotonic() < deadline:
        out = subprocess.run(
            ["scontrol", "show", "assoc_mgr", "flags=assoc"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        pending = {n for n in pending if f"UserName={n}(" not in out}
        if pending:
            time.sleep(0.5)


def proc_cpu_s(pid: int) -> float:
    """utime+stime of a process and its reaped children (``/proc/PID/stat``)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(x) for x in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")
