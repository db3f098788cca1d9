"""Every op's policy action is one the schema and the baseline know.

A typo in an op's ``action=`` (``index.query`` for ``index_query``) would make
Cedar deny it for agents by default, silently; an action the baseline never
names is decided by nothing but the default. Both fail here instead.
"""

from __future__ import annotations

import importlib
import re

import pytest

from tenantry.core.models import Principal
from tenantry.gateway.app import OP_MODULES
from tenantry.safety.policy.engine import baseline_text
from tenantry.safety.policy.judge import Judge
from tenantry.safety.policy.schema import ACTIONS
from tenantry.service.ops import REGISTRY


def _op_actions() -> dict[str, str]:
    for mod in OP_MODULES:
        importlib.import_module(mod)
    return {name: op.action for name, op in REGISTRY.items() if op.action is not None}


def test_every_op_action_is_in_the_schema() -> None:
    unknown = {name: a for name, a in _op_actions().items() if a not in ACTIONS}
    assert unknown == {}


def test_every_op_action_is_named_by_the_baseline() -> None:
    named = set(re.findall(r'Action::"([\w.]+)"', baseline_text()))
    missing = {name: a for name, a in _op_actions().items() if a not in named}
    assert missing == {}


@pytest.mark.parametrize("op_name", ["index.find", "index.grep", "index.ls", "index.add"])
def test_agent_may_use_the_index(judge: Judge, agent: Principal, op_name: str) -> None:
    action = _op_actions()[op_name]
    d = judge.evaluate(agent, action, {"name": op_name})
    assert d.allowed, d.message
    assert d.rule == "agent-services"


def test_no_agent_op_falls_to_default_deny(judge: Judge, agent: Principal) -> None:
    """Each Target op is decided by a named rule for agents, never by the default."""
    for name, action in _op_actions().items():
        if ACTIONS.get(action) != "Target":
            continue
        d = judge.evaluate(agent, action, {"name": name})
        assert d.rule != "default-deny", (name, action, d.message)
