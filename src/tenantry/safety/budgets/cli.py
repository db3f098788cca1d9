"""``tenantry budgets``: what is used and left of your budgets and rate limits."""

from __future__ import annotations

import argparse
from typing import Any

from tenantry.cli.common import client_from, command, emit, table

EPILOG = """\
examples:
  tenantry budgets                 used / limit / reset of every budget that applies now
  tenantry budgets --json          the same as JSON (fraction, reset_at epoch)

Budgets are configured in the file named by the budgets_file setting; see docs/guard.md.
"""


def register(sub: Any) -> None:
    with command(sub, "budgets", _show, "show your budgets and rate limits", epilog=EPILOG):
        pass


def _show(args: argparse.Namespace) -> int:
    data = client_from(args).call("budgets.show", {})

    def human(d: dict[str, Any]) -> str:
        rows = [
            [
                f"{b['scope']}:{b['window']}",
                b["metric"],
                f"{b['used']:g}",
                f"{b['limit']:g}",
                f"{100 * b['fraction']:.0f} %",
                b["resets"],
            ]
            for b in d["budgets"]
        ]
        if not rows:
            return f"no budgets apply to {d['principal']} (humans are not budgeted by default)"
        return table(rows, ["SCOPE", "METRIC", "USED", "LIMIT", "USE", "RESETS"])

    emit(args, data, human)
    return 0
