"""Facility facts the policy judges against: users, accounts, partitions, limits, jobs.

Dry runs (``tenantry policy test --facts FACTS.json``) read them from a JSON
file so a corpus can be judged anywhere; the daemon builds them live from the
password database and, with the Slurm backend, the backend's ``info()``.

File format (every key optional)::

    {"users": {"alice": {"home": "/home/alice", "groups": ["chem"],
                         "accounts": ["chem"], "admin": false}},
     "partitions": {"gpu": {"max_time_s": 172800, "gpus_per_node": 4,
                            "nodes": 16, "qos": ["normal"], "default": false}},
     "qos": {"normal": {}, "admin": {"admin_only": true}},
     "jobs": [{"id": "1001", "principal": "alice/claude-code/s1"},
              {"id": "1002", "user": "alice"}],
     "limits": {"agent_max_gpus": 8},
     "homes_root": "/home"}
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.core.jsontext import json_object
from tenantry.core.models import TIERS

DEFAULT_LIMITS: dict[str, int] = {
    "agent_max_gpus": 8,  # GPUs one agent job may ask for
    "agent_max_nodes": 8,
    "agent_max_time_s": 2 * 86400,
    "agent_max_array": 1000,
    "agent_max_cpus": 1024,
}


DEFAULT_WRITE_ROOTS = ("/scratch/{user}", "/work/{user}", "/project/{project}",
                       "/projects/{project}")  # fmt: skip
DEFAULT_ADMIN_QOS = frozenset({"admin", "root", "system", "maint"})


def job_base(job_id: str) -> str:
    """The job an id names, without its array task (``_3``), step (``.batch``) or
    heterogeneous component (``+0``)."""
    for sep in "_.+":
        job_id = job_id.split(sep, 1)[0]
    return job_id


@dataclass(frozen=True, slots=True)
class UserFacts:
    name: str
    home: str
    groups: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    admin: bool = False
    mail: str = ""  # the user's own address (job mail may go only there)
    qos: tuple[str, ...] = ()  # QoS the user's associations allow (empty: not known)


@dataclass(frozen=True, slots=True)
class PartitionFacts:
    name: str
    max_time_s: int = 0  # 0 = no limit known
    default_time_s: int = 0
    gpus_per_node: int = 0
    nodes: int = 0
    qos: tuple[str, ...] = ()  # allowed QoS; empty = any
    default: bool = False


@dataclass(frozen=True, slots=True)
class Facts:
    users: dict[str, UserFacts] = field(default_factory=dict)
    partitions: dict[str, PartitionFacts] = field(default_factory=dict)
    admin_qos: frozenset[str] = field(default_factory=lambda: DEFAULT_ADMIN_QOS)
    known_qos: frozenset[str] = frozenset()
    jobs: dict[str, tuple[str, str]] = field(default_factory=dict)  # id -> (user, principal)
    limits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    homes_root: str = "/home"
    protected: tuple[str, ...] = ()  # Tenantry state paths agents may not write
    # (principal-key glob, tier): first match wins; default "standard"
    tiers: tuple[tuple[str, str], ...] = ()
    # where agents may write besides their home and temp ({user}, {project} filled in)
    write_roots: tuple[str, ...] = DEFAULT_WRITE_ROOTS
    read_roots: tuple[str, ...] = ()  # shared directories in other homes (globs)
    qos_wall: dict[str, int] = field(default_factory=dict)  # QoS -> MaxWall seconds
    job_options: frozenset[str] = frozenset()  # options the facility adds to the allow-list

    def tier_of(self, key: str, chosen: str = "") -> str:
        """The facility's tier for principal ``key``; a tier the user ``chosen`` for the
        session applies only when it is stricter (the user can restrict, never raise)."""
        import fnmatch

        tier = next((t for p, t in self.tiers if fnmatch.fnmatchcase(key, p)), "standard")
        if chosen in TIERS and TIERS.index(chosen) < TIERS.index(tier):
            return chosen
        return tier

    def user(self, name: str) -> UserFacts:
        found = self.users.get(name)
        if found is not None:
            return found
        return UserFacts(name=name, home=_home_of(name, self.homes_root))

    def job_owner(self, job_id: str) -> tuple[str, str] | None:
        return self.jobs.get(job_base(job_id))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Facts:
        homes_root = str(d.get("homes_root", "/home"))
        users = {
            name: UserFacts(
                name=name,
                home=str(u.get("home") or f"{homes_root}/{name}"),
                groups=tuple(str(g) for g in u.get("groups", ())),
                accounts=tuple(str(a) for a in u.get("accounts", ())),
                admin=bool(u.get("admin", False)),
                mail=str(u.get("mail") or ""),
                qos=tuple(str(q).lower() for q in u.get("qos", ())),
            )
            for name, u in (d.get("users") or {}).items()
        }
        parts = {
            name: PartitionFacts(
                name=name,
                max_time_s=int(p.get("max_time_s", 0)),
                default_time_s=int(p.get("default_time_s", 0)),
                gpus_per_node=int(p.get("gpus_per_node", 0)),
                nodes=int(p.get("nodes", 0)),
                qos=tuple(str(q) for q in p.get("qos", ())),
                default=bool(p.get("default", False)),
            )
            for name, p in (d.get("partitions") or {}).items()
        }
        qos = d.get("qos") or {}
        admin_qos = frozenset(q for q, v in qos.items() if (v or {}).get("admin_only"))
        jobs: dict[str, tuple[str, str]] = {}
        for j in d.get("jobs") or ():
            principal = str(j.get("principal", ""))
            user = str(j.get("user") or principal.split("/")[0])
            jobs[str(j["id"])] = (user, principal)
        limits = dict(DEFAULT_LIMITS)
        limits.update({k: int(v) for k, v in (d.get("limits") or {}).items()})
        return cls(
            users=users,
            partitions=parts,
            admin_qos=admin_qos or DEFAULT_ADMIN_QOS,
            known_qos=frozenset(qos),
            jobs=jobs,
            limits=limits,
            homes_root=homes_root,
            protected=tuple(str(x) for x in d.get("protected") or ()),
            tiers=parse_tiers(d.get("tiers") or {}),
            write_roots=tuple(
                str(x) for x in (d.get("scopes") or {}).get("write", DEFAULT_WRITE_ROOTS)
            ),
            read_roots=tuple(str(x) for x in (d.get("scopes") or {}).get("read", ())),
            job_options=frozenset(str(o).lstrip("-") for o in d.get("job_options") or ()),
            qos_wall={
                q.lower(): int((v or {}).get("max_wall_s", 0))
                for q, v in qos.items()
                if (v or {}).get("max_wall_s")
            },
        )

    @classmethod
    def load(cls, path: str | Path) -> Facts:
        hint = "a facts file is JSON with users, partitions, qos, jobs, limits"
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise UsageError(f"cannot read facts file {path}: {exc}", hint=hint) from exc
        return cls.from_dict(json_object(text, f"facts file {path}", hint=hint))

    def with_partitions(self, parts: dict[str, PartitionFacts]) -> Facts:
        return dataclasses.replace(self, partitions=parts)


def parse_tiers(d: Any) -> tuple[tuple[str, str], ...]:
    """``{"alice/*/*": "read-only"}`` -> ordered (glob, tier) pairs; unknown tiers refused."""
    if not isinstance(d, dict):
        raise UsageError("tiers must map principal globs (user/agent/session) to a tier")
    out: list[tuple[str, str]] = []
    for pattern, tier in d.items():
        if tier not in TIERS:
            raise UsageError(
                f"unknown tier {tier!r} for {pattern!r}", hint=f"tiers are {', '.join(TIERS)}"
            )
        out.append((str(pattern), str(tier)))
    return tuple(out)


def _home_of(name: str, homes_root: str) -> str:
    import pwd

    try:
        return pwd.getpwnam(name).pw_dir
    except KeyError:
        return f"{homes_root}/{name}"


def local_user(name: str) -> UserFacts:
    """The user as the password and group databases describe them."""
    import grp
    import pwd

    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        return UserFacts(name=name, home=f"/home/{name}")
    names: list[str] = []
    # getgrouplist asks NSS for this user only (no enumeration of a site's groups)
    for gid in os.getgrouplist(name, pw.pw_gid):
        try:
            names.append(grp.getgrgid(gid).gr_name)
        except KeyError:
            names.append(str(gid))
    return UserFacts(name=name, home=pw.pw_dir, groups=tuple(dict.fromkeys(names)))


def partitions_from_info(info: dict[str, Any]) -> dict[str, PartitionFacts]:
    """Partitions from the backend's ``info()`` facts (the Slurm backend parses Slurm)."""
    out: dict[str, PartitionFacts] = {}
    for p in info.get("partitions") or ():
        name = str(p.get("name") or "")
        if not name:
            continue
        out[name] = PartitionFacts(
            name=name,
            max_time_s=_seconds(p.get("max_time_s")),
            default_time_s=_seconds(p.get("default_time_s")),
            nodes=_int(p.get("total_nodes") or p.get("nodes")),
            default=bool(p.get("default")),
        )
    return out


def _seconds(v: Any) -> int:
    """Seconds, or 0 for unset/unlimited/unreadable."""
    if isinstance(v, bool) or not isinstance(v, int | float) or v != v or v in (float("inf"),):
        return 0
    return max(0, int(v))


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0
