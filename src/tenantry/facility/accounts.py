"""The facility checks a claimed Slurm account against Slurm's associations.

:class:`AccountGate` is a gate of the facility service. Before a submission
(an op whose action is ``submit_job``) runs at an executor, the account it
would charge (``--account``/``-A`` from the request, the script's
``#SBATCH`` lines or ``SBATCH_ACCOUNT``; else the session's project) must be
one of the user's associations in the last ``slurm_facts.FactsSnapshot``;
otherwise it is refused with the accounts the user has. A submission that
claims no account is left to Slurm (which charges the user's default).

The facts are read from ``sacctmgr``/``scontrol`` every
``facility_facts_refresh_s`` (``SlurmFacts.run``); a refresh that fails keeps
the last good snapshot, and before the first one a claim is refused with a
retryable ``Unavailable`` (fail closed). Each snapshot also feeds the facility
policy's facts (every user's accounts and QoS, the QoS MaxWall, the
partitions' MaxTime) through :class:`FactsSink`, so the policy's limit rules
judge with Slurm's numbers.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from tenantry.core import errors
from tenantry.core.models import Principal
from tenantry.facility.slurm_facts import FactsSnapshot, SlurmFacts
from tenantry.jobs.request import JobRequest
from tenantry.safety.policy.component import PolicyService
from tenantry.safety.policy.facts import Facts

__all__ = ["AccountGate", "FactsSink", "PolicySink", "claimed_account", "policy_facts"]

SUBMIT = "submit_job"


class FactsSink(Protocol):
    """Where a snapshot's facts go (the facility policy's judge)."""

    @property
    def facts(self) -> Facts: ...

    def set_facts(self, facts: Facts) -> None: ...


def claimed_account(p: Principal, params: dict[str, Any]) -> str:
    """The account a submission would charge: its own option, else the session's project."""
    try:
        account = JobRequest.from_params(params).shape.account
    except errors.TenantryError:
        account = ""  # malformed requests are the policy's to refuse
    return (account or p.project).strip().lower()


def policy_facts(base: Facts, snap: FactsSnapshot) -> Facts:
    """``base`` with every user's accounts/QoS and the QoS/partition limits from Slurm."""
    users = dict(base.users)
    for name in {r.assoc.user for r in snap.assocs if r.assoc.user}:
        known = base.user(name)
        qos = sorted({q for r in snap.assocs if r.assoc.user == name for q in r.assoc.qos})
        users[name] = dataclasses.replace(
            known, accounts=snap.accounts_of(name), qos=tuple(qos) or known.qos
        )
    parts = {
        name: dataclasses.replace(p, max_time_s=snap.partitions[name].max_time_s or p.max_time_s)
        if name in snap.partitions
        else p
        for name, p in base.partitions.items()
    }
    walls = {n: q.max_wall_s for n, q in snap.qos.items() if q.max_wall_s}
    return dataclasses.replace(
        base,
        users=users,
        partitions=parts,
        qos_wall={**base.qos_wall, **walls},
        known_qos=base.known_qos | frozenset(snap.qos),
    )


class PolicySink:
    """The facility policy's judge as a :class:`FactsSink` (none while the policy is invalid)."""

    def __init__(self, policy: PolicyService) -> None:
        self.policy = policy

    @property
    def facts(self) -> Facts:
        judge = self.policy.judge
        return judge.facts if judge is not None else Facts()

    def set_facts(self, facts: Facts) -> None:
        if self.policy.judge is not None:
            self.policy.judge.set_facts(facts)


class AccountGate:
    """A claimed account must be one of the user's Slurm associations (facility side)."""

    def __init__(self, facts: SlurmFacts, sink: FactsSink | None = None) -> None:
        self.facts = facts
        self.sink = sink
        self.refused = 0
        facts.on_load = self._feed

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        if action != SUBMIT:
            return []
        account = claimed_account(principal, params)
        if not account:
            return []
        snap = self.facts.current()  # Unavailable (retryable) before the first load
        if snap.may_charge(principal.user, account):
            return []
        self.refused += 1
        mine = snap.accounts_of(principal.user)
        raise errors.PolicyDenied(
            f"{principal.user} has no Slurm association with account {account!r}, so a job"
            " may not charge it",
            hint=(
                f"submit with one of your accounts ({', '.join(mine)})"
                if mine
                else "ask your facility's staff for a Slurm association (sacctmgr add user)"
            )
            + "; `sacctmgr show assoc user=$USER` lists them",
            rule="slurm-association",
            action=SUBMIT,
            source="slurm",
        )

    def _feed(self, snap: FactsSnapshot) -> None:
        if self.sink is not None:
            self.sink.set_facts(policy_facts(self.sink.facts, snap))

    def health(self) -> dict[str, Any]:
        f = self.facts
        return {
            "loaded": f.snapshot is not None,
            "loads": f.loads,
            "staleness_s": f.staleness_s(),
            "last_error": f.last_error,
            "refused": self.refused,
        }
