"""Facts from Slurm: may a user charge an account, and with which limits."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from tests.facility.cluster.helpers import User, sacctmgr

from tenantry.core import errors
from tenantry.facility.slurm_facts import FactsSnapshot, SlurmFacts

FIX = Path(__file__).parents[2] / "fixtures" / "slurm" / "22.05" / "facts"


def recorded() -> FactsSnapshot:
    return FactsSnapshot.parse(
        (FIX / "sacctmgr-assoc-all.out").read_text(),
        (FIX / "sacctmgr-qos.out").read_text(),
        (FIX / "scontrol-partition.out").read_text(),
        loaded_at=1.0,
    )


def test_may_charge_follows_the_recorded_associations() -> None:
    f = recorded()
    assert f.may_charge("tt-i16c-alice", "tt_i16c_rec")
    assert f.may_charge("tt-i16c-alice", "TT_I16C_REC")  # Slurm accounts are case-blind
    assert not f.may_charge("tt-i16c-alice", "root")
    assert not f.may_charge("nobody", "tt_i16c_rec")
    assert not f.may_charge("tt-i16c-alice", "")
    assert f.accounts_of("root") == ("root",)


def test_partition_bound_association_counts_only_on_its_partition() -> None:
    f = recorded()
    assert f.may_charge("tt-i16c-bob", "tt_i16c_rec", "gpu")
    assert not f.may_charge("tt-i16c-bob", "tt_i16c_rec", "debug")
    assert f.may_charge("tt-i16c-alice", "tt_i16c_rec", "debug")
    assert not f.may_charge("tt-i16c-alice", "tt_i16c_rec", "no-such-partition")


def test_limits_combine_association_qos_and_partition() -> None:
    f = recorded()
    lim = f.limits("tt-i16c-alice", "tt_i16c_rec", "debug")
    assert lim.max_wall_s == 20 * 60 and lim.max_jobs == 3
    assert lim.qos == ("normal", "tiny") and lim.qos_wall_s == {"normal": 0, "tiny": 120}
    assert lim.partition_max_time_s == 3600
    bob = f.limits("tt-i16c-bob", "tt_i16c_rec", "gpu")
    assert bob.max_wall_s == 45 * 60 and bob.partition_max_time_s == 1800
    assert bob.to_dict()["max_jobs"] is None
    with pytest.raises(errors.NotFound, match="no Slurm association"):
        f.limits("tt-i16c-bob", "root")


async def test_no_facts_no_charge() -> None:
    facts = SlurmFacts(binaries={"sacctmgr": "/nonexistent/sacctmgr"})
    with pytest.raises(errors.Unavailable):
        facts.may_charge("alice", "chem")
    with pytest.raises(errors.BackendUnavailable):
        await facts.refresh()
    assert facts.last_error and facts.snapshot is None


@pytest.mark.slurm
async def test_real_accounting_association_added_and_removed(slurm_users: list[User]) -> None:
    alice, bob = slurm_users
    facts = SlurmFacts()
    await facts.refresh()
    assert facts.may_charge(alice.name, "tt_i16c") and facts.may_charge(bob.name, "tt_i16c")
    acct = f"tt_i16c_{uuid.uuid4().hex[:6]}"
    assert not facts.may_charge(alice.name, acct)
    try:
        r = sacctmgr("add", "account", acct, "description=t", "organization=tt")
        assert r.returncode == 0, r.stderr
        r = sacctmgr("add", "user", alice.name, f"account={acct}", "maxwall=00:15:00")
        assert r.returncode == 0, r.stderr
        await facts.refresh()
        assert facts.may_charge(alice.name, acct)
        assert not facts.may_charge(bob.name, acct)  # a claimed project is checked
        lim = facts.limits(alice.name, acct, "debug")
        assert lim.max_wall_s == 15 * 60 and lim.partition_max_time_s == 3600
    finally:
        sacctmgr("delete", "user", f"name={alice.name}", f"account={acct}")
        sacctmgr("delete", "account", acct)
    await facts.refresh()
    assert not facts.may_charge(alice.name, acct)
    assert facts.loads == 3 and (facts.staleness_s() or 0) < 60
