"""Facts Tenantry reads from Slurm's accounting: a user's associations and QoS limits.

Pure parsers of ``sacctmgr -nP`` output (tested on recorded real output in
``tests/fixtures/slurm/22.05/facts/``) and the argv that produces it. The
policy component runs the commands at start and on refresh, and folds the
result into :class:`tenantry.safety.policy.facts.Facts`: the accounts a user may
charge (``job-account-not-member``), the QoS their associations allow
(``job-qos-not-associated``) and each QoS's wall-clock limit
(``job-over-qos-time``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tenantry.safety.policy.slurmopts import parse_time

ASSOC_FORMAT = "cluster,user,account,partition,qos,defaultqos,maxjobs,maxsubmitjobs,maxtres,maxwall"
QOS_FORMAT = "name,maxwall,maxtresperjob,maxtresperuser,flags"


def assoc_argv(user: str) -> list[str]:
    return ["sacctmgr", "-nP", "show", "assoc", f"user={user}", f"format={ASSOC_FORMAT}"]


def qos_argv() -> list[str]:
    return ["sacctmgr", "-nP", "show", "qos", f"format={QOS_FORMAT}"]


@dataclass(frozen=True, slots=True)
class Association:
    cluster: str
    user: str
    account: str
    partition: str
    qos: tuple[str, ...]
    max_wall_s: int  # 0: no limit


@dataclass(frozen=True, slots=True)
class QosLimit:
    name: str
    max_wall_s: int  # 0: no limit
    flags: tuple[str, ...]


def _wall(text: str) -> int:
    t = parse_time(text) if text.strip() else 0
    return t or 0


def parse_associations(text: str) -> list[Association]:
    """Rows of ``sacctmgr -nP show assoc format=ASSOC_FORMAT`` (user rows and account rows)."""
    out: list[Association] = []
    for line in text.splitlines():
        cells = line.split("|")
        if len(cells) < 10:
            continue
        cluster, user, account, partition, qos = cells[:5]
        out.append(
            Association(
                cluster=cluster,
                user=user,
                account=account.lower(),
                partition=partition,
                qos=tuple(q.lower() for q in qos.split(",") if q),
                max_wall_s=_wall(cells[9]),
            )
        )
    return out


def parse_qos(text: str) -> dict[str, QosLimit]:
    """``sacctmgr -nP show qos format=QOS_FORMAT`` -> limits by (lower-case) name."""
    out: dict[str, QosLimit] = {}
    for line in text.splitlines():
        cells = line.split("|")
        if len(cells) < 5 or not cells[0]:
            continue
        name = cells[0].lower()
        out[name] = QosLimit(name, _wall(cells[1]), tuple(f for f in cells[4].split(",") if f))
    return out


def user_accounts(assocs: list[Association], user: str) -> tuple[str, ...]:
    """Accounts ``user`` has an association with, in Slurm's order."""
    return tuple(dict.fromkeys(a.account for a in assocs if a.user == user and a.account))


def user_qos(assocs: list[Association], user: str) -> tuple[str, ...]:
    """QoS any of ``user``'s associations allows."""
    return tuple(dict.fromkeys(q for a in assocs if a.user == user for q in a.qos))
