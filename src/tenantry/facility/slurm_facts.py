"""Facts of every user from Slurm: associations (who may charge which account), QoS and
partition limits, refreshed on an interval by the facility service.

A project an agent claims (``--account``) is checked against Slurm's own
associations, never against a hand-written list: :meth:`FactsSnapshot.may_charge`.
:meth:`FactsSnapshot.limits` gives the effective limits of (user, account,
partition): the association's MaxWall/MaxJobs/MaxSubmitJobs/MaxTRES (falling
back to the account's own association row), the QoS it allows with their
MaxWall, and the partition's MaxTime.

Parsers are the pure ones of :mod:`tenantry.safety.policy.slurmfacts` (associations,
QoS) and :mod:`tenantry.backends.slurm_parse` (``scontrol`` records); the
commands are ``sacctmgr -nP show assoc`` (all users), ``sacctmgr -nP show qos``
and ``scontrol show partition --oneliner`` (Slurm 22.05's scontrol has no
``--json`` for partitions). :class:`SlurmFacts` runs them and holds the last
snapshot; before the first successful load every question raises a retryable
Unavailable (fail closed: no facts, no charge).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from tenantry.backends import slurm_parse as sp
from tenantry.backends.slurm_tools import run_slurm_tool
from tenantry.core import errors
from tenantry.core.models import wire_dict
from tenantry.core.tasks import every
from tenantry.safety.policy import slurmfacts as sf

__all__ = [
    "ASSOC_ALL_ARGV",
    "PARTITION_ARGV",
    "AssocLimits",
    "FactsSnapshot",
    "Limits",
    "PartitionLimits",
    "SlurmFacts",
]

log = logging.getLogger(__name__)

ASSOC_ALL_ARGV = ("sacctmgr", "-nP", "show", "assoc", f"format={sf.ASSOC_FORMAT}")
PARTITION_ARGV = ("scontrol", "show", "partition", "--oneliner")


@dataclass(frozen=True, slots=True)
class AssocLimits:
    """One association row with the limits ``safety.policy.slurmfacts.Association`` leaves out."""

    assoc: sf.Association
    max_jobs: int | None
    max_submit_jobs: int | None
    max_tres: str


@dataclass(frozen=True, slots=True)
class PartitionLimits:
    name: str
    max_time_s: int  # 0: no limit
    default_time_s: int
    allow_accounts: tuple[str, ...]  # ("all",) when any account may use it
    deny_accounts: tuple[str, ...]
    allow_qos: tuple[str, ...]
    state: str

    def admits(self, account: str) -> bool:
        acct = account.lower()
        if acct in self.deny_accounts:
            return False
        return "all" in self.allow_accounts or acct in self.allow_accounts


@dataclass(frozen=True, slots=True)
class Limits:
    """Effective limits of one (user, account[, partition]); 0/None: no limit known."""

    user: str
    account: str
    partition: str
    max_wall_s: int
    max_jobs: int | None
    max_submit_jobs: int | None
    max_tres: str
    qos: tuple[str, ...]
    qos_wall_s: dict[str, int]
    partition_max_time_s: int

    def to_dict(self) -> dict[str, object]:
        return wire_dict(self, qos=list(self.qos))


def _opt_int(text: str) -> int | None:
    return int(text) if text.strip().isdigit() else None


def _names(text: str) -> tuple[str, ...]:
    return tuple(n.lower() for n in text.split(",") if n and n.upper() != "(NULL)")


def parse_assoc_limits(text: str) -> list[AssocLimits]:
    """Rows of ``sacctmgr -nP show assoc format=ASSOC_FORMAT`` with their job limits."""
    rows = sf.parse_associations(text)
    cells = [c for c in (line.split("|") for line in text.splitlines()) if len(c) >= 10]
    return [
        AssocLimits(a, _opt_int(c[6]), _opt_int(c[7]), c[8])
        for a, c in zip(rows, cells, strict=True)
    ]


def parse_partition_limits(text: str) -> dict[str, PartitionLimits]:
    """``scontrol show partition --oneliner`` -> limits by partition name."""
    out: dict[str, PartitionLimits] = {}
    for rec in sp.parse_scontrol(text):
        name = rec.get("PartitionName", "")
        if not name:
            continue
        max_t = sp.parse_duration(rec.get("MaxTime", ""))
        def_t = sp.parse_duration(rec.get("DefaultTime", ""))
        out[name] = PartitionLimits(
            name=name,
            max_time_s=0 if max_t is None or max_t == float("inf") else int(max_t),
            default_time_s=0 if def_t is None or def_t == float("inf") else int(def_t),
            allow_accounts=_names(rec.get("AllowAccounts", "ALL")),
            deny_accounts=_names(rec.get("DenyAccounts", "")),
            allow_qos=_names(rec.get("AllowQos", "ALL")),
            state=rec.get("State", ""),
        )
    return out


@dataclass(frozen=True, slots=True)
class FactsSnapshot:
    """What Slurm said at ``loaded_at``; pure, so every question is a lookup."""

    assocs: tuple[AssocLimits, ...]
    qos: Mapping[str, sf.QosLimit]
    partitions: Mapping[str, PartitionLimits]
    loaded_at: float

    @classmethod
    def parse(cls, assoc: str, qos: str, partitions: str, loaded_at: float) -> FactsSnapshot:
        return cls(
            tuple(parse_assoc_limits(assoc)),
            sf.parse_qos(qos),
            parse_partition_limits(partitions),
            loaded_at,
        )

    def _user_rows(self, user: str, account: str) -> list[AssocLimits]:
        acct = account.lower()
        return [r for r in self.assocs if r.assoc.user == user and r.assoc.account == acct]

    def accounts_of(self, user: str) -> tuple[str, ...]:
        """The accounts ``user`` has an association with, in Slurm's order."""
        return sf.user_accounts([r.assoc for r in self.assocs], user)

    def may_charge(self, user: str, account: str, partition: str = "") -> bool:
        """True when Slurm has an association of ``user`` with ``account`` (for ``partition``).

        An association restricted to a partition counts only there; a partition
        whose AllowAccounts/DenyAccounts exclude the account refuses it.
        """
        if not user or not account:
            return False
        rows = self._user_rows(user, account)
        if partition:
            rows = [r for r in rows if r.assoc.partition in ("", partition)]
            part = self.partitions.get(partition)
            if part is None or not part.admits(account):
                return False
        else:
            rows = [r for r in rows if r.assoc.partition == ""] or rows
        return bool(rows)

    def limits(self, user: str, account: str, partition: str = "") -> Limits:
        """Effective limits; NotFound when ``user`` may not charge ``account`` there."""
        if not self.may_charge(user, account, partition):
            raise errors.NotFound(
                f"{user} has no Slurm association with account {account!r}"
                + (f" on partition {partition}" if partition else ""),
                hint=f"accounts {user} may charge: {', '.join(self.accounts_of(user)) or 'none'}",
            )
        rows = self._user_rows(user, account)
        row = next((r for r in rows if r.assoc.partition == partition), None) or next(
            r for r in rows if r.assoc.partition in ("", partition)
        )
        acct_row = next(
            (r for r in self.assocs if r.assoc.user == "" and r.assoc.account == account.lower()),
            None,
        )
        wall = row.assoc.max_wall_s or (acct_row.assoc.max_wall_s if acct_row else 0)
        qos = row.assoc.qos or (acct_row.assoc.qos if acct_row else ())
        part = self.partitions.get(partition) if partition else None
        return Limits(
            user=user,
            account=account.lower(),
            partition=partition,
            max_wall_s=wall,
            max_jobs=row.max_jobs if row.max_jobs is not None else (
                acct_row.max_jobs if acct_row else None),
            max_submit_jobs=row.max_submit_jobs if row.max_submit_jobs is not None else (
                acct_row.max_submit_jobs if acct_row else None),
            max_tres=row.max_tres or (acct_row.max_tres if acct_row else ""),
            qos=qos,
            qos_wall_s={q: self.qos[q].max_wall_s for q in qos if q in self.qos},
            partition_max_time_s=part.max_time_s if part else 0,
        )  # fmt: skip


