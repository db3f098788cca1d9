"""``tenantry report`` and ``tenantry simulate``.

``register`` and this module's top level use only the standard library so the
CLI starts fast; polars and rich load inside the handlers.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenantry.cli.common import client_from, command, emit
from tenantry.core.errors import UsageError

REPORT_EPILOG = """\
inputs (format detected from the content; force with --input-format):
  sacct --parsable2 dump   Open XDMoD's field set without header, or any field set with a
                           header line (--format=ALL too); --parsable (-p) as well; make
                           it with TZ=UTC (or say --dump-tz ZONE)
  sacct --json output      Slurm 22.05 and newer shapes
  job completion log       JobCompType=jobcomp/filetxt's JobCompLoc (slurmctld's local
                           times: say --dump-tz ZONE); no comments, so no Tenantry tags
  PBS accounting log       PBS Pro / OpenPBS / TORQUE server_priv/accounting/YYYYMMDD
                           (Q, E, D, A records; epoch times)
  SWF trace                Standard Workload Format (Parallel Workloads Archive), or
                           extended SWF (extra columns, absolute epoch times)
  tenantry.db              Tenantry's own store (read-only): sessions, commands, jobs
  agent transcripts        Claude Code session JSONL, Codex rollout JSONL, Gemini CLI
                           chats/session-*.json (tool calls = agent commands)
  shell history            bash with HISTTIMEFORMAT, zsh extended history (human commands)

examples:
  TZ=UTC sacct --allusers --parsable2 --allocations --duplicates \\
      --starttime 2026-01-01 --format=ALL > jobs.txt
  tenantry report jobs.txt                               summary table in the terminal
  tenantry report jobs.txt --out report.html             self-contained HTML with figures
  tenantry report jobs.txt --format md --out report.md   Markdown tables
  tenantry report jobs.txt ~/.local/state/tenantry/tenantry.db --json
  tenantry report jobs.txt --since 2026-01-01 --until 2026-02-01 --format csv --out m.csv
  tenantry report a.txt b.swf --tz America/Chicago       two clusters, local hours

Attribution rests on evidence: Tenantry's tags, the AdminComment tag of the
job_submit.lua plugin (shipped in tenantry/report/slurm/), agent markers in
--env-vars/SubmitLine/Comment. Behaviour alone never says "agent": it only
raises the upper bound of the agent share ("agent-like, no evidence").
Reading no records is an error (exit 65).

live (facility mode; through your daemon to the facility service):
  tenantry report --live                       the facility's last 7 days, every user's
                                               if you are staff, else your own rows
  tenantry report --live --days 30 --json      the same report as JSON, with a "facility"
                                               part: per user, per project, per agent
                                               product, hour of week (agent vs human)
  tenantry report --live --out facility.html   the HTML report of the live telemetry
Whose rows you get is decided by the service from your uid (SO_PEERCRED, or MUNGE on
another login node): staff (the facility_staff_group, as themselves) see everyone; a
normal user's report is narrowed to their own rows and says so ("scope").
"""

SIM_EPILOG = """\
examples:
  tenantry simulate --out trace.txt                       paper-calibrated sacct dump
  tenantry simulate --users 500 --days 60 --format swf --out trace.swf
  tenantry simulate --calibrate none --hidden-agents 0.5 --out hard.txt
  tenantry report trace.txt                               reproduces the paper's table

