"""The user daemon as the user's executor (facility mode, ``facility_address`` set).

The daemon still runs what must run as the user (sbatch with the user's
credentials, local commands, pilots) and serves the user's and the sandboxed
sessions' sockets. What governs agents belongs to the facility service, so
``create(runtime)`` rewires the typed slots the concepts already use:

- ``rt.gates``: the daemon's own kill switch, policy, budgets and audit gates
  give way to one ``facility`` gate that asks the service (``facility.decide``)
  before every op. When the user has a policy layer of their own (forbid-only,
  ``<state>/policy.cedar``), the daemon's policy gate still runs after it, so
  the user can only restrict what the facility allows. When the service cannot
  be reached an agent's request is refused with ``FacilityUnavailable``
  (retryable); a human's goes ahead with a warning (the user's own commands
  keep working).
- ``rt.forwarder``: ops whose state the service owns (memory, the kill switch,
  approvals, budgets: ``routing.FORWARDED``) are answered by the service.
- ``rt.lessons``, ``rt.flags``, ``rt.budgets``: the facility's memory, the
  facility's policy hold after flagged content, the facility's budgets.
- every event on the bus is sent to the service (``facility.ingest``) in
  batches from a bounded queue; the service keeps the audit, the telemetry
  and the job view of every user.

In user mode (no address) the component does nothing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import json
import logging
import os
from typing import Any, Protocol, runtime_checkable

from tenantry.core.errors import (
    FacilityUnavailable,
    PolicyDenied,
    SessionStopped,
    TenantryError,
)
from tenantry.core.events import Bus, Event, EventType, Subscription
from tenantry.core.models import Principal
from tenantry.core.tasks import TaskGroup
from tenantry.facility import answers as answers_mod
from tenantry.facility import routing
from tenantry.facility.answers import KeptAnswers
from tenantry.facility.identity import user_name
from tenantry.facility.link import open_channel
from tenantry.facility.seams import FacilityChannel
from tenantry.facility.telemetry import principal_of
from tenantry.service.ops import REGISTRY, OpContext
from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

# gates whose state the facility service owns; they run there, not here
FACILITY_GATES = ("kill", "policy", "budgets", "audit")
USER_POLICY = "policy.cedar"  # the user's own layer (forbid-only), in the state directory
QUEUE_MAX = 10_000
BATCH_MAX = 500
BATCH_BYTES = 1_000_000  # well under the service's max_body_bytes
PAUSE_MAX_S = 5.0
STOP_WAIT_S = 60.0  # long poll of the service's stops (answered at once when one changes)


@dataclasses.dataclass(eq=False)
class RemoteGate:
    """Asks the service's decision before each op; for ``routing.KEPT_DECISIONS`` a
    decision the service marked reusable comes from ``answers`` instead (recorded on
    the bus, which the service receives), as kept ``policy.check`` answers do."""

    link: FacilityChannel
    runtime: Runtime | None = None
    answers: KeptAnswers | None = None

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        ask: dict[str, Any] = {"op": op_name, "params": params}
        answers = self.answers if op_name in routing.KEPT_DECISIONS else None
        key = answers.key(principal, ask) if answers is not None else None
        if answers is not None and key is not None:
            kept = answers.get(key)
            if kept is not None:
                bus = self.runtime.bus if self.runtime is not None else None
                await record_kept(bus, principal, action or op_name, kept)
                return []
            ask = {**ask, "reuse": True}
        try:
            result, warnings = await self.link.call(principal, "facility.decide", ask)
        except FacilityUnavailable as err:
            if principal.is_agent:
                raise
            return [f"{err.message}; running your own command with this daemon's checks only"]
        except SessionStopped:
            try:
                await self.end_local_work(principal)
            except Exception:  # the refusal stands whatever the sweep met
                log.exception("could not end the local work of stopped %s", principal.key)
            raise
        said = [str(w) for w in (result or {}).get("warnings", [])]
        if answers is not None and key is not None and isinstance(result, dict):
            if warnings or said:
                result.pop("reuse", None)
            else:
                answers.put(key, result)
        return warnings + said

    async def end_local_work(self, principal: Principal) -> int:
        """The facility stopped this principal: end what this daemon runs for it.

        Its sandboxes, leases and commands end, and its active jobs are cancelled with
        the user's own credentials (the service cannot: they are the user's).
        """
        rt = self.runtime
        if rt is None:
            return 0
        key, ended = principal.key, 0
        stoppers = (
            rt.sandboxes.kill_principal if rt.sandboxes else None,
            rt.leases.drain_principal if rt.leases else None,
            rt.runner.kill_principal if rt.runner else None,
        )
        for stop in stoppers:
            if stop is not None:
                ended += int(await stop(key))
        cancel = REGISTRY.get("jobs.cancel")
        for job_id, _backend_id, _key, _uid in await rt.journal.active_jobs_of([key]):
            if cancel is not None:
                await cancel.fn(OpContext(principal, rt), {"id": job_id})
                ended += 1
        if ended:
            log.info("the facility stopped %s: ended %d of its local work items", key, ended)
        return ended


class DecisionView(Protocol):
    @property
    def allowed(self) -> bool: ...

    @property
    def source(self) -> str: ...

    @property
    def rule(self) -> str: ...

    @property
    def message(self) -> str: ...


@runtime_checkable
class PolicyCheck(Protocol):
    """The daemon's own policy, asked without side effects (a dry run)."""

    def check(self, principal: Principal, action: str, params: dict[str, Any]) -> DecisionView: ...