@dataclass(slots=True)
class SlurmFacts:
    """Loads a :class:`FactsSnapshot` from Slurm and refreshes it every ``refresh_s``."""

    refresh_s: float = 300.0
    timeout_s: float = 30.0
    binaries: Mapping[str, str] = field(default_factory=dict)
    snapshot: FactsSnapshot | None = None
    last_error: str = ""
    loads: int = 0
    # called with each snapshot loaded (the facility feeds its policy's facts with it)
    on_load: Callable[[FactsSnapshot], None] | None = None

    async def _run(self, argv: Sequence[str]) -> str:
        rc, out, err = await run_slurm_tool(
            argv,
            binaries=self.binaries,
            timeout_s=self.timeout_s,
            missing="install the Slurm client tools on the facility service's host",
            no_answer="slurmdbd or the controller may be down; facts are retried",
        )
        if rc != 0:
            raise sp.error_from(argv[0], err, rc)
        return out

    async def refresh(self) -> FactsSnapshot:
        """Read associations, QoS and partitions now; keep the old snapshot on failure."""
        now = time.time()
        try:
            assoc = await self._run(ASSOC_ALL_ARGV)
            qos = await self._run(sf.qos_argv())
            parts = await self._run(PARTITION_ARGV)
        except errors.TenantryError as exc:
            self.last_error = exc.message
            raise
        self.snapshot = FactsSnapshot.parse(assoc, qos, parts, now)
        self.loads += 1
        self.last_error = ""
        if self.on_load is not None:
            self.on_load(self.snapshot)
        return self.snapshot

    async def run(self) -> None:
        """Refresh forever (a failure keeps the last snapshot and is logged)."""
        await every(self.refresh_s, self.refresh, log, "slurm facts refresh", first_now=True)

    def current(self) -> FactsSnapshot:
        if self.snapshot is None:
            raise errors.Unavailable(
                "the facility has not read Slurm's associations yet"
                + (f" ({self.last_error})" if self.last_error else ""),
                hint="retry in a moment; check that sacctmgr works on the service's host",
            )
        return self.snapshot

    def may_charge(self, user: str, account: str, partition: str = "") -> bool:
        return self.current().may_charge(user, account, partition)

    def limits(self, user: str, account: str, partition: str = "") -> Limits:
        return self.current().limits(user, account, partition)

    def staleness_s(self) -> float | None:
        return None if self.snapshot is None else time.time() - self.snapshot.loaded_at
