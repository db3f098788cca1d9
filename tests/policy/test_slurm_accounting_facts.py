"""Associations and QoS limits from recorded real ``sacctmgr -nP`` output, and their rules."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from tenantry.core.models import Principal
from tenantry.safety.policy import slurmfacts as sf
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge

REC = Path(__file__).parent.parent / "fixtures" / "slurm" / "22.05" / "facts"


def test_parse_recorded_associations() -> None:
    assocs = sf.parse_associations((REC / "sacctmgr-assoc.out").read_text())
    assert [a.user for a in assocs] == ["", "root"]
    assert sf.user_accounts(assocs, "root") == ("root",)
    assert sf.user_qos(assocs, "root") == ("normal", "tiny")
    assert sf.user_accounts(assocs, "nobody") == ()


def test_parse_recorded_qos() -> None:
    qos = sf.parse_qos((REC / "sacctmgr-qos.out").read_text())
    assert set(qos) == {"normal", "tiny"}
    assert qos["tiny"].max_wall_s == 120 and qos["tiny"].flags == ("DenyOnLimit",)
    assert qos["normal"].max_wall_s == 0


@pytest.fixture(scope="module")
def acct_judge(facts: Facts) -> Judge:
    alice = dataclasses.replace(facts.users["alice"], qos=("normal", "gpu", "tiny"))
    cpu = facts.partitions["cpu"]
    cpu = dataclasses.replace(cpu, qos=(*cpu.qos, "tiny"))
    f = dataclasses.replace(
        facts,
        users={**facts.users, "alice": alice},
        partitions={**facts.partitions, "cpu": cpu},
        qos_wall={"tiny": 120},
    )
    return Judge(Engine(), f, read_files=False, hour=12)


def job(*argv: str) -> dict[str, object]:
    return {"argv": ["sbatch", *argv, "job.sh"], "script_text": "#!/bin/sh\ntrue\n"}


def test_qos_must_be_associated(acct_judge: Judge, agent: Principal) -> None:
    d = acct_judge.evaluate(agent, "submit_job", job("-t", "10", "-p", "cpu", "--qos=long"))
    assert d.rule == "job-qos-not-associated", d.message
    ok = acct_judge.evaluate(agent, "submit_job", job("-t", "10", "-p", "cpu", "--qos=normal"))
    assert ok.allowed, ok.message


def test_qos_wall_limit(acct_judge: Judge, agent: Principal) -> None:
    d = acct_judge.evaluate(agent, "submit_job", job("-t", "10", "-p", "cpu", "--qos=tiny"))
    assert d.rule == "job-over-qos-time", d.message
    ok = acct_judge.evaluate(agent, "submit_job", job("-t", "2", "-p", "cpu", "--qos=tiny"))
    assert ok.allowed, ok.message


@pytest.mark.slurm
def test_live_sacctmgr_matches_the_parser(slurm: None) -> None:
    import getpass

    out = subprocess.run(
        sf.assoc_argv(getpass.getuser()), capture_output=True, text=True, timeout=30
    )
    if out.returncode != 0:
        pytest.skip(f"no accounting here: {out.stderr.strip()}")
    assocs = sf.parse_associations(out.stdout)
    assert all(a.user == getpass.getuser() for a in assocs)
    qos = subprocess.run(sf.qos_argv(), capture_output=True, text=True, timeout=30)
    assert qos.returncode == 0
    assert sf.parse_qos(qos.stdout)