class UserLayerGate:
    """The user's own policy layer, after the facility's decision: it can only refuse.

    Only denials that come from the user's file count; the facility's rules
    (and their approvals) were decided by the service.
    """

    def __init__(self, policy: PolicyCheck) -> None:
        self.policy = policy

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        if action is None:
            return []
        d = self.policy.check(principal, action, params)
        if not d.allowed and d.source == "user":
            raise PolicyDenied(
                d.message,
                hint="your own policy layer refuses this (<state>/policy.cedar)",
                rule=d.rule,
                action=action,
                source="user",
            )
        return []


class Forwarder:
    """Sends the service's ops to it; a ``policy.check`` it answered before may come from
    ``answers`` (``facility.answers``), recorded on the bus, which the service receives."""

    def __init__(
        self, link: FacilityChannel, answers: KeptAnswers | None = None, bus: Bus | None = None
    ) -> None:
        self.link = link
        self.answers = answers
        self.bus = bus

    def forwards(self, op_name: str) -> bool:
        return routing.forwarded(op_name)

    async def forward(
        self, principal: Principal, op_name: str, params: dict[str, Any], request_id: str
    ) -> tuple[Any, list[str]]:
        answers = self.answers if op_name == answers_mod.OP else None
        key = answers.key(principal, params) if answers is not None else None
        if answers is not None and key is not None:
            kept = answers.get(key)
            if kept is not None:
                await record_kept(self.bus, principal, str(params.get("action", "")), kept)
                return kept, []
            params = {**params, "reuse": True}
        wait = params.get("timeout_s")
        timeout = self.link.timeout_s + (float(wait) if isinstance(wait, int | float) else 0.0)
        result, warnings = await self.link.call(
            principal, op_name, params, request_id=request_id, timeout_s=timeout
        )
        if answers is not None and key is not None and isinstance(result, dict):
            if warnings:
                result.pop("reuse", None)
            else:
                answers.put(key, result)
        return result, warnings


async def record_kept(bus: Bus | None, principal: Principal, subject: str, kept: Any) -> None:
    """The service did not see this decision: say on the bus (sent to it) what was answered."""
    if bus is None:
        return
    answer = kept if isinstance(kept, dict) else {}
    await bus.publish(
        Event(
            EventType.POLICY_DECISION,
            principal=principal.key,
            subject=subject,
            outcome=str(answer.get("decision", "")),
            data={"rule": answer.get("rule", ""), "source": answer.get("source", ""),
                  "kept": True},
        )
    )  # fmt: skip


