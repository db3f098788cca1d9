"""The policy context carries where a command really runs, so a rule can tell login from lease."""

from __future__ import annotations

from typing import Any

from tenantry.core.models import Principal
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge

from .conftest import CWD

NO_BUILDS_ON_LOGIN = """
@id("facility-no-builds-on-login")
@message("builds run on a lease here, not on the login node")
forbid (principal, action == Action::"run_command", resource is Command)
when { context.where == "login" && resource.program == "make" };
"""


def test_a_rule_can_tell_the_login_node_from_a_lease(facts: Facts, agent: Principal) -> None:
    placed: dict[str, str] = {}

    def where_of(p: Principal, params: dict[str, Any]) -> str:
        return placed["at"]

    eng = Engine(facility=("facility.cedar", NO_BUILDS_ON_LOGIN))
    j = Judge(eng, facts, read_files=False, hour=12, where_of=where_of)
    params = {"argv": ["make", "-j2"], "cwd": CWD, "where": "local"}
    placed["at"] = "login"
    d = j.evaluate(agent, "run_command", params)
    assert (d.allowed, d.rule) == (False, "facility-no-builds-on-login")
    placed["at"] = "lease"  # the agent asked for local; the daemon put it on a lease
    assert j.evaluate(agent, "run_command", params).allowed


def test_offline_the_asked_where_stands_in(facts: Facts, agent: Principal) -> None:
    j = Judge(Engine(facility=("facility.cedar", NO_BUILDS_ON_LOGIN)), facts, read_files=False)
    local = {"argv": ["make"], "cwd": CWD, "where": "local"}
    assert not j.evaluate(agent, "run_command", local).allowed
    assert j.evaluate(agent, "run_command", {**local, "where": "lease"}).allowed
