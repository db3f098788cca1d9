"""``tenantry guard scan``: run the untrusted-content guard on a file or stdin."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tenantry.cli.common import command, emit, group

EPILOG = """\
examples:
  tenantry guard scan job.out --origin job:12     label, redact and flag a job log
  some-command | tenantry guard scan - --json     findings as JSON
  tenantry guard scan README.md --mode redact     withhold instruction-like lines

exit status: 0 clean, 3 when secrets or instruction-like text were found
"""


def register(sub: Any) -> None:
    _, gsub = group(sub, "guard", "scan text for secrets and prompt injection")
    with command(gsub, "scan", _scan, "guard a file (or - for stdin)", epilog=EPILOG) as s:
        s.add_argument("path", help="file to scan, - for standard input")
        s.add_argument("--origin", default="", help="origin label, e.g. job:12 (default file:PATH)")
        s.add_argument("--mode", choices=("mark", "flag", "redact"), default="mark")


def _scan(args: argparse.Namespace) -> int:
    from tenantry.safety.guard import guard

    if args.path == "-":
        text = sys.stdin.read()
    else:
        with open(args.path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
    g = guard(
        text,
        args.origin or ("file:stdin" if args.path == "-" else f"file:{args.path}"),
        mode=args.mode,
    )

    def human(d: dict[str, Any]) -> str:
        lines = [f"# {g.notice()}"]
        lines.extend(
            f"# {f['kind']} {f['rule']} line {f['line']}: {f['action']}" for f in d["findings"]
        )
        return "\n".join(lines) + "\n" + g.text

    emit(args, g.to_dict(), human)
    return 3 if g.findings else 0
