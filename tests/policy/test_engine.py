"""Cedar engine: layering, narrowing-only user policy, fail-closed evaluation, messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tenantry.core.errors import PolicyInvalid
from tenantry.core.models import Principal
from tenantry.safety.policy.cases import case_params, case_principal, load_cases
from tenantry.safety.policy.engine import Engine, baseline_text
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge

from .conftest import CASES, CWD

SIBLING_OK = """
@id("facility-sibling-cancel")
@message("this facility lets sessions of one user cancel each other's jobs")
permit (principal is Agent, action == Action::"cancel_job", resource is Job)
when { resource.owner == "sibling" };
"""
NO_GIT_PUSH = """
@id("user-no-push")
@message("I review pushes myself")
forbid (principal is Agent, action == Action::"run_command", resource is Command)
when { resource.program == "git" && resource.subcommand == "push" };
"""


def judge_with(facts: Facts, facility: str | None = None, user: str | None = None) -> Judge:
    eng = Engine(
        facility=("facility.cedar", facility) if facility else None,
        user=("user.cedar", user) if user else None,
    )
    return Judge(eng, facts, read_files=False)


def test_facility_can_widen_where_the_baseline_only_declined(
    facts: Facts, agent: Principal
) -> None:
    base = judge_with(facts)
    assert base.evaluate(agent, "cancel_job", {"id": "1003"}).rule == "default-deny"
    wide = judge_with(facts, facility=SIBLING_OK)
    d = wide.evaluate(agent, "cancel_job", {"id": "1003"})
    assert d.allowed and d.rule == "facility-sibling-cancel" and d.source == "facility"
    # but never past a baseline forbid
    assert not wide.evaluate(agent, "cancel_job", {"id": "2001"}).allowed


def test_user_policy_narrows(facts: Facts, agent: Principal) -> None:
    j = judge_with(facts, user=NO_GIT_PUSH)
    d = j.evaluate(agent, "run_command", {"command": "git push origin main", "cwd": CWD})
    assert (d.allowed, d.rule, d.source) == (False, "user-no-push", "user")
    assert d.message.startswith("I review pushes myself")
    assert j.evaluate(agent, "run_command", {"command": "git status", "cwd": CWD}).allowed


def test_user_policy_may_not_permit(facts: Facts) -> None:
    with pytest.raises(PolicyInvalid, match="only add forbid"):
        judge_with(facts, user=SIBLING_OK)


def test_no_baseline_marker_replaces_the_baseline(facts: Facts, agent: Principal) -> None:
    text = "// tenantry: no-baseline\n" + baseline_text().replace(
        'when { resource.owner == "self" };', 'when { resource.owner != "other" };'
    )
    j = judge_with(facts, facility=text)
    assert j.evaluate(agent, "cancel_job", {"id": "1002"}).allowed
    assert j.engine.sources == ["facility"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("permit (principal, action, resource", "cannot parse"),
        ("forbid (principal, action, resource is Job) when { resource.gpu > 1 };", "schema"),
        ('forbid (principal, action == Action::"launch_rocket", resource);', "schema"),
    ],
)
def test_bad_policies_refuse_to_load(facts: Facts, text: str, match: str) -> None:
    with pytest.raises(PolicyInvalid, match=match):
        judge_with(facts, facility=text)


def test_evaluation_error_denies(facts: Facts, agent: Principal) -> None:
    overflow = """
@id("facility-overflow")
forbid (principal is Agent, action == Action::"submit_job", resource is Job)
when { resource.gpus * 9223372036854775807 > 1000 };
"""
    j = judge_with(facts, facility=overflow)
    d = j.evaluate(agent, "submit_job", {"argv": ["sbatch", "-G", "2", "-t", "10", "x.sh"]})
    assert (d.allowed, d.rule) == (False, "evaluation-error")
    assert "fail closed" in d.message


def test_normalizer_bug_denies(
    facts: Facts, agent: Principal, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tenantry.safety.policy.judge as judge_mod

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(judge_mod, "build", boom)
    d = judge_with(facts).evaluate(agent, "run_command", {"command": "ls"})
    assert (d.allowed, d.rule) == (False, "normalizer-error")


def test_unknown_action_and_bad_params_deny(
    judge: Judge, agent: Principal, human: Principal
) -> None:
    d = judge.evaluate(agent, "launch_rocket", {})
    assert (d.allowed, d.rule) == (False, "default-deny") and d.error is None
    assert "launch_rocket" in d.message and "facility policy" in d.message
    assert judge.evaluate(human, "launch_rocket", {}).allowed
    d = judge.evaluate(agent, "run_command", {"argv": "ls"})
    assert (d.allowed, d.rule) == (False, "invalid-request") and d.error is not None


def test_memory_actions(judge: Judge, agent: Principal, human: Principal) -> None:
    for action in ("memory.read", "memory.write", "memory.verify"):
        assert judge.evaluate(agent, action, {"query": "cuda"}).allowed, action
    d = judge.evaluate(agent, "memory.approve", {"id": "L1"})
    assert (d.allowed, d.rule) == (False, "agent-no-memory-approval")
    assert judge.evaluate(human, "memory.approve", {"id": "L1"}).allowed


def test_every_message_is_filled_and_names_a_rule(judge: Judge) -> None:
    for case in load_cases(CASES):
        d = judge.evaluate(
            case_principal(case), case["action"], case_params(case["action"], case["args"],
                                                              case.get("context"))
        )  # fmt: skip
        assert d.rule and d.message, case["id"]
        assert not re.search(r"\{[a-z_]+\}", d.message), (case["id"], d.message)


def test_files_are_read(tmp_path: Path, facts: Facts, agent: Principal) -> None:
    fac = tmp_path / "policy.cedar"
    fac.write_text(SIBLING_OK)
    eng = Engine.from_files(str(fac), str(tmp_path / "missing.cedar"))
    assert eng.sources == ["baseline", "facility"]
    assert Engine.from_files(str(tmp_path / "nope"), None).sources == ["baseline"]


def test_per_action_subsets_decide_like_the_full_set(facts: Facts) -> None:
    fast = Judge(Engine(), facts, read_files=False, hour=12)
    slow = Judge(Engine(), facts, read_files=False, hour=12)
    slow.engine.by_action = {}  # every request against the whole policy set
    for case in load_cases(CASES):
        args = (case_principal(case), case["action"],
                case_params(case["action"], case["args"], case.get("context")))  # fmt: skip
        a, b = fast.evaluate(*args), slow.evaluate(*args)
        assert (a.decision, a.rule, a.message) == (b.decision, b.rule, b.message), case["id"]


def test_package_exports() -> None:
    import subprocess
    import sys

    import tenantry.safety.policy as pkg

    for name in pkg.__all__:
        assert getattr(pkg, name).__name__ == name
    code = (
        "import sys, tenantry.safety.policy.cli\n"
        "print('cedarpy' in sys.modules, 'tree_sitter' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["False", "False"], r.stderr
