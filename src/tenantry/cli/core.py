"""Core commands: run, submit, status, jobs, wait, cancel, logs, sessions, events,
settings, serve, mcp, version. Standard library only at import time."""

from __future__ import annotations

import os
import sys
import time

from tenantry.cli.common import (
    add_json,
    client_from,
    command,
    emit,
    job_rows,
    settings_from,
    table,
)
from tenantry.core import errors

TYPE_CHECKING = False  # the CLI client path avoids importing typing (and argparse: fastrun)

if TYPE_CHECKING:
    import argparse
    from typing import Any

    from tenantry.cli.fastrun import RunArgs, SubmitArgs


def register(sub: Any) -> None:
    import argparse

    _register_run(sub)
    _register_jobs(sub)
    with command(sub, "sessions", _sessions, "principals (agents and humans) and their activity"):
        pass
    with command(
        sub,
        "events",
        _events,
        "telemetry events recorded by the daemon",
        epilog="examples:\n  tenantry events --since 600 --type job.state --json",
    ) as p:
        p.add_argument("--since", type=float, default=3600.0, help="seconds back (default 3600)")
        p.add_argument("--type", action="append", default=[], help="event type (repeatable)")
        p.add_argument("--limit", type=int, default=1000)
    with command(sub, "info", _info, "facility facts: backend, partitions, services"):
        pass
    with command(sub, "settings", _settings, "list every setting with its value and help"):
        pass
    with command(
        sub,
        "serve",
        _serve,
        "run the daemon in the foreground",
        json=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Run the Tenantry daemon on a private Unix socket. The CLI and the MCP"
        " shim start one on demand, so you rarely need this yourself.",
    ) as p:
        p.add_argument("--backend", choices=["local", "slurm"], help="job backend (default local)")
        p.add_argument(
            "--http",
            help="also serve the dashboard and /metrics on HOST:PORT (a daemon already running"
            " for this state directory is stopped first; jobs keep running)",
        )
        p.add_argument(
            "--facility",
            metavar="SOCKET",
            help="facility mode: run as this user's executor of the facility service at SOCKET"
            " (setting facility_address); it decides policy, budgets, kill switch and memory",
        )
    with command(
        sub,
        "mcp",
        _mcp,
        "serve MCP on stdio (point your coding agent here)",
        json=False,
        epilog="examples:\n  claude mcp add tenantry -- tenantry mcp\n"
        "  codex mcp add tenantry -- tenantry mcp",
    ):
        pass
    with command(sub, "version", _version, "print the version"):
        pass


def register_only(sub: Any, command: str) -> None:
    """``register`` for one command: ``run`` builds its own parser alone."""
    if command == "run":
        _register_run(sub)
    else:
        register(sub)


# -- run ----------------------------------------------------------------------------------
def _resources(args: argparse.Namespace | RunArgs | SubmitArgs) -> dict[str, Any]:
    """Only what was given: the script's #SBATCH lines fill the rest."""
    res: dict[str, Any] = {}
    if args.cpus is not None:
        res["cpus"] = args.cpus
    if args.mem or args.time:  # (units imports ``re``: a plain `tenantry run` does not)
        from tenantry.core.units import parse_mem_mb, parse_time_s

        if args.mem:
            res["mem_mb"] = parse_mem_mb(args.mem)
        if args.time:
            res["time_s"] = parse_time_s(args.time)
    if getattr(args, "gpus", 0):
        res["gpus"] = args.gpus
    for name in ("partition", "account"):  # `submit`'s only
        value = getattr(args, name, None)
        if value:
            res[name] = value
    return res


