"""The plain data of leases: pool keys, the lease record, tuning, the pilot script."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.core.models import Principal, Resources
from tenantry.core.settings import Settings

# pending: pilot job submitted, not yet dialled back; ready: serving;
# draining: finishing what runs, takes nothing new (walltime near, or released);
# disconnected: pilot away, may come back (daemon restart, network);
# released / ended / lost: terminal.
ACTIVE = ("pending", "ready", "draining", "disconnected")
TERMINAL = ("released", "ended", "lost")


@dataclass(frozen=True, slots=True)
class PoolKey:
    """Leases are pooled by who pays and the shape of one command slot."""

    user: str
    account: str
    partition: str
    cpus: int
    mem_mb: int
    gpus: int

    @classmethod
    def of(cls, principal: Principal, res: Resources, settings: Settings) -> PoolKey:
        return cls(
            user=principal.user,
            account=res.account or principal.project or settings.slurm_account,
            partition=res.partition or settings.slurm_partition,
            cpus=max(1, int(res.cpus or 1)),
            mem_mb=int(res.mem_mb or 0),
            gpus=int(res.gpus or 0),
        )

    def to_json(self) -> str:
        return json.dumps(
            [self.user, self.account, self.partition, self.cpus, self.mem_mb, self.gpus]
        )

    @classmethod
    def from_json(cls, text: str) -> PoolKey:
        u, a, p, c, m, g = json.loads(text)
        return cls(str(u), str(a), str(p), int(c), int(m), int(g))

    def allocation(self, slots: int, time_s: int) -> Resources:
        """What the pilot job asks for: ``slots`` copies of the slot shape."""
        return Resources(
            cpus=self.cpus * slots,
            mem_mb=self.mem_mb * slots if self.mem_mb else None,
            gpus=self.gpus * slots,
            time_s=time_s,
            partition=self.partition,
            account=self.account,
        )

    def label(self) -> str:
        parts = [f"{self.cpus}c"]
        if self.mem_mb:
            parts.append(f"{self.mem_mb}M")
        if self.gpus:
            parts.append(f"{self.gpus}g")
        where = "/".join(x for x in (self.account, self.partition) if x)
        return ",".join(parts) + (f"@{where}" if where else "")


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Tuning of the lease manager (from settings, plus knobs tests turn)."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 0
    slots: int = 2
    prefetch: int = 2  # commands sent ahead to a busy pilot (it starts them without a round trip)
    idle_s: float = 180.0
    time_s: int = 3600
    drain_s: float = 120.0
    max_per_user: int = 4
    max_per_session: int = 2
    output_cap_bytes: int = 1_048_576
    heartbeat_s: float = 5.0
    reconnect_grace_s: float = 15.0  # a vanished pilot may come back this long
    start_timeout_s: float = 600.0  # a queued command waits this long for a lease
    tick_s: float = 1.0

    @classmethod
    def from_settings(cls, s: Settings, **overrides: Any) -> LeaseConfig:
        host, port = parse_listen(s.lease_listen)
        base = cls(
            listen_host=host,
            listen_port=port,
            slots=max(1, s.lease_slots),
            idle_s=s.lease_idle_s,
            time_s=s.lease_time_s,
            drain_s=s.lease_drain_s,
            max_per_user=s.lease_max_per_user,
            max_per_session=s.lease_max_per_session,
            output_cap_bytes=s.output_cap_bytes,
        )
        return base.__class__(**{**_fields(base), **overrides})


def fit_time(want_s: int, need_s: float, partition: str, partitions: list[dict[str, Any]]) -> int:
    """A lease's walltime within its partition's MaxTime (the default partition for "").

    ``want_s`` is the configured lease time; it is cut to the partition's limit,
    but never below what the command that asked needs (``need_s``): then the
    submission is left to be refused with Slurm's own message.
    """

    def chosen(p: dict[str, Any]) -> bool:
        return p.get("name") == partition if partition else bool(p.get("default"))

    part = next((p for p in partitions if chosen(p)), None)
    limit = part.get("max_time_s") if part else None
    if not isinstance(limit, int | float) or limit <= 0:  # unknown or UNLIMITED
        return want_s
    return int(max(min(want_s, limit), need_s))


def _fields(obj: Any) -> dict[str, Any]:
    return {k: getattr(obj, k) for k in obj.__dataclass_fields__}


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(
            f"lease_listen={text!r} is not HOST:PORT", hint="e.g. 127.0.0.1:0 or 10.0.0.5:7070"
        )
    return host.strip("[]"), int(port)


@dataclass(eq=False)
class Lease:
    """One warm allocation: a pilot job and, once it dials back, its connection."""

    id: str
    key: PoolKey
    uid: int
    owner: str  # Principal.key that caused the acquisition
    secret_hash: str
    backend: str
    state: str = "pending"
    backend_id: str = ""
    slots: int = 1
    walltime_end: float = 0.0
    created_at: float = field(default_factory=time.time)
    ready_at: float | None = None
    ended_at: float | None = None
    served: int = 0
    idle_core_s: float = 0.0
    host: str = ""
    pid: int = 0
    reason: str = ""
    last_used: float = field(default_factory=time.monotonic)
    accounted_at: float = field(default_factory=time.monotonic)

    @property
    def active(self) -> bool:
        return self.state in ACTIVE

    def row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user": self.key.user,
            "uid": self.uid,
            "owner": self.owner,
            "pool": self.key.to_json(),
            "secret_hash": self.secret_hash,
            "backend": self.backend,
            "backend_id": self.backend_id,
            "state": self.state,
            "slots": self.slots,
            "walltime_end": self.walltime_end,
            "created_at": self.created_at,
            "ready_at": self.ready_at,
            "ended_at": self.ended_at,
            "served": self.served,
            "idle_core_s": self.idle_core_s,
            "host": self.host,
            "pid": self.pid,
            "reason": self.reason,
        }

    @classmethod
    def from_row(cls, r: Any) -> Lease:
        return cls(
            id=r["id"],
            key=PoolKey.from_json(r["pool"]),
            uid=int(r["uid"]),
            owner=r["owner"],
            secret_hash=r["secret_hash"],
            backend=r["backend"],
            state=r["state"],
            backend_id=r["backend_id"],
            slots=int(r["slots"]),
            walltime_end=float(r["walltime_end"]),
            created_at=float(r["created_at"]),
            ready_at=r["ready_at"],
            ended_at=r["ended_at"],
            served=int(r["served"]),
            idle_core_s=float(r["idle_core_s"]),
            host=r["host"],
            pid=int(r["pid"]),
            reason=r["reason"],
        )


def pilot_script(
    *,
    python: str,
    pythonpath: str,
    host: str,
    port: int,
    lease_id: str,
    slots: int,
    time_s: int,
    cfg: LeaseConfig,
    secret_file: str,
) -> str:
    """The batch script of a lease job. The secret is never in it (env or 0600 file)."""
    argv = [
        python,
        "-m",
        "tenantry",
        "pilot",
        "--connect",
        f"{host}:{port}",
        "--lease",
        lease_id,
        "--slots",
        str(slots),
        "--walltime",
        str(time_s),
        "--drain",
        str(cfg.drain_s),
        "--orphan",
        str(max(cfg.idle_s, cfg.reconnect_grace_s * 2)),
        "--secret-file",
        secret_file,
    ]
    return (
        "#!/bin/sh\n"
        f"# Tenantry lease {lease_id}: a pilot that runs short commands, then exits.\n"
        f"PYTHONPATH={shlex.quote(pythonpath)}${{PYTHONPATH:+:$PYTHONPATH}}\n"
        "export PYTHONPATH\n"
        f"exec {shlex.join(argv)}\n"
    )


def pythonpath_of_package() -> str:
    import tenantry

    return str(Path(tenantry.__file__).resolve().parent.parent)