class RemoteLessons:
    def __init__(self, link: FacilityChannel) -> None:
        self.link = link

    async def lessons_for_failure(
        self, principal: Principal, text: str, limit: int = 3
    ) -> list[dict[str, Any]]:
        try:
            result, _ = await self.link.call(
                principal, "facility.lessons", {"text": text[-20_000:], "limit": limit}
            )
        except TenantryError as err:  # lessons are a help, never a reason to fail a command
            log.info("no facility lessons for %s: %s", principal.key, err.message)
            return []
        return list((result or {}).get("lessons", []))


class RemoteBudgets:
    def __init__(self, link: FacilityChannel) -> None:
        self.link = link

    async def status(self, principal: Principal) -> list[dict[str, Any]]:
        result, _ = await self.link.call(principal, "budgets.show", {})
        return list((result or {}).get("budgets", []))


class Executor:
    """The executor side of facility mode; inert without ``facility_address``."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.address = runtime.settings.facility_address
        self.link = open_channel(self.address, float(runtime.settings.facility_timeout_s))
        self.me = Principal(uid=os.getuid(), user=user_name(os.getuid()), host=os.uname().nodename)
        self._queue: collections.deque[dict[str, Any]] = collections.deque(maxlen=QUEUE_MAX)
        self._wake = asyncio.Event()
        self._tasks = TaskGroup("facility")
        self._subscription = Subscription()
        self.dropped = 0
        self.sent = 0
        # the service's reusable policy answers, served while its policy version holds
        self.answers = KeptAnswers()
        self._stops: list[dict[str, Any]] = []  # the facility's active stops, last seen

    @property
    def active(self) -> bool:
        return bool(self.address)

    def wire(self) -> None:
        """Hand the facility's decisions to the service (called by ``create``)."""
        rt = self.runtime
        # the user's own policy layer may only narrow: when there is one, this daemon's
        # policy gate still runs, after the facility's decision (GATE_ORDER)
        local = rt.gates.get("policy")
        for name in FACILITY_GATES:
            rt.gates.pop(name, None)
        if (rt.settings.state_path / USER_POLICY).is_file() and isinstance(local, PolicyCheck):
            rt.gates["policy"] = UserLayerGate(local)
        rt.gates["facility"] = RemoteGate(self.link, rt, self.answers)
        rt.forwarder = Forwarder(self.link, self.answers, rt.bus)
        rt.lessons = RemoteLessons(self.link)
        rt.budgets = RemoteBudgets(self.link)
        rt.flags = self
        rt.stops = self  # the facility's stops, not this daemon's own switch

    async def start(self) -> None:
        if not self.active:
            return
        self._subscription.open(self.runtime.bus, self._on_event)
        self._tasks.supervise("events", self._pump)
        self._tasks.supervise("stops", self._watch_stops)
        log.info("facility mode: decisions from %s", self.address)

    async def aclose(self) -> None:
        self._subscription.close()
        if self._queue:
            # one last try: the daemon.stopped event and anything still queued
            with contextlib.suppress(TenantryError, TimeoutError):
                async with asyncio.timeout(self.link.timeout_s):
                    await self._send_batch()
        await self._tasks.aclose()
        await self.link.aclose()

    # -- stops set at the facility end this daemon's work without waiting for a request --
    async def _watch_stops(self) -> None:
        """Long-poll the service's stops; sweep this daemon's work of each new one."""
        handled: set[int] = set()
        version = -1
        while True:
            ask: dict[str, Any] = {"version": version, "timeout_s": STOP_WAIT_S}
            if self.answers.version is not None:
                ask["policy"] = self.answers.version
            try:
                result, _ = await self.link.call(
                    self.me, "facility.stops", ask, timeout_s=STOP_WAIT_S + self.link.timeout_s
                )
            except TenantryError:
                self.answers.forget()  # the service may change unseen meanwhile
                await asyncio.sleep(PAUSE_MAX_S)  # unreachable: agents are refused anyway
                continue
            except BaseException:
                self.answers.forget()
                raise
            version = int((result or {}).get("version", -1))
            policy = (result or {}).get("policy")
            # kept answers hold under this kill-switch version and this policy version only
            self.answers.announce(policy if isinstance(policy, str) else None, version)
            stops = [s for s in (result or {}).get("stopped", []) if isinstance(s, dict)]
            self._stops = stops
            handled &= {int(s.get("id", 0)) for s in stops}  # a stop set again is swept again
            for stop in stops:
                sid = int(stop.get("id", 0))
                if sid in handled:
                    continue
                handled.add(sid)
                gate = self.runtime.gates.get("facility")
                for p in await self._principals_of(stop):
                    if isinstance(gate, RemoteGate):
                        await gate.end_local_work(p)

    async def _principals_of(self, stop: dict[str, Any]) -> list[Principal]:
        """This daemon's agent principals a stop (``kind``, ``target``) names."""
        out: list[Principal] = []
        for key, uid in await self.runtime.journal.principals_seen():
            p = principal_of(key, uid)
            if p.user == self.me.user and _names(stop, p):
                out.append(p)
        return out

    # -- StopCheck: a command that passed the gates asks again as it starts --
    def stopped(self, principal: Principal) -> object | None:
        return next((s for s in self._stops if _names(s, principal)), None)

    # -- FlagSink: the facility's policy holds a flagged session's next actions --
    def note_flagged(self, principal: Principal) -> None:
        self._tasks.spawn(self._flag(principal), "flag")

    async def _flag(self, principal: Principal) -> None:
        try:
            await self.link.call(principal, "facility.flag", {})
        except TenantryError as err:
            log.warning(
                "could not tell the facility %s got flagged content: %s", principal.key, err
            )

    # -- events: every one goes to the service -------------------------------------
    async def _on_event(self, event: Event) -> None:
        if len(self._queue) == self._queue.maxlen:
            self.dropped += 1  # bounded: the oldest goes (counted, shown in info)
        self._queue.append(event.to_dict())
        self._wake.set()

    def _next_batch(self) -> list[dict[str, Any]]:
        """The oldest events, at most ``BATCH_MAX`` of them and ``BATCH_BYTES`` of JSON."""
        batch: list[dict[str, Any]] = []
        size = 0
        for ev in itertools.islice(self._queue, BATCH_MAX):
            n = len(json.dumps(ev, default=str))
            if batch and size + n > BATCH_BYTES:
                break
            batch.append(ev)
            size += n
        return batch

    def _drop(self, count: int) -> None:
        for _ in range(min(count, len(self._queue))):
            self._queue.popleft()

    async def _send_batch(self) -> None:
        batch = self._next_batch()
        if not batch:
            return
        try:
            await self.link.call(self.me, "facility.ingest", {"events": batch})
        except TenantryError as err:
            if err.retryable:
                raise  # down: the batch stays queued and is sent again
            # refused (not down): resending would loop forever; these are dropped, counted
            log.warning("the facility refused %d events: %s", len(batch), err)
            self.dropped += len(batch)
            self._drop(len(batch))
            return
        self._drop(len(batch))
        self.sent += len(batch)

    async def _pump(self) -> None:
        pause = 0.2
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                try:
                    await self._send_batch()
                    pause = 0.2
                except TenantryError as err:
                    log.info("facility unreachable, %d events queued: %s", len(self._queue), err)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, PAUSE_MAX_S)

    async def flush(self, timeout_s: float = 10.0) -> None:
        """Wait until every queued event reached the service. For tests and shutdown."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self._queue and loop.time() < deadline:
            await asyncio.sleep(0.02)


def create(runtime: Runtime) -> Executor:
    executor = Executor(runtime)
    if executor.active:
        executor.wire()
    return executor


def _names(stop: dict[str, Any], p: Principal) -> bool:
    """Does a facility stop (``kind``, ``target``) name the agent principal ``p``?"""
    kind, target = str(stop.get("kind", "")), str(stop.get("target", ""))
    if not p.is_agent:
        return False
    return (kind == "user" and target == p.user) or (
        kind == "session" and target in (p.session, p.key)
    )
