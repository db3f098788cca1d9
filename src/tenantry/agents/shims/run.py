"""What a shim does when run: serve agents from the daemon, hand humans the real binary.

``main(name, argv)`` is the entry point of every wrapper written by
``tenantry shims install``. In an agent context (``principal.detect_agent``)
it answers from the daemon's ops (``jobs.list``, ``jobs.submit``,
``jobs.cancel``, ``jobs.wait``) and prints what the real command would; in a
human context, and for ``scontrol`` verbs other than ``show job``, it execs
the real binary found on ``PATH`` after its own directory (never itself).
Standard library only: it runs on every ``squeue`` an agent types.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from tenantry.agents.shims import formats as fm
from tenantry.agents.shims.entry import MARKER, NAMES, exec_real, find_real
from tenantry.agents.shims.entry import main as entry_main
from tenantry.core import errors

__all__ = ["MARKER", "NAMES", "dispatch", "exec_real", "find_real", "main"]

Call = Callable[[str, dict[str, Any]], Any]

_ACTIVE = {"PENDING", "RUNNING", "SUSPENDED", "REQUEUED", "UNKNOWN"}
_SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION_ID", re.I)


# --- entry point --------------------------------------------------------------------


def default_call() -> Call:
    from tenantry.client.sync import Client
    from tenantry.core.settings import load

    client = Client(load())

    def call(op: str, params: dict[str, Any]) -> Any:
        if op == "jobs.wait":  # streaming: progress chunks, then the result
            result: Any = None
            for chunk in client.stream(op, params):
                result = chunk.get("result", result)
            return result
        return client.call(op, params)

    return call


def main(name: str, argv: Sequence[str], **kw: Any) -> int:
    """Same as ``entry.main`` (kept for callers that import ``run``)."""
    return entry_main(name, argv, **kw)


def dispatch(
    name: str,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    call: Call | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Answer an agent's command from the daemon."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        handler = HANDLERS[name]
        return handler(list(argv), call or default_call(), out, err, env)
    except errors.TenantryError as e:
        err.write(f"{name}: error: {e.message}\n")
        if e.hint:
            err.write(f"{name}: hint: {e.hint}\n")
        return 1


def _parser(prog: str) -> argparse.ArgumentParser:
    # add_help=False: Slurm uses -h for --noheader
    return argparse.ArgumentParser(prog=prog, add_help=False, allow_abbrev=False)


def _warn_unknown(prog: str, unknown: Sequence[str], err: TextIO) -> None:
    if unknown:
        err.write(f"{prog}: note: served by Tenantry; ignored: {' '.join(unknown)}\n")


def _jobs(call: Call) -> list[Mapping[str, Any]]:
    res = call("jobs.list", {"all": True})
    jobs = res.get("jobs", []) if isinstance(res, Mapping) else []
    return [j for j in jobs if isinstance(j, Mapping)]


def _csv(values: Sequence[str] | None) -> list[str]:
    return [v for item in values or () for v in item.split(",") if v]


def _match_ids(job: fm.ShimJob, ids: list[str]) -> bool:
    return not ids or any(i in {job.job_id, job.job_id.split("_")[0], job.tenantry_id} for i in ids)


def _states(values: list[str]) -> set[str] | None:
    if not values or any(v.lower() == "all" for v in values):
        return None
    long: dict[str, str] = {}
    for state, code in fm.SHORT.items():
        long.setdefault(code, state)
    return {long.get(v.upper(), v.upper()) for v in values}


# --- squeue -------------------------------------------------------------------------

SQUEUE_LONG = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"

# squeue -O/--Format names -> -o letters (the ones Tenantry knows)
_LONG_NAMES = {
    "jobid": "i",
    "jobarrayid": "i",
    "arrayjobid": "A",
    "name": "j",
    "username": "u",
    "userid": "U",
    "state": "T",
    "statecompact": "t",
    "partition": "P",
    "account": "a",
    "timeused": "M",
    "timelimit": "l",
    "timeleft": "L",
    "numnodes": "D",
    "numcpus": "C",
    "minmemory": "m",
    "reason": "r",
    "reasonlist": "R",
    "nodelist": "N",
    "submittime": "V",
    "starttime": "S",
    "endtime": "e",
    "workdir": "Z",
    "comment": "k",
    "command": "o",
    "qos": "q",
}


def long_format(spec: str) -> str:
    """A ``-o`` format for an ``-O`` spec: ``name[:[.]size]`` fields, 20 wide by default."""
    parts = []
    for item in spec.split(","):
        name, _, size = item.strip().partition(":")
        letter = _LONG_NAMES.get(name.lower())
        if letter is None:
            continue
        right = size.startswith(".")
        width = size.lstrip(".") or "20"
        parts.append(f"%{'.' if right else ''}{width}{letter}")
    return "".join(parts) if parts else fm.SQUEUE_DEFAULT  # -O puts no separator


def squeue(argv: list[str], call: Call, out: TextIO, err: TextIO, env: Mapping[str, str]) -> int:
    p = _parser("squeue")
    p.add_argument("-j", "--jobs", action="append")
    p.add_argument("-u", "--user", action="append")
    p.add_argument("--me", action="store_true")
    p.add_argument("-t", "--states", action="append")
    p.add_argument("-h", "--noheader", action="store_true")
    p.add_argument("-o", "--format")
    p.add_argument("--json", action="store_true")
    p.add_argument("-p", "--partition", action="append")
    p.add_argument("-n", "--name", action="append")
    p.add_argument("-l", "--long", action="store_true")
    p.add_argument("-i", "--iterate", type=int)
    for flag in ("-a", "--all", "-r", "--array", "--local", "-v", "--verbose", "--start"):
        p.add_argument(flag, action="store_true", dest=f"ignored_{flag.strip('-')}")
    p.add_argument("-O", "--Format")
    p.add_argument("-S", "--sort")
    p.add_argument("-M", "--clusters")
    args, unknown = p.parse_known_args(argv)
    _warn_unknown("squeue", unknown, err)
    fmt = args.format or (SQUEUE_LONG if args.long else fm.SQUEUE_DEFAULT)
    if args.Format and not args.format:
        fmt = long_format(args.Format)
    ids, users = _csv(args.jobs), _csv(args.user)
    parts, names = _csv(args.partition), _csv(args.name)
    states = _states(_csv(args.states))

    def pick() -> list[fm.ShimJob]:
        chosen = []
        for d in _jobs(call):
            j = fm.ShimJob.from_job(d)
            if states is None and args.states:
                pass
            elif states is not None:
                if j.state not in states:
                    continue
            elif not args.json and j.state not in _ACTIVE:
                continue  # like squeue: finished jobs are gone
            if not _match_ids(j, ids) or (users and j.user not in users):
                continue
            if (parts and j.partition not in parts) or (names and j.name not in names):
                continue
            chosen.append(j)
        return chosen

    while True:
        jobs = pick()
        if args.json:
            out.write(fm.squeue_json(jobs))
        else:
            if args.long or args.iterate:
                out.write(time.strftime("%a %b %d %H:%M:%S %Y") + "\n")
            out.write(fm.format_squeue(jobs, fmt, header=not args.noheader))
        out.flush()
        if not args.iterate:
            return 0
        try:
            time.sleep(max(1, args.iterate))
        except KeyboardInterrupt:
            return 0


# --- sacct --------------------------------------------------------------------------


def sacct(argv: list[str], call: Call, out: TextIO, err: TextIO, env: Mapping[str, str]) -> int:
    p = _parser("sacct")
    p.add_argument("-j", "--jobs", action="append")
    p.add_argument("-P", "--parsable2", action="store_true")
    p.add_argument("-p", "--parsable", action="store_true")
    p.add_argument("-n", "--noheader", action="store_true")
    p.add_argument("-o", "--format", action="append")
    p.add_argument("-b", "--brief", action="store_true")
    p.add_argument("-s", "--state", action="append")
    p.add_argument("--name", action="append")
    p.add_argument("-u", "--user", action="append")
    p.add_argument("--json", action="store_true")
    for flag in ("-X", "--allocations", "-a", "--allusers", "-l", "--long", "-D", "--duplicates"):
        p.add_argument(flag, action="store_true", dest=f"ignored_{flag.strip('-')}")
    for opt in ("-S", "--starttime", "-E", "--endtime", "-M", "--clusters", "-A", "--accounts"):
        p.add_argument(opt, dest=f"ignored_{opt.strip('-')}")
    args, unknown = p.parse_known_args(argv)
    _warn_unknown("sacct", unknown, err)
    fields = _csv(args.format) or (
        ["JobID", "State", "ExitCode"] if args.brief else list(fm.SACCT_DEFAULT)
    )
    ids, users, names = _csv(args.jobs), _csv(args.user), _csv(args.name)
    states = _states(_csv(args.state))
    jobs = []
    for d in _jobs(call):
        j = fm.ShimJob.from_job(d)
        if not _match_ids(j, ids) or (users and j.user not in users):
            continue
        if (states is not None and j.state not in states) or (names and j.name not in names):
            continue
        jobs.append(j)
    jobs.sort(key=lambda j: (j.submit_time or 0, j.job_id))
    if args.json:
        out.write(_sacct_json(jobs))
        return 0
    mode = "2" if args.parsable2 else "1" if args.parsable else ""
    out.write(fm.format_sacct(jobs, fields, parsable=mode, header=not args.noheader))
    return 0


def _sacct_json(jobs: list[fm.ShimJob]) -> str:
    import json

    docs = []
    for j in jobs:
        master, _, task = j.job_id.partition("_")
        docs.append(
            {
                "account": j.account,
                "array": {
                    "job_id": int(master) if task else 0,
                    "task_id": int(task) if task.isdigit() else None,
                },
                "comment": {"administrator": None, "job": j.comment or None, "system": None},
                "exit_code": {
                    "status": "SIGNALED"
                    if j.signal
                    else "SUCCESS"
                    if not j.exit_code
                    else "FAILED",
                    "return_code": j.exit_code,
                },
                "job_id": int(master) if master.isdigit() else master,
                "name": j.name,
                "partition": j.partition,
                "state": {"current": j.state, "reason": j.reason or "None"},
                "time": {
                    "submission": int(j.submit_time or 0),
                    "start": int(j.start_time or 0),
                    "end": int(j.end_time or 0),
                    "limit": int(j.time_limit_s // 60) if j.time_limit_s else None,
                },
                "user": j.user,
                "working_directory": j.cwd,
            }
        )
    meta = {"plugin": {"type": "openapi/dbv0.0.38", "name": "Slurm OpenAPI DB v0.0.38"}}
    return json.dumps({"meta": meta, "errors": [], "jobs": docs}, indent=2) + "\n"


# --- sbatch -------------------------------------------------------------------------


def _time_s(text: str) -> int:
    from tenantry.core.units import parse_time_s

    return parse_time_s(text)


def sbatch(argv: list[str], call: Call, out: TextIO, err: TextIO, env: Mapping[str, str]) -> int:
    p = _parser("sbatch")
    p.add_argument("-J", "--job-name")
    p.add_argument("-o", "--output")
    p.add_argument("-e", "--error")
    p.add_argument("-D", "--chdir")
    p.add_argument("-c", "--cpus-per-task", type=int)
    p.add_argument("--mem")
    p.add_argument("-G", "--gpus")
    p.add_argument("--gres")
    p.add_argument("-t", "--time")
    p.add_argument("-p", "--partition")
    p.add_argument("-A", "--account")
    p.add_argument("-a", "--array")
    p.add_argument("--wrap")
    p.add_argument("--parsable", action="store_true")
    p.add_argument("-W", "--wait", action="store_true")
    p.add_argument("--comment")
    p.add_argument("--tenantry-force", action="store_true")
    p.add_argument("script", nargs="?")
    p.add_argument("args", nargs=argparse.REMAINDER)
    try:
        args, unknown = p.parse_known_args(argv)
    except SystemExit:
        return 1
    if args.comment is not None:
        err.write("sbatch: note: --comment is set by Tenantry (attribution); yours was dropped\n")
    cwd = str(Path(args.chdir or Path.cwd()).resolve())
    extra = list(unknown)
    if any(not u.startswith("-") for u in extra):
        err.write(f"sbatch: error: unexpected arguments {extra}\n")
        return 1
    if args.wrap is not None:
        script, text = str(Path(cwd) / ".sbatch-wrap"), f"#!/bin/sh\n{args.wrap}\n"
    elif args.script:
        path = Path(args.script)
        path = path if path.is_absolute() else Path(cwd) / path
        try:
            text = path.read_text()
        except OSError:
            err.write(f"sbatch: error: Unable to open file {args.script}\n")
            return 1
        script = str(path)
    else:
        text = sys.stdin.read()
        script = str(Path(cwd) / ".sbatch-stdin")
    resources: dict[str, Any] = {}
    if args.cpus_per_task:
        resources["cpus"] = args.cpus_per_task
    # memory and GPUs go through verbatim: the daemon's one job request model
    # reads them with Slurm's semantics (--mem=0 is a whole node, --gres is per node)
    for opt, value in (("--mem", args.mem), ("--gres", args.gres), ("--gpus", args.gpus)):
        if value:
            extra.append(f"{opt}={value}")
    if args.time:
        try:
            resources["time_s"] = _time_s(args.time)
        except (ValueError, errors.UsageError):
            err.write("sbatch: error: Invalid --time specification\n")
            return 1
    if args.partition:
        resources["partition"] = args.partition
    if args.account:
        resources["account"] = args.account
    params = {
        "script": script,
        "script_text": text,
        "args": list(args.args or []),
        "cwd": cwd,
        "name": args.job_name
        or (Path(args.script).name if args.script else "wrap" if args.wrap else "sbatch"),
        "resources": resources,
        "output": args.output or "",
        "error": args.error or "",
        "env": {k: v for k, v in env.items() if not _SECRET.search(k)},
        "array": args.array or "",
        "extra": extra,
        "force": bool(args.tenantry_force),
    }
    res = call("jobs.submit", params)
    job = res.get("job", {}) if isinstance(res, Mapping) else {}
    backend_id = str(job.get("backend_id") or job.get("id") or "")
    if res.get("deduplicated"):
        note = res.get("note") or "an identical job was submitted recently"
        err.write(f"sbatch: note: {note} (add --tenantry-force to submit anyway)\n")
    out.write(f"{backend_id}\n" if args.parsable else f"Submitted batch job {backend_id}\n")
    out.flush()
    if not args.wait:
        return 0
    done = call("jobs.wait", {"id": job.get("id"), "timeout_s": None})
    final = done.get("job", done) if isinstance(done, Mapping) else {}
    code = final.get("exit_code")
    if final.get("state") == "COMPLETED":
        return 0
    return int(code) if isinstance(code, int) and code else 1


# --- scancel ------------------------------------------------------------------------


def scancel(argv: list[str], call: Call, out: TextIO, err: TextIO, env: Mapping[str, str]) -> int:
    p = _parser("scancel")
    p.add_argument("ids", nargs="*")
    p.add_argument("-u", "--user")
    p.add_argument("--me", action="store_true")
    p.add_argument("-n", "--name", "--jobname")
    p.add_argument("-t", "--state")
    p.add_argument("-p", "--partition")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("-Q", "--quiet", action="store_true")
    p.add_argument("-s", "--signal")
    args, unknown = p.parse_known_args(argv)
    _warn_unknown("scancel", unknown, err)
    if args.signal:
        err.write("scancel: note: Tenantry cancels jobs; --signal is not supported, ignored\n")
    filters = args.user or args.me or args.name or args.state or args.partition
    if not args.ids and not filters:
        err.write("scancel: error: No job identification provided\n")
        return 1
    jobs = [fm.ShimJob.from_job(d) for d in _jobs(call)]
    states = _states(_csv([args.state] if args.state else []))
    rc = 0
    targets: list[fm.ShimJob] = []
    for want in args.ids:
        if not re.fullmatch(r"\d+(_\d+)?", want):
            err.write(f"scancel: error: Invalid job id {want}\n")
            return 1
        found = [j for j in jobs if want in {j.job_id, j.tenantry_id}]
        if not found:
            err.write(
                f"scancel: error: Kill job error on job id {want}: Invalid job id specified\n"
            )
            rc = 1
        targets += found
    if filters and not args.ids:
        for j in jobs:
            if j.state not in _ACTIVE:
                continue
            if (args.user and j.user != args.user) or (args.name and j.name != args.name):
                continue
            if (states is not None and j.state not in states) or (
                args.partition and j.partition != args.partition
            ):
                continue
            targets.append(j)
    for j in targets:
        if j.state not in _ACTIVE:
            continue  # like scancel: finished jobs are silently left alone
        if args.verbose:
            err.write(f"scancel: Terminating job {j.job_id}\n")
        call("jobs.cancel", {"id": j.tenantry_id})
    return rc


# --- scontrol show job ---------------------------------------------------------------


def scontrol(argv: list[str], call: Call, out: TextIO, err: TextIO, env: Mapping[str, str]) -> int:
    flags = [a for a in argv if a.startswith("-")]
    words = [a for a in argv if not a.startswith("-")]
    oneliner = any(f in {"-o", "--oneliner"} for f in flags)
    want = words[2] if len(words) > 2 else ""
    jobs = [fm.ShimJob.from_job(d) for d in _jobs(call)]
    if want:
        jobs = [j for j in jobs if want in {j.job_id, j.job_id.split("_")[0], j.tenantry_id}]
        if not jobs:
            err.write("slurm_load_jobs error: Invalid job id specified\n")
            return 1
    if not jobs:
        out.write("No jobs in the system\n")
        return 0
    out.write(fm.format_scontrol_job(jobs, oneliner=oneliner))
    return 0


Handler = Callable[[list[str], Call, TextIO, TextIO, Mapping[str, str]], int]
HANDLERS: dict[str, Handler] = {
    "squeue": squeue,
    "sacct": sacct,
    "sbatch": sbatch,
    "scancel": scancel,
    "scontrol": scontrol,
}
