"""The kill switch: stop an agent session (or all of a user's agents) now.

A stop is persisted first, so from that moment ``ensure_active`` -- which the
gateway calls on every request -- refuses the principal. Then the stop sweeps
what is already running: the principal's jobs are cancelled, its leases
drained, its running commands ended. Only *agent* principals are ever
matched: a human's own shells and jobs (agent ``human``) are never touched.
Parts that are not running in this daemon (no lease manager, no runner) are
skipped and the summary says so.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tenantry.core.errors import Conflict, NotFound, PermissionDenied, SessionStopped
from tenantry.core.events import Event, EventType, Subscription
from tenantry.core.models import AgentProduct, FieldsDict, Principal
from tenantry.safety.kill.store import SCHEMA, StopStore
from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

ANY_USER = "*"


@dataclass(frozen=True, slots=True)
class Stop(FieldsDict):
    id: int
    kind: str
    target: str
    owner: str
    by: str
    reason: str
    stopped_at: float

    def matches(self, p: Principal) -> bool:
        if not p.is_agent:
            return False
        if self.kind == "user":
            return p.user == self.target
        if self.owner != ANY_USER and p.user != self.owner:
            return False
        return self.target in (p.session, p.key)


def principal_from_key(key: str, uid: int = -1) -> Principal | None:
    parts = key.split("/")
    if len(parts) != 3:
        return None
    try:
        agent = AgentProduct(parts[1])
    except ValueError:
        agent = AgentProduct.OTHER_AGENT
    return Principal(
        uid=uid, user=parts[0], agent=agent, session="" if parts[2] == "-" else parts[2]
    )


class KillSwitch:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.store = StopStore(runtime.store_for(SCHEMA))
        self._stops: list[Stop] = []
        self._seen: dict[str, int] = {}  # principal key -> uid (-1 unknown)
        self._subscription = Subscription()

    async def start(self) -> None:
        await self.store.start()
        await self._reload()
        self._subscription.open(self.runtime.bus, self._on_event)

    async def aclose(self) -> None:
        self._subscription.close()
        await self.store.aclose()

    async def reload(self) -> None:
        """Re-read the active stops (another replica sharing the store may have changed them)."""
        await self._reload()

    async def _reload(self) -> None:
        self._stops = [Stop(*row) for row in await self.store.active()]

    # -- the check the gateway makes on every request ------------------------------
    def stopped(self, principal: Principal) -> Stop | None:
        for stop in self._stops:
            if stop.matches(principal):
                return stop
        return None

    async def ensure_active(self, principal: Principal) -> None:
        """Raise ``SessionStopped`` when an operator stopped this agent session."""
        self._seen.setdefault(principal.key, principal.uid)
        stop = self.stopped(principal)
        if stop is None:
            return
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stop.stopped_at))
        what = f"all agents of user {stop.target}" if stop.kind == "user" else "this agent session"
        cmd = (
            f"resume-user {stop.target}" if stop.kind == "user" else f"resume-session {stop.target}"
        )
        raise SessionStopped(
            f"{what} was stopped by {stop.by} at {when}"
            + (f": {stop.reason}" if stop.reason else "")
            + "; no further actions are accepted",
            hint=f"stop working and tell your user; they can run `tenantry admin {cmd}`",
            stop_id=stop.id,
        )

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        """The gateway's per-request hook: refuse stopped principals (and say so on the bus)."""
        try:
            await self.ensure_active(principal)
        except SessionStopped as err:
            await self.runtime.emit(
                Event(
                    EventType.REQUEST_DENIED,
                    principal.key,
                    op_name,
                    err.code,
                    data={"rule": "kill-switch", "stop_id": err.details.get("stop_id")},
                )
            )
            raise
        return []

    # -- stopping and resuming -----------------------------------------------------
    async def stop(
        self, kind: str, target: str, *, by: Principal, owner: str, reason: str = ""
    ) -> dict[str, Any]:
        now = time.time()
        if any(
            s.kind == kind and s.target == target and s.owner in (owner, ANY_USER)
            for s in self._stops
        ):
            existing = True
        else:
            existing = False
            await self.store.add(kind, target, owner, by.key, reason, now)
            await self._reload()
        matched = await self._principals(kind, target, owner)
        summary = await self._sweep(matched)
        summary.update(
            {
                "kind": kind,
                "target": target,
                "already_stopped": existing,
                "principals": sorted(matched),
            }
        )
        await self.store.set_summary(kind, target, summary)
        await self.runtime.emit(
            Event(
                EventType.SESSION_STOPPED,
                by.key,
                f"{kind}:{target}",
                "stopped",
                data={k: v for k, v in summary.items() if k != "errors"} | {"reason": reason},
            )
        )
        return summary

    async def resume(self, kind: str, target: str, *, by: Principal, owner: str) -> dict[str, Any]:
        active = [
            s
            for s in self._stops
            if s.kind == kind and s.target == target and owner in (ANY_USER, s.owner)
        ]
        if not active:
            if kind == "session":
                user_stop = next(
                    (
                        s
                        for s in self._stops
                        if s.kind == "user" and s.target in self._users_of(target)
                    ),
                    None,
                )
                if user_stop is not None:
                    raise Conflict(
                        f"session {target} is stopped because user {user_stop.target} is",
                        hint=f"run `tenantry admin resume-user {user_stop.target}`",
                    )
            raise NotFound(
                f"no active stop of {kind} {target}", hint="see `tenantry admin stopped`"
            )
        ids = [s.id for s in active]
        now = time.time()

        await self.store.resume(ids, by.key, now)
        await self._reload()
        await self.runtime.emit(
            Event(EventType.SESSION_RESUMED, by.key, f"{kind}:{target}", "resumed")
        )
        return {"kind": kind, "target": target, "resumed": ids}

    def list_stopped(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self._stops]

    def _users_of(self, session: str) -> set[str]:
        out = set()
        for key in self._seen:
            p = principal_from_key(key)
            if p is not None and session in (p.session, key):
                out.add(p.user)
        return out

    # -- finding and sweeping a principal's work ----------------------------------
    async def _principals(self, kind: str, target: str, owner: str) -> dict[str, int]:
        probe = Stop(0, kind, target, owner, "", "", 0.0)
        known = dict(self._seen)
        for key, uid in await self.runtime.journal.principals_seen():
            known.setdefault(key, uid)
        out: dict[str, int] = {}
        for key, uid in known.items():
            p = principal_from_key(key, uid)
            if p is not None and probe.matches(p):
                out[key] = uid
        return out

    async def _sweep(self, principals: dict[str, int]) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "jobs_cancelled": [],
            "sandboxes_killed": 0,
            "leases_drained": 0,
            "commands_ended": 0,
            "skipped": [],
            "errors": [],
        }
        keys = sorted(principals)
        # first the sandboxes (one signal ends each whole tree), then the rest
        leases, runner, boxes = self.runtime.leases, self.runtime.runner, self.runtime.sandboxes
        stoppers: tuple[tuple[str, Callable[[str], Awaitable[int]] | None, str], ...] = (
            ("sandbox", boxes.kill_principal if boxes else None, "sandboxes_killed"),
            ("leases", leases.drain_principal if leases else None, "leases_drained"),
            ("runner", runner.kill_principal if runner else None, "commands_ended"),
        )
        for comp_name, stop, field in stoppers:
            if stop is None:
                summary["skipped"].append(comp_name)
                continue
            for key in keys:
                try:
                    summary[field] += int(await stop(key))
                except Exception as exc:
                    summary["errors"].append(f"{comp_name} {key}: {exc}")
        rows = await self.runtime.journal.active_jobs_of(keys)
        for job_id, backend_id, key, uid in rows:
            try:
                await self._cancel_job(job_id, backend_id, key, uid)
                summary["jobs_cancelled"].append(job_id)
            except Exception as exc:  # report and go on: the other parts still have to stop
                summary["errors"].append(f"job {job_id}: {exc}")
        return summary

    async def _cancel_job(self, job_id: str, backend_id: str, key: str, uid: int) -> None:
        from tenantry.service.ops import REGISTRY, OpContext

        principal = principal_from_key(key, uid)
        op = REGISTRY.get("jobs.cancel")
        if op is not None and principal is not None:
            await op.fn(OpContext(principal, self.runtime), {"id": job_id})
        elif self.runtime.backend is not None and backend_id:
            await self.runtime.backend.cancel(backend_id)
        else:
            raise PermissionDenied("no jobs service or backend to cancel it with")

    async def _on_event(self, event: Event) -> None:
        if not event.principal:
            return
        self._seen.setdefault(event.principal, -1)
        if event.type is EventType.JOB_SUBMITTED and self._stops:
            p = principal_from_key(event.principal)
            if p is not None and self.stopped(p) is not None:
                # A submission raced the stop: cancel it too.
                backend_id = str((event.data or {}).get("backend_id", ""))
                try:
                    await self._cancel_job(event.subject, backend_id, event.principal, -1)
                except Exception:
                    log.exception("kill switch could not cancel raced job %s", event.subject)


def create(runtime: Runtime) -> KillSwitch:
    ks = KillSwitch(runtime)
    runtime.gates["kill"] = ks
    runtime.stops = ks
    return ks