def _register_run(sub: Any) -> None:
    import argparse

    with command(
        sub,
        "run",
        _run,
        "run a short command (streams output, exits with its code)",
        description="Run a short command through Tenantry: on a warm lease when one fits,"
        " else locally. Output streams as it comes; the exit code is the command's.",
        epilog="examples:\n  tenantry run -- pytest -x tests/test_io.py\n"
        "  tenantry run --cpus 4 --mem 8G --where lease -- make -j4\n"
        "  tenantry run --json -- python -c 'print(1)'",
    ) as p:
        p.add_argument("--cpus", type=int, help="CPUs the command needs (default 1)")
        p.add_argument("--mem", help="memory, e.g. 4G (also the address-space limit locally)")
        p.add_argument("--gpus", type=int, default=0, help="GPUs the command needs")
        p.add_argument("--time", help="walltime of a lease to run on (Slurm format)")
        p.add_argument("--timeout", type=float, help="kill the command after this many seconds")
        p.add_argument("--where", choices=["auto", "local", "lease"], default="auto")
        p.add_argument("--idempotent", action="store_true", help="safe to retry if a lease is lost")
        add_json(p)
        p.add_argument("argv", nargs=argparse.REMAINDER, help="-- CMD ARGS...")


def _run(args: argparse.Namespace | RunArgs) -> int:
    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        raise errors.UsageError("no command given", hint="tenantry run -- CMD ARGS...")
    params = {
        "argv": argv,
        "cwd": os.getcwd(),
        "env": dict(os.environ),
        "timeout_s": args.timeout,
        "resources": _resources(args),
        "where": args.where,
        "idempotent": args.idempotent,
    }
    client = client_from(args)
    result: dict[str, Any] = {}
    out, err = sys.stdout, sys.stderr
    for chunk in client.stream("commands.run", params):
        if "stream" in chunk and not args.json:
            (out if chunk["stream"] == "stdout" else err).write(chunk["data"])
            (out if chunk["stream"] == "stdout" else err).flush()
        elif "result" in chunk:
            result = chunk["result"] or {}
        elif "warnings" in chunk and not args.json:
            for w in chunk["warnings"]:
                err.write(f"tenantry: warning: {w}\n")
    if args.json:
        emit(args, result)
    else:
        if result.get("reason"):
            err.write(f"tenantry: {result['reason']}\n")
        for lesson in result.get("lessons") or []:
            title = lesson.get("title") or lesson.get("body", "")[:80]
            err.write(f"tenantry: lesson [{lesson.get('trust', '?')}] {title}\n")
    code = result.get("exit_code")
    if code is None:
        return 1
    return int(code) if code >= 0 else 128 + (-int(code))


