"""A claimed Slurm account is checked against the user's associations (facility side)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.facility.cluster.test_slurm_facts import recorded

from tenantry.core import errors
from tenantry.core.models import AgentProduct, Principal
from tenantry.facility.accounts import AccountGate, claimed_account, policy_facts
from tenantry.facility.slurm_facts import FactsSnapshot, SlurmFacts
from tenantry.safety.policy.facts import Facts, PartitionFacts

ALICE = Principal(uid=5001, user="tt-i16c-alice", agent=AgentProduct.CLAUDE_CODE, session="s1")


def submit(*extra: str, script: str = "#!/bin/sh\ntrue\n", **res: Any) -> dict[str, Any]:
    return {"script": "job.sh", "script_text": script, "extra": list(extra), "resources": res}


class Scripted(SlurmFacts):
    """SlurmFacts whose refresh returns the recorded snapshot, or fails when told to."""

    fail = False

    async def refresh(self) -> FactsSnapshot:
        if self.fail:
            self.last_error = "sacctmgr: slurmdbd is down"
            raise errors.Unavailable(self.last_error)
        self.snapshot = recorded()
        self.loads += 1
        if self.on_load is not None:
            self.on_load(self.snapshot)
        return self.snapshot


def test_the_claim_is_the_option_the_script_or_the_sessions_project() -> None:
    assert claimed_account(ALICE, submit("-A", "Chem")) == "chem"
    assert claimed_account(ALICE, submit(account="phys")) == "phys"
    assert claimed_account(ALICE, submit(script="#!/bin/sh\n#SBATCH --account=bio\n")) == "bio"
    assert claimed_account(ALICE, submit()) == ""
    proj = Principal(uid=1, user="u", project="proj1")
    assert claimed_account(proj, submit()) == "proj1"
    assert claimed_account(proj, submit("--account=other")) == "other"


async def test_an_account_the_user_lacks_is_refused_with_the_ones_they_have() -> None:
    gate = AccountGate(Scripted())
    with pytest.raises(errors.Unavailable, match="not read Slurm's associations"):
        await gate.gate(ALICE, "jobs.submit", "submit_job", submit("-A", "tt_i16c_rec"))
    await gate.facts.refresh()
    assert await gate.gate(ALICE, "jobs.submit", "submit_job", submit("-A", "tt_i16c_rec")) == []
    with pytest.raises(errors.PolicyDenied, match="no Slurm association with account 'root'") as e:
        await gate.gate(ALICE, "jobs.submit", "submit_job", submit("-A", "root"))
    assert "tt_i16c_rec" in (e.value.hint or "") and e.value.retryable is False
    # no claim: Slurm charges the default account; other actions are not this gate's
    assert await gate.gate(ALICE, "jobs.submit", "submit_job", submit()) == []
    assert await gate.gate(ALICE, "jobs.status", "query_jobs", submit("-A", "root")) == []
    assert gate.refused == 1


async def test_a_failed_refresh_keeps_the_last_good_snapshot() -> None:
    facts = Scripted()
    gate = AccountGate(facts)
    await facts.refresh()
    facts.fail = True
    with pytest.raises(errors.Unavailable):
        await facts.refresh()
    assert gate.health()["loaded"] and "slurmdbd" in str(gate.health()["last_error"])
    with pytest.raises(errors.PolicyDenied):
        await gate.gate(ALICE, "jobs.submit", "submit_job", submit("-A", "root"))


def test_slurm_limits_feed_the_policy_facts() -> None:
    base = Facts(partitions={"debug": PartitionFacts("debug", max_time_s=0)})
    out = policy_facts(base, recorded())
    assert out.users["tt-i16c-alice"].accounts == ("tt_i16c_rec",)
    assert set(out.users["tt-i16c-alice"].qos) == {"normal", "tiny"}
    assert out.qos_wall["tiny"] == 120 and "tiny" in out.known_qos
    assert out.partitions["debug"].max_time_s == 3600


async def test_each_load_feeds_the_policy_sink() -> None:
    class Sink:
        facts = Facts()

        def set_facts(self, facts: Facts) -> None:
            self.facts = facts

    sink = Sink()
    gate = AccountGate(Scripted(), sink)
    await gate.facts.refresh()
    assert sink.facts.users["tt-i16c-bob"].accounts == ("tt_i16c_rec",)
