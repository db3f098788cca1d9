"""Through the real daemon: a budget warning in a tool result, then a hard stop."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tenantry.core.errors import BudgetExceeded

BUDGETS = """
warn_fraction = 0.6
replace_defaults = true
[session.day]
commands = 3
"""


def run(client: Any, cwd: str) -> list[dict[str, Any]]:
    return list(client.stream("commands.run", {"argv": ["echo", "hi"], "cwd": cwd}))


def test_budget_warning_then_hard_stop(start_daemon: Any) -> None:
    d = start_daemon({"budgets.toml": BUDGETS}, TENANTRY_BUDGETS_FILE="{state}/budgets.toml")
    agent = d.client(agent="codex", session="s1")
    first = run(agent, d.state)
    assert not any("warnings" in c for c in first)
    assert first[-1]["result"]["exit_code"] == 0
    second = run(agent, d.state)
    warnings = [w for c in second if "warnings" in c for w in c["warnings"]]
    assert warnings and "67 % of today's command budget used (2 of 3" in warnings[0]
    run(agent, d.state)
    with pytest.raises(BudgetExceeded) as info:
        run(agent, d.state)
    assert "today's command budget for session " in info.value.message
    assert "exhausted" in info.value.message and "resets" in info.value.message
    assert info.value.details["limit"] == 3
    # the same refusal through the CLI an agent would run
    env = {"TENANTRY_AGENT": "codex", "TENANTRY_SESSION": "s1"}
    cli = d.cli("run", "--", "true", env=env)
    assert cli.returncode == 77
    assert "exhausted" in cli.stderr
    # the human is not budgeted; the agent sees what it used
    assert run(d.client(), d.state)[-1]["result"]["exit_code"] == 0
    out = d.cli("budgets", "--json", env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    shown = json.loads(out.stdout)
    day = [b for b in shown["budgets"] if b["metric"] == "commands"]
    assert day[0]["used"] == 3 and day[0]["limit"] == 3
