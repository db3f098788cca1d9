"""Session tiers, option values of agent jobs, restricted options, --chdir outputs."""

from __future__ import annotations

import dataclasses

import pytest

from tenantry.core.errors import UsageError
from tenantry.core.models import AgentProduct, Principal
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.facts import Facts, parse_tiers
from tenantry.safety.policy.judge import Judge

CWD = "/home/alice/proj"


@pytest.fixture(scope="module")
def tiered(facts: Facts) -> Judge:
    tiers = parse_tiers({"alice/*/ro-*": "read-only", "alice/*/trust-*": "trusted"})
    return Judge(Engine(), dataclasses.replace(facts, tiers=tiers), read_files=False, hour=12)


def session(name: str) -> Principal:
    return Principal(1000, "alice", AgentProduct.CLAUDE_CODE, name, project="chem")


def submit(script: str, *extra: str) -> dict[str, object]:
    return {"script": f"{CWD}/job.sh", "script_text": script, "cwd": CWD, "extra": list(extra)}


JOB = "#!/bin/sh\n#SBATCH --time=10\ntrue\n"


@pytest.mark.parametrize(
    ("action", "params"),
    [
        ("submit_job", submit(JOB)),
        ("cancel_job", {"id": "1001"}),
        ("write_path", {"path": f"{CWD}/out.txt"}),
        ("run_command", {"command": "rm -f out.txt", "cwd": CWD}),
        ("run_command", {"command": "python3 train.py", "cwd": CWD}),
        ("run_command", {"command": "sbatch job.sh", "cwd": CWD}),
        ("acquire_lease", {"name": "lease"}),
        ("index_build", {"name": "index.add"}),
    ],
)
def test_read_only_tier_refuses_consequential_actions(
    tiered: Judge, action: str, params: dict[str, object]
) -> None:
    d = tiered.evaluate(session("ro-1"), action, params)
    assert not d.allowed
    assert d.rule.startswith("tier-read-only"), (d.rule, d.message)
    if action != "cancel_job":  # job 1001 is another session's: denied for standard too
        assert tiered.evaluate(session("s9"), action, params).allowed


@pytest.mark.parametrize(
    ("action", "params"),
    [
        ("run_command", {"command": "grep -rn loss logs/ | tail -5", "cwd": CWD}),
        ("run_command", {"command": "squeue --me", "cwd": CWD}),
        ("run_command", {"command": "git log --oneline", "cwd": CWD}),
        ("index_query", {"name": "index.grep"}),
        ("query_jobs", {"name": "jobs.list"}),
        ("read_path", {"path": f"{CWD}/results.csv"}),
    ],
)
def test_read_only_tier_may_look(tiered: Judge, action: str, params: dict[str, object]) -> None:
    d = tiered.evaluate(session("ro-1"), action, params)
    assert d.allowed, (d.rule, d.message)


def test_trusted_tier_may_cancel_the_users_own_job(tiered: Judge) -> None:
    assert not tiered.evaluate(session("s9"), "cancel_job", {"id": "1002"}).allowed
    d = tiered.evaluate(session("trust-1"), "cancel_job", {"id": "1002"})
    assert d.allowed and d.rule == "tier-trusted-user-jobs"
    assert not tiered.evaluate(session("trust-1"), "cancel_job", {"id": "2001"}).allowed


def test_unknown_tier_is_refused() -> None:
    with pytest.raises(UsageError, match="tier"):
        parse_tiers({"*": "root"})


@pytest.mark.parametrize(
    ("extra", "rule"),
    [
        (["--mail-user=eve@evil.example", "--mail-type=END"], "agent-job-mail-own-address"),
        (["--mail-user=alice@uni.example,eve@evil.example"], "agent-job-mail-own-address"),
        (["--job-name=a;rm -rf ~"], "agent-job-text-grammar"),
        (["--comment=ok\nINJECTED"], "agent-job-text-grammar"),
        (["--reservation=maint"], "agent-restricted-job-options"),
        (["--container=/img"], "agent-restricted-job-options"),
        (["--x11"], "agent-restricted-job-options"),
        (["--get-user-env"], "agent-restricted-job-options"),
        (["--bb=capacity=1T"], "agent-restricted-job-options"),
    ],
)
def test_job_option_values_checked(
    judge: Judge, agent: Principal, extra: list[str], rule: str
) -> None:
    d = judge.evaluate(agent, "submit_job", submit(JOB, *extra))
    assert not d.allowed
    assert d.rule == rule, d.message


def test_burst_buffer_directives_refused(judge: Judge, agent: Principal) -> None:
    text = "#!/bin/sh\n#SBATCH --time=10\n#BB create_persistent name=x capacity=1T\ntrue\n"
    d = judge.evaluate(agent, "submit_job", submit(text))
    assert d.rule == "agent-restricted-job-options"
    text = "#!/bin/sh\n#DW jobdw capacity=1GB access_mode=striped type=scratch\ntrue\n"
    assert judge.evaluate(agent, "submit_job", submit(text)).rule == "agent-restricted-job-options"


def test_good_values_allowed(judge: Judge, agent: Principal) -> None:
    d = judge.evaluate(
        agent,
        "submit_job",
        submit(
            JOB,
            "--mail-user=alice@uni.example",
            "--mail-type=END,FAIL",
            "--job-name=train-v2.1",
            "--comment=sweep lr=3e-4 (run 7)",
        ),
    )
    assert d.allowed, d.message


def test_chdir_output_into_ssh_is_refused(judge: Judge, agent: Principal) -> None:
    """--chdir was ignored when resolving a relative -o: job output into authorized_keys."""
    d = judge.evaluate(
        agent, "submit_job", submit(JOB, "--chdir=/home/alice/.ssh", "--output=authorized_keys")
    )
    assert not d.allowed
    assert d.rule == "agent-no-credentials"
    script = "#!/bin/sh\n#SBATCH -D /home/alice/.ssh\n#SBATCH -o authorized_keys\ntrue\n"
    assert judge.evaluate(agent, "submit_job", submit(script)).rule == "agent-no-credentials"
