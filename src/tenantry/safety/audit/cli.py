"""``tenantry audit verify|show``: check and read the audit log (no daemon needed)."""

from __future__ import annotations

import argparse
import time
from datetime import datetime
from typing import Any

from tenantry.cli.common import command, emit, group, settings_from, table

VERIFY_EPILOG = """\
examples:
  tenantry audit verify                 exit 0 when the chain and anchor are intact
  tenantry audit verify --json          the same, as a JSON report of problems
  tenantry audit verify --dir /var/log/tenantry/audit --key /etc/tenantry/audit.key

exit status: 0 intact, 1 tampered (edited, deleted, reordered or truncated records)
"""

SHOW_EPILOG = """\
examples:
  tenantry audit show --since 1h        records of the last hour
  tenantry audit show --since 2026-11-30T19:00 --principal alice/codex/s1
  tenantry audit show --action session.stopped --json
"""


def register(sub: Any) -> None:
    _, asub = group(sub, "audit", "verify and read the tamper-evident audit log")
    with command(
        asub,
        "verify",
        _verify,
        "detect edits, deletions, reordering or truncation",
        epilog=VERIFY_EPILOG,
    ) as v:
        _location(v)
        v.add_argument(
            "--anchor",
            metavar="SEQ:HASH",
            help="an anchor kept elsewhere (from syslog/journald: `journalctl -t tenantry-audit`)"
            " that record SEQ must still match",
        )
    with command(asub, "show", _show, "print audit records", epilog=SHOW_EPILOG) as s:
        _location(s)
        s.add_argument("--since", help="age (30m, 2h, 1d), ISO time or epoch seconds")
        s.add_argument("--principal", help="only this principal key (user/agent/session)")
        s.add_argument("--action", help="only this action (e.g. command.finished)")
        s.add_argument("--limit", type=int, default=200, help="most records printed (default 200)")


def _location(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dir", help="audit directory (default: setting audit_dir or <state>/audit)")
    p.add_argument("--key", help="HMAC key file (default: setting audit_key_file)")


def _open(args: argparse.Namespace) -> tuple[Any, bytes | None]:
    from pathlib import Path

    from tenantry.safety.audit.chain import load_key
    from tenantry.safety.audit.component import audit_paths

    directory, key_path = audit_paths(settings_from(args))
    if args.dir:
        directory = Path(args.dir)
        if not args.key and key_path is not None and key_path.parent != directory:
            key_path = directory / key_path.name
    if args.key:
        key_path = None if args.key == "none" else Path(args.key)
    key = load_key(key_path, create=False) if key_path else None
    return directory, key


def _verify(args: argparse.Namespace) -> int:
    from tenantry.core.errors import UsageError
    from tenantry.safety.audit.chain import verify

    directory, key = _open(args)
    external = None
    if args.anchor:
        seq, _, digest = args.anchor.partition(":")
        if not seq.isdigit() or len(digest) != 64:
            raise UsageError("--anchor wants SEQ:HASH (64 hex digits), as shipped to syslog")
        external = (int(seq), digest)
    report = verify(directory, key, external=external)

    def human(d: dict[str, Any]) -> str:
        if d["ok"]:
            note = "".join(f"\n  note: {w}" for w in d["warnings"])
            return f"audit log intact: {d['records']} records, {d['alg']} chain ({directory}){note}"
        lines = [f"audit log TAMPERED ({directory}): {len(d['problems'])} problem(s)"]
        for pr in d["problems"]:
            where = f"line {pr['line']}: " if pr["line"] else ""
            lines.append(f"  {pr['kind']}: {where}{pr['message']}")
        return "\n".join(lines)

    emit(args, report.to_dict(), human)
    return 0 if report.ok else 1


def parse_since(text: str, now: float | None = None) -> float:
    now = time.time() if now is None else now
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if text and text[-1] in units and text[:-1].replace(".", "", 1).isdigit():
        return now - float(text[:-1]) * units[text[-1]]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        from tenantry.core.errors import UsageError

        raise UsageError(
            f"cannot read --since {text!r}", hint="use 30m, 2h, 1d, an ISO time or epoch"
        ) from exc


def _show(args: argparse.Namespace) -> int:
    from tenantry.safety.audit.chain import iter_records

    directory, _key = _open(args)
    since = parse_since(args.since) if args.since else None
    out: list[dict[str, Any]] = []
    for _n, rec, _raw in iter_records(directory):
        if rec is None:
            continue
        if since is not None and float(rec.get("ts", 0)) < since:
            continue
        if args.principal and rec.get("principal") != args.principal:
            continue
        if args.action and rec.get("action") != args.action:
            continue
        out.append(rec)
    out = out[-args.limit :] if args.limit > 0 else out

    def human(rows: list[dict[str, Any]]) -> str:
        return table(
            [
                [
                    str(r.get("seq")),
                    time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(r.get("ts", 0)))),
                    str(r.get("principal", "")),
                    str(r.get("action", "")),
                    str(r.get("subject", "")),
                    str(r.get("decision", "")),
                    str(r.get("rule", "")),
                ]
                for r in rows
            ],
            ["SEQ", "TIME", "PRINCIPAL", "ACTION", "SUBJECT", "DECISION", "RULE"],
        )

    emit(args, out, human)
    return 0