Ground-truth labels are written next to the trace as <out>.labels.csv.
"""

FORMATS = ("html", "md", "json", "csv")
LARGE = 64 << 20


REPORT_HELP = "characterize a facility's agent vs human workload from accounting logs"
REPORT_ABOUT = (
    "Measure agent users' share of users, submissions, core-hours and "
    "GPU-hours, their command rate, hour-of-week patterns, waste and more."
)
SIM_HELP = "generate a labelled facility trace (humans and agents)"
SIM_ABOUT = (
    "Write a realistic accounting trace of human and agent users, with "
    "ground-truth labels; calibrated to the paper's facility by default."
)
INPUT_FORMATS = ("auto", "sacct", "json", "swf", "jobcomp", "pbs", "telemetry", "claude",
                 "codex", "gemini")  # fmt: skip


def register(sub: Any) -> None:
    with command(
        sub, "report", _report, REPORT_HELP, description=REPORT_ABOUT, epilog=REPORT_EPILOG
    ) as p:
        p.add_argument(
            "inputs", nargs="*", metavar="INPUT", help="accounting dumps and stores (or --live)"
        )
        p.add_argument(
            "--live",
            action="store_true",
            help="read the facility service's telemetry of every user you may see, not files",
        )
        p.add_argument(
            "--days", type=float, default=7.0, help="--live: the last N days (default 7)"
        )
        p.add_argument("--format", choices=FORMATS, help="document format (default: from --out)")
        p.add_argument("--out", help="write the document here ('-' for stdout)")
        p.add_argument("--since", help="window start, UTC (2026-01-01 or 2026-01-01T08:00)")
        p.add_argument("--until", help="window end (exclusive), UTC")
        p.add_argument(
            "--tz",
            help="the facility's time zone (Europe/Berlin) for hours of day and week "
            "(default: an SWF header's TimeZoneString, else UTC)",
        )
        p.add_argument(
            "--dump-tz",
            help="the zone a sacct dump's times were written in, when it was not made with TZ=UTC "
            "(default: UTC)",
        )
        p.add_argument(
            "--input-format",
            default="auto",
            choices=(*INPUT_FORMATS, "history"),
            help="force the input format",
        )
        p.add_argument("--fields", help="sacct field order for a dump without header (a,b,c)")
        p.add_argument("--users-csv", help="also write the per-user classification here")

    with command(
        sub, "simulate", _simulate, SIM_HELP, description=SIM_ABOUT, epilog=SIM_EPILOG
    ) as s:
        s.add_argument("--users", type=int, default=200, help="number of users (default 200)")
        s.add_argument("--days", type=int, default=28, help="length of the trace (default 28)")
        s.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
        s.add_argument(
            "--calibrate", default="paper", choices=("paper", "none"), help="target profile"
        )
        s.add_argument("--agent-fraction", type=float, help="share of users running agents (0-1)")
        s.add_argument(
            "--hidden-agents",
            type=float,
            default=0.0,
            help="share of agent users that never tag jobs",
        )
        s.add_argument("--start", help="first day, UTC (default 2026-01-05, a Monday)")
        s.add_argument("--format", default="sacct", choices=("sacct", "xdmod", "swf", "json"))
        s.add_argument("--out", required=True, help="trace file to write")


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        t = datetime.fromisoformat(text)
    except ValueError as exc:
        raise UsageError(
            f"not a date or time: {text!r}", hint="use 2026-01-31 or 2026-01-31T08:00"
        ) from exc
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def _format_of(args: argparse.Namespace) -> str | None:
    if args.format:
        return str(args.format)
    if args.out and args.out != "-":
        ext = Path(args.out).suffix.lower().lstrip(".")
        return {
            "htm": "html",
            "html": "html",
            "md": "md",
            "markdown": "md",
            "json": "json",
            "csv": "csv",
        }.get(ext, "html")
    return None


def _live(args: argparse.Namespace) -> dict[str, Any]:
    if args.inputs or args.since or args.until or args.users_csv:
        raise UsageError(
            "--live reads the facility service, not INPUT files, --since/--until or --users-csv",
            hint="use --days N for the window, or drop --live to read files",
        )
    params = {"days": args.days, "tz": args.tz or "UTC"}
    report: dict[str, Any] = client_from(args).call("report.live", params)
    note = report.get("scope", {}).get("note")
    if note:
        sys.stderr.write(f"tenantry report --live: {note}\n")
    return report


def _report(args: argparse.Namespace) -> int:
    if args.live:
        report = _live(args)
    elif not args.inputs:
        raise UsageError(
            "give INPUT files (sacct dumps, SWF, stores, transcripts) or --live",
            hint="tenantry report --help shows both",
        )
    else:
        report = _from_files(args)
    return _render(args, report)


def _from_files(args: argparse.Namespace) -> dict[str, Any]:
    from tenantry.report import metrics, sources

    since, until = parse_time(args.since), parse_time(args.until)
    if since and until and since >= until:
        raise UsageError("--since must be before --until")
    fields = args.fields.split(",") if args.fields else None
    total = sum(Path(p).stat().st_size for p in args.inputs if Path(p).is_file())
    if total >= LARGE and not args.json:
        from rich.progress import BarColumn, DownloadColumn, Progress, TimeElapsedColumn

        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TimeElapsedColumn(),
            transient=True,
            console=_console(stderr=True),
        ) as bar:
            task = bar.add_task("reading", total=total)
            data = sources.load(
                args.inputs,
                kind=args.input_format,
                tz=args.dump_tz,
                local_tz=args.tz,
                fields=fields,
                progress=lambda n: bar.advance(task, n),
            )
            bar.update(task, completed=total, description="measuring")
            report = metrics.build(data, since, until, tz=args.tz)
    else:
        data = sources.load(
            args.inputs, kind=args.input_format, tz=args.dump_tz, local_tz=args.tz, fields=fields
        )
        report = metrics.build(data, since, until, tz=args.tz)
    if args.users_csv:
        metrics.users_table(data, args.tz).write_csv(args.users_csv)
    return report


def _render(args: argparse.Namespace, report: dict[str, Any]) -> int:
    from tenantry.report import render_data, render_html, render_markdown

    fmt = _format_of(args)
    doc = None
    if fmt is not None:
        doc = {
            "html": render_html.render,
            "md": render_markdown.render,
            "json": render_data.to_json,
            "csv": render_data.to_csv,
        }[fmt](report)
    if doc is not None and (args.out in (None, "-")):
        sys.stdout.write(doc)
        return 0
    if doc is not None:
        Path(args.out).write_text(doc, encoding="utf-8")
    if args.json:
        emit(args, report)
    else:
        _summary(report, args.out)
    return 0


def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr)


def _summary(report: dict[str, Any], out: str | None) -> None:
    from rich.table import Table

    from tenantry.report.tables import headline_rows
    from tenantry.report.tables import num as _num

    t = Table(title="Agent share of the facility", title_justify="left")
    for h in ("metric", "agent", "agent-like (no evidence)", "human", "agent bounds", "total"):
        t.add_column(h, justify="left" if h == "metric" else "right")
    for row in headline_rows(report):
        t.add_row(*row)
    c = _console()
    c.print(t)
    cr = report["command_rate"]
    c.print(
        f"command rate agent/human: [bold]{_num(cr['ratio_pooled'])}x[/bold] pooled, "
        f"{_num(cr['ratio_of_medians'])}x ratio of medians (commands per active hour)"
    )
    bad = sum(s["unreadable"] for s in report["inputs"])
    recs = sum(s["records"] for s in report["inputs"])
    dups = report.get("combined", {}).get("duplicates_dropped", 0)
    tz = report["time_zone"]
    c.print(
        f"{recs:,} job records read; {bad:,} unreadable line(s); {dups:,} duplicate(s) dropped; "
        f"hours in {tz['zone']} ({tz['source']})" + (f"; wrote {out}" if out else "")
    )
    for s in report["inputs"]:
        for note in s.get("notes", []):
            c.print(f"  note: {s['source']}: {note}", markup=False)
        for u in s["unreadable_examples"][:5]:
            c.print(f"  unreadable: {u['source']} line {u['line']}: {u['reason']}")
    if "facility" in report:
        _facility_summary(c, report["facility"])


def _facility_summary(c: Any, fac: dict[str, Any]) -> None:
    from rich.table import Table

    cols = ("agent_commands", "human_commands", "agent_jobs", "human_jobs")
    for title, key, name in (
        ("Per user", "by_user", "user"),
        ("Per project", "by_project", "project"),
    ):
        t = Table(title=title, title_justify="left")
        t.add_column(name)
        for col in cols:
            t.add_column(col.replace("_", " "), justify="right")
        for row in fac[key]:
            t.add_row(str(row[name] or "-"), *(str(row[col]) for col in cols))
        c.print(t)
    t = Table(title="Per agent product", title_justify="left")
    for h in ("agent", "users", "sessions", "commands", "jobs"):
        t.add_column(h, justify="left" if h == "agent" else "right")
    for row in fac["by_agent_product"]:
        t.add_row(*(str(row[h]) for h in ("agent", "users", "sessions", "commands", "jobs")))
    c.print(t)


def _simulate(args: argparse.Namespace) -> int:
    from tenantry.report import simulate, simulate_write

    profile = simulate.profile_named(
        args.calibrate,
        agent_fraction=args.agent_fraction,
        hidden_agent_fraction=args.hidden_agents,
    )
    trace = simulate.generate(
        users=args.users,
        days=args.days,
        seed=args.seed,
        profile=profile,
        start=parse_time(args.start),
    )
    paths = simulate_write.write(trace, Path(args.out), args.format)
    note = simulate_write.calibration_note(trace)
    note["written"] = [str(p) for p in paths]
    emit(
        args,
        note,
        lambda d: (
            f"wrote {d['records']:,} job records of {d['users']} users "
            f"({d['agent_users']} agent users) to {paths[0]}; labels in {paths[1]}"
        ),
    )
    return 0