# -- jobs ---------------------------------------------------------------------------------
def _register_jobs(sub: Any) -> None:
    import argparse

    with command(
        sub,
        "submit",
        _submit,
        "submit a batch job (prints its id)",
        description="Submit a batch script, sbatch-style (#SBATCH lines in the script are"
        " read; options given here win). Identical submissions (same"
        " script, arguments, options and cwd) within the dedup window return the"
        " existing job unless --force is given.",
        epilog="examples:\n  tenantry submit --time 10 --cpus 2 train.sh --epochs 3\n"
        "  tenantry submit --json -J sweep -o logs/%j.out sweep.sh",
    ) as p:
        p.add_argument("-J", "--job-name", default="", help="job name")
        p.add_argument("-c", "--cpus", "--cpus-per-task", type=int, dest="cpus", help="CPUs")
        p.add_argument("--mem", help="memory, e.g. 4G")
        p.add_argument("-G", "--gpus", type=int, default=0, help="GPUs")
        p.add_argument("-t", "--time", help="time limit (minutes, H:M:S or D-H:M:S)")
        p.add_argument("-p", "--partition")
        p.add_argument("-A", "--account")
        p.add_argument("-o", "--output", default="", help="stdout file (%%j = job id)")
        p.add_argument("-e", "--error", default="", help="stderr file (default: with stdout)")
        p.add_argument("-a", "--array", default="", help="array spec, e.g. 1-10%%2 (Slurm only)")
        p.add_argument(
            "--force", action="store_true", help="submit even if an identical job exists"
        )
        add_json(p)
        p.add_argument("script", help="the batch script (must start with #!)")
        p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")

    with command(sub, "status", _status, "status of jobs (from the shared cache)") as p:
        p.add_argument("ids", nargs="+", metavar="JOBID")

    with command(sub, "jobs", _jobs, "list your jobs (from the shared cache)") as p:
        p.add_argument("--state", action="append", default=[], help="filter by state (repeatable)")
        p.add_argument("--session", action="store_true", help="only this agent session's jobs")
        p.add_argument("--limit", type=int, default=200)

    with command(
        sub,
        "wait",
        _wait,
        "block until a job ends (no polling loop on your side)",
        description="Block until the job reaches a terminal state. Exit 0 when it"
        " COMPLETED, 1 for any other end state, 124 when --timeout passed first.",
    ) as p:
        p.add_argument("id", metavar="JOBID")
        p.add_argument("--timeout", type=float, help="give up after this many seconds")

    with command(sub, "cancel", _cancel, "cancel a job") as p:
        p.add_argument("id", metavar="JOBID")

    with command(
        sub,
        "logs",
        _logs,
        "print the tail of a job's output",
        description="Print the tail of a job's output. For an array job: every task's,"
        " each under a header, or one task's with --task.",
        epilog="examples:\n  tenantry logs t12 --tail 50\n  tenantry logs t13 --task 4 --stderr",
    ) as p:
        p.add_argument("id", metavar="JOBID")
        p.add_argument("--tail", type=int, default=200, help="last N lines (0 = all kept)")
        p.add_argument("--stderr", action="store_true", help="the error file instead of output")
        p.add_argument("--task", type=int, help="one task of an array job (default: every task)")


def _submit(args: argparse.Namespace | SubmitArgs) -> int:
    # os.path, not pathlib (and its urllib.parse and ipaddress): this starts cold
    try:
        with open(args.script) as fh:  # the locale's encoding, as Path.read_text
            text = fh.read()
    except FileNotFoundError as exc:
        raise errors.UsageError(f"script {args.script!r} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise errors.UsageError(f"cannot read script {args.script!r}: {exc}") from exc
    params = {
        "script": os.path.realpath(args.script),
        "script_text": text,
        "args": list(args.args),
        "cwd": os.getcwd(),
        "name": args.job_name,
        "resources": _resources(args),
        "output": args.output,
        "error": args.error,
        "env": dict(os.environ),
        "array": args.array,
        "force": args.force,
    }
    res = client_from(args).call("jobs.submit", params)
    if args.json:
        emit(args, res)
        return 0
    if res.get("existing"):
        # said on stdout, where the id goes: this is not a new submission
        print(f"{res['job']['id']} (existing job, {res['job']['state']}: {res.get('note', '')})")
        return 0
    print(res["job"]["id"])
    if res.get("note"):
        sys.stderr.write(f"tenantry: {res['note']}\n")
    return 0


def _status(args: argparse.Namespace) -> int:
    res = client_from(args).call("jobs.status", {"ids": args.ids})
    emit(args, res, lambda r: job_rows(r["jobs"]))
    if not args.json:
        for lesson in (x for job in res["jobs"] for x in job.get("lessons") or []):
            sys.stderr.write(f"tenantry: lesson [{lesson.get('trust', '?')}] {lesson['title']}\n")
    return 0


def _jobs(args: argparse.Namespace) -> int:
    res = client_from(args).call(
        "jobs.list", {"all": not args.session, "states": args.state, "limit": args.limit}
    )
    emit(args, res, lambda r: job_rows(r["jobs"]))
    return 0


def _wait(args: argparse.Namespace) -> int:
    result: dict[str, Any] = {}
    for chunk in client_from(args).stream("jobs.wait", {"id": args.id, "timeout_s": args.timeout}):
        if "result" in chunk:
            result = chunk["result"]
    emit(args, result, lambda r: job_rows([r["job"]]))
    if not args.json:  # lessons attached to a failed job, as `run` prints them
        for lesson in result.get("lessons") or []:
            title = lesson.get("title") or lesson.get("body", "")[:80]
            sys.stderr.write(f"tenantry: lesson [{lesson.get('trust', '?')}] {title}\n")
    if result.get("timed_out"):
        return 124
    return 0 if result["job"]["state"] == "COMPLETED" else 1


def _cancel(args: argparse.Namespace) -> int:
    res = client_from(args).call("jobs.cancel", {"id": args.id})
    emit(args, res, lambda r: f"{r['job']['id']} {r['job']['state']}")
    return 0


def _logs(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {
        "id": args.id,
        "tail": args.tail,
        "stream": "stderr" if args.stderr else "stdout",
    }
    if args.task is not None:
        params["task"] = str(args.task)
    res = client_from(args).call("jobs.logs", params)
    emit(args, res, lambda r: r["text"] or f"({r.get('note', 'empty')})")
    return 0


# -- the rest -----------------------------------------------------------------------------
def _sessions(args: argparse.Namespace) -> int:
    res = client_from(args).call("sessions.list", {})

    def human(r: dict[str, Any]) -> str:
        rows = [
            [
                s["agent"],
                s.get("kind", "-"),
                s["session"] or "-",
                s["host"],
                s["project"] or "-",
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s["first_seen"])),
                time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s["last_seen"])),
                str(s["requests"]),
            ]
            for s in r["sessions"]
        ]
        return table(
            rows, ["AGENT", "KIND", "SESSION", "HOST", "PROJECT", "FIRST", "LAST", "REQUESTS"]
        )

    emit(args, res, human)
    return 0


def _events(args: argparse.Namespace) -> int:
    res = client_from(args).call(
        "events.list", {"since": -abs(args.since), "types": args.type, "limit": args.limit}
    )

    def human(r: dict[str, Any]) -> str:
        rows = [
            [
                time.strftime("%H:%M:%S", time.localtime(e["ts"])),
                e["type"],
                e["principal"],
                e["subject"],
                e["outcome"],
            ]
            for e in r["events"]
        ]
        return table(rows, ["TIME", "TYPE", "PRINCIPAL", "SUBJECT", "OUTCOME"])

    emit(args, res, human)
    return 0


def _info(args: argparse.Namespace) -> int:
    res = client_from(args).call("facility.info", {})
    emit(args, res)
    return 0


def _settings(args: argparse.Namespace) -> int:
    from tenantry.core.settings import DECLARED

    s = settings_from(args)
    shown = s.shown()
    data = [
        {
            "name": d.name,
            "value": shown[d.name],
            "default": d.default,
            "help": d.help,
            "env": f"TENANTRY_{d.name.upper()}",
        }
        for d in DECLARED
    ]
    emit(
        args,
        data,
        lambda rows: table(
            [[r["name"], str(r["value"]), r["help"]] for r in rows], ["NAME", "VALUE", "HELP"]
        ),
    )
    return 0


def _serve(args: argparse.Namespace) -> int:
    from tenantry.gateway.server import run

    settings = settings_from(args, facility_address="facility", http="http")
    if args.http:
        from tenantry.cli.daemon import stop

        pid = stop(settings, 30.0)  # one started on demand serves no HTTP: take its place
        if pid:
            sys.stderr.write(f"tenantry: stopped the running daemon (pid {pid}) to serve HTTP\n")
    return run(settings)


def _mcp(args: argparse.Namespace) -> int:
    from tenantry.gateway.mcp_stdio import run_stdio

    return run_stdio(settings_from(args))


def _version(args: argparse.Namespace) -> int:
    from tenantry import __version__

    emit(args, {"version": __version__}, lambda d: d["version"])
    return 0
