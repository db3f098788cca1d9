"""The facility service's own component: who may call what, decisions, ingest.

``create(runtime)`` fills ``rt.identify`` (callers of any uid, proven by the
socket) and registers the ``facility`` gate, which refuses every op the
service does not serve (``routing.SERVED``): a user's jobs and commands run in
the user's own daemon, never under the service's account.

- ``decide``: the executor asks before one of its ops runs; the service runs
  its gates (kill switch, policy, budgets, audit) for that op, as declared in
  the service's own op registry, for the forwarded principal.
- ``ingest``: the executor sends its events; each is checked to belong to the
  caller's user and published on the service's bus, so the journal, audit,
  budgets, memory capture, metrics and the job view see every user's.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tenantry.core.errors import NotFound, PermissionDenied, UsageError
from tenantry.core.events import Event, EventType
from tenantry.core.models import Principal
from tenantry.core.tasks import TaskGroup
from tenantry.facility import routing
from tenantry.facility.identity import (
    FacilityIdentity,
    PeerCredAuthenticator,
    parse_claims,
    staff_members,
)
from tenantry.facility.jobview import JOB_EVENTS, EventJobView
from tenantry.facility.replica_events import FOLLOWED as REPLICATED
from tenantry.facility.seams import JobStatusSource, Peer, SchedulerStatus, Viewer
from tenantry.facility.telemetry import CommandRecorder
from tenantry.service.ops import REGISTRY, OpContext, check_fields
from tenantry.service.runtime import Runtime

if TYPE_CHECKING:
    from tenantry.facility.accounts import AccountGate
    from tenantry.facility.poller import Poller, StatusCache
    from tenantry.facility.replica import ReplicatedStatus
    from tenantry.facility.replica_events import ReplicaEvents
    from tenantry.facility.slurm_events import EventFeed, EventLog

log = logging.getLogger(__name__)

MAX_BATCH = 1000
CLUSTER_POLL_S = 1.0  # squeue --json for every user, once a second
# Asleep after this long without a reader (``Poller.idle_after_s``): off (None) since
# executors take pushed changes (``facility.job_changes``), which read no job by id
CLUSTER_IDLE_S: float | None = None
FUTURE_SLACK_S = 60.0


def slow_poll_s(setting: float) -> float | None:
    """The poller's backoff ceiling from ``facility_poll_slow_s`` (None: every poll interval)."""
    return float(setting) if float(setting) > CLUSTER_POLL_S else None


ACCOUNT_GATE = "slurm-accounts"  # before "budgets" in GATE_ORDER: a refusal charges nothing
# the gates whose answer to a kept decision's op the service can vouch for (``keepable``)
KEEPABLE_GATES = frozenset({"facility", "kill", "policy", ACCOUNT_GATE, "budgets", "audit"})


def _event_of(raw: Any, user: str) -> Event:
    if not isinstance(raw, dict):
        raise UsageError("each event must be a JSON object")
    try:
        kind = EventType(str(raw.get("type", "")))
    except ValueError as exc:
        raise UsageError(f"unknown event type {raw.get('type')!r}") from exc
    principal = str(raw.get("principal") or f"{user}/daemon/-")
    if principal.split("/", 1)[0] != user:
        raise PermissionDenied(f"an event of {principal.split('/', 1)[0]!r} sent by {user!r}")
    data = raw.get("data") or {}
    if not isinstance(data, dict):
        raise UsageError("an event's data must be a JSON object")
    duration = raw.get("duration_s")
    ts = float(raw.get("ts") or time.time())
    return Event(
        kind,
        principal,
        str(raw.get("subject", ""))[:500],
        str(raw.get("outcome", ""))[:100],
        float(duration) if isinstance(duration, int | float) else None,
        data,
        min(ts, time.time() + FUTURE_SLACK_S),
    )


class FacilityService:
    def __init__(
        self,
        runtime: Runtime,
        identity: FacilityIdentity,
        jobs: JobStatusSource,
        scheduler: SchedulerStatus | None = None,
    ) -> None:
        self.runtime = runtime
        self.identity = identity
        self.jobs = jobs
        # a cluster-wide poller of the scheduler, when one is plugged in: executors then
        # take their jobs' states from it (``facility.scheduler_status``)
        self.scheduler = scheduler
        self.events_view = jobs if isinstance(jobs, EventJobView) else None
        self.poller: Poller | None = None
        self.feed: EventFeed | None = None  # slurmctld's job events, when configured
        # replicas on one PostgreSQL: the status log they share, polled by the leader only
        self.replicated: ReplicatedStatus | None = None
        # the poller's cache, whose changes are pushed to executors (``facility.job_changes``),
        # and the name of the sequence its seqs count in
        self.status_cache: StatusCache | None = None
        self.stream = ""
        self._tasks = TaskGroup("facility")
        self._unsubscribe: Any = None
        self._unsubscribe_stops: Any = None
        self.commands = CommandRecorder(runtime.journal)
        # the kill switch's version: executors wait on it to learn of stops at once
        self.stops_version = 0
        self._stops_changed = asyncio.Event()
        # a claimed Slurm account checked against Slurm's associations (Slurm backend)
        self.accounts: AccountGate | None = None
        # replicas on one PostgreSQL: the others' job and kill-switch events, at once
        self.replica_events: ReplicaEvents | None = None
        self.served: collections.Counter[str] = collections.Counter()  # executor ops, by name

    def poll_the_cluster(self, replicated: ReplicatedStatus | None = None) -> None:
        """One poller of the scheduler for every user.

        Job views keep their owners from the executors' events and take their state
        from the poller; executors take their jobs' states from it as well. Without
        ``replicated`` this service polls alone; with it (replicas on one PostgreSQL)
        the status comes from the shared log, and the poller runs on whichever
        replica holds the leader's advisory lock.
        """
        from tenantry.facility.polled_status import PolledScheduler
        from tenantry.facility.polled_view import PolledJobView
        from tenantry.facility.poller import (
            LocalPublisher,
            Poller,
            SerialPublisher,
            SlurmSnapshotSource,
            StatusCache,
        )

        views = self.events_view
        if views is None:
            return  # another job view was plugged in: it brings its own state
        if replicated is not None:
            self.replicated = replicated
            self.status_cache, self.stream = replicated.cache, "replicas"
            self.jobs = PolledJobView(views, replicated)
            self.scheduler = PolledScheduler(replicated)
            return
        from tenantry.facility.slurm_events import EventFeed

        settings = self.runtime.settings
        cache = StatusCache()
        source = SlurmSnapshotSource(timeout_s=float(settings.slurm_timeout_s))
        publisher = SerialPublisher(LocalPublisher(cache))
        events = slurm_event_log(self.runtime)
        if events is not None:
            self.feed = EventFeed(events, cache, publisher, source)
        self.poller = Poller(
            source,
            cache,
            publisher,
            interval_s=CLUSTER_POLL_S,
            idle_after_s=CLUSTER_IDLE_S,
            slow_s=slow_poll_s(settings.facility_poll_slow_s),
            events=self.feed,
            safety_s=float(settings.facility_safety_poll_s),
        )
        self.jobs = PolledJobView(views, cache)
        self.scheduler = PolledScheduler(cache)
        self.status_cache, self.stream = cache, f"service-{os.getpid()}-{time.time():.0f}"

    async def start(self) -> None:
        if self.replicated is not None:
            await self.replicated.start()
        if self.poller is not None:
            self._tasks.supervise("poller", self.poller.run)
        if self.feed is not None:
            self._tasks.supervise("slurm-events", self.feed.run)
        if self.accounts is not None:
            self._tasks.supervise("slurm-facts", self.accounts.facts.run)
        view = self.events_view
        if view is not None:
            past = await self.runtime.journal.events(types=list(JOB_EVENTS), limit=100_000)
            for row in past:
                view.apply(
                    row["type"],
                    row["principal"],
                    row["subject"],
                    row["outcome"],
                    row["data"],
                    row["ts"],
                )
            self._unsubscribe = self.runtime.bus.subscribe(view.on_event)
        self._unsubscribe_stops = self.runtime.bus.subscribe(self._on_stop)
        if self.replica_events is not None:
            await self.replica_events.start()
        log.info("facility service: staff %s", ", ".join(sorted(self.identity.staff)) or "none")

    async def aclose(self) -> None:
        await self._tasks.aclose()
        if self.replica_events is not None:
            await self.replica_events.aclose()
        if self.replicated is not None:
            await self.replicated.aclose()
        for unsubscribe in (self._unsubscribe, self._unsubscribe_stops):
            if unsubscribe is not None:
                unsubscribe()
        self._unsubscribe = self._unsubscribe_stops = None

    async def _on_stop(self, ev: Event) -> None:
        if self.replica_events is not None and ev.type.value in REPLICATED:
            self.replica_events.announce()  # the other replicas read it from the journal
        if ev.type in (EventType.SESSION_STOPPED, EventType.SESSION_RESUMED):
            self._stops_moved()

    def _stops_moved(self) -> None:
        self.stops_version += 1
        self.wake_stops()

    def wake_stops(self) -> None:
        """Answer the executors' long polls now (the stops or the policy's version moved)."""
        self._stops_changed.set()
        self._stops_changed = asyncio.Event()

    def policy_version(self) -> str:
        """The facility policy's version ("" without one): executors' kept answers key on it."""
        from tenantry.safety.policy.component import PolicyService

        policy = self.runtime.gates.get("policy")
        return policy.version if isinstance(policy, PolicyService) else ""

    async def from_replica(self, row: dict[str, Any]) -> None:
        """An event another replica journaled: into the job view, or the kill switch."""
        kind = str(row["type"])
        if kind in (EventType.SESSION_STOPPED.value, EventType.SESSION_RESUMED.value):
            from tenantry.safety.kill.component import KillSwitch

            kill = self.runtime.gates.get("kill")
            if isinstance(kill, KillSwitch):
                await kill.reload()
            self._stops_moved()
        elif self.events_view is not None:
            self.events_view.apply(
                kind, row["principal"], row["subject"], row["outcome"], row["data"], row["ts"]
            )

    async def wait_stops(self, since: int, timeout_s: float, policy: str | None = None) -> int:
        """The kill switch's version once it differs from ``since`` (or at the timeout).

        With ``policy`` (a policy version the caller holds) it returns as well once the
        policy's version differs from it.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while self.stops_version == since and policy in (None, self.policy_version()):
            left = deadline - loop.time()
            if left <= 0:
                break
            changed = self._stops_changed
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await changed.wait()
        return self.stops_version

    def viewer(self, p: Principal) -> Viewer:
        return self.identity.viewer(p)

    # -- the gate: the service serves only its own ops ---------------------------
    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        if not routing.served(op_name):
            raise PermissionDenied(
                f"the facility service does not run {op_name}: it runs as the user, in the"
                " user's own daemon",
                hint="talk to your own daemon (unset TENANTRY_SOCKET); it asks the facility",
            )
        return []

    # -- what executors ask ---------------------------------------------------------
    async def decide(self, p: Principal, op_name: str, params: dict[str, Any]) -> list[str]:
        """Run the service's gates for one executor op; raise the refusal or return warnings."""
        op = REGISTRY.get(op_name)
        if op is None:
            raise NotFound(f"unknown operation {op_name!r}")
        warnings: list[str] = []
        for gate in self.runtime.ordered_gates():
            if gate is not self:
                warnings.extend(await gate.gate(p, op.name, op.action, params))
        return warnings

    def keepable(self, p: Principal, op_name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """After an allowed ``decide`` with no warnings: may the executor keep this
        decision (``reuse.describe``), or None.

        Only for ``routing.KEPT_DECISIONS``, only when every gate here is one whose
        answer is a function of the request, the policy version and the kill switch
        (both announced to executors, which drop what they kept when either moves),
        only when the budgets count nothing for it, and only when the policy's
        decision itself may be kept.
        """
        from tenantry.safety.budgets.service import BudgetService
        from tenantry.safety.policy.component import PolicyService

        op = REGISTRY.get(op_name)
        if op is None or op.action is None or op.name not in routing.KEPT_DECISIONS:
            return None
        gates = self.runtime.gates
        if set(gates) - KEEPABLE_GATES:
            return None  # a gate this cannot vouch for
        policy, budgets = gates.get("policy"), gates.get("budgets")
        if not isinstance(policy, PolicyService):
            return None
        if budgets is not None and (
            not isinstance(budgets, BudgetService) or budgets.amounts(op.action, params)
        ):
            return None
        return policy.reuse_of(policy.check(p, op.action, params))

    async def call(
        self, peer: Peer, claims: Mapping[str, Any], op_name: str, params: dict[str, Any]
    ) -> dict[str, Any]:
        """One op for a caller proven by another transport (a MUNGE-authenticated TCP
        listener hands each verified request here): the same principal, gates and op as
        the Unix socket's HTTP endpoint; answered as ``{"result", "warnings"}``."""
        p = self.identity.describe(peer, parse_claims(json.dumps(dict(claims))))
        op = REGISTRY.get(op_name)
        if op is None:
            raise NotFound(f"unknown operation {op_name!r}", hint="see facility.info for the list")
        if op.streaming:
            raise UsageError(f"{op_name} streams; it is not served over this transport")
        if op.fields is not None:
            check_fields(params, op.name, op.fields)
        await self.runtime.journal.touch_session(p)
        warnings: list[str] = []
        for gate in self.runtime.ordered_gates():
            warnings.extend(await gate.gate(p, op.name, op.action, params))
        result = await op.fn(OpContext(p, self.runtime), params)
        return {"result": result, "warnings": warnings}

    async def ingest(self, p: Principal, raw: list[Any]) -> int:
        if len(raw) > MAX_BATCH:
            raise UsageError(f"at most {MAX_BATCH} events per call")
        events = [_event_of(item, p.user) for item in raw]
        for ev in events:
            await self.commands.record(ev, p.uid)
            await self.runtime.emit(ev)
        return len(events)


def create(runtime: Runtime) -> FacilityService:
    """The service side (``tenantry facility serve`` adds it to the components)."""
    staff = staff_members(runtime.settings.facility_staff_group)
    identity = FacilityIdentity([PeerCredAuthenticator()], staff)
    service = FacilityService(runtime, identity, EventJobView())
    if runtime.backend.name == "slurm":
        service.poll_the_cluster(replicated_status(runtime))
        service.accounts = account_gate(runtime)
        if service.accounts is not None:
            runtime.gates[ACCOUNT_GATE] = service.accounts
    service.replica_events = replica_events(runtime, service)
    runtime.identify = identity
    runtime.gates["facility"] = service
    from tenantry.safety.policy.component import PolicyService

    policy = runtime.gates.get("policy")
    if isinstance(policy, PolicyService):
        policy.watch(service.wake_stops)  # executors drop the answers they kept
    return service


def account_gate(runtime: Runtime) -> AccountGate | None:
    """Claimed accounts checked against Slurm's associations (``facility_facts_refresh_s``)."""
    from tenantry.facility.accounts import AccountGate, PolicySink
    from tenantry.facility.slurm_facts import SlurmFacts
    from tenantry.safety.policy.component import PolicyService

    refresh = float(runtime.settings.facility_facts_refresh_s)
    if refresh <= 0:
        return None
    policy = runtime.gates.get("policy")
    sink = PolicySink(policy) if isinstance(policy, PolicyService) else None
    facts = SlurmFacts(refresh_s=refresh, timeout_s=float(runtime.settings.slurm_timeout_s))
    return AccountGate(facts, sink)


def slurm_event_log(runtime: Runtime) -> EventLog | None:
    """slurmctld's job event log (``facility_slurm_events``), or None."""
    from tenantry.facility.slurm_events import event_log

    settings = runtime.settings
    return event_log(str(settings.facility_slurm_events), str(settings.facility_slurm_user))


def replica_events(runtime: Runtime, service: FacilityService) -> ReplicaEvents | None:
    """The other replicas' events when the store is PostgreSQL (``store_url``), else None."""
    from tenantry.store import engine_of

    url = str(runtime.settings.store_url)
    if not url or engine_of(url) != "postgresql":
        return None
    from tenantry.facility.replica_events import ReplicaEvents

    name = f"{os.uname().nodename}:{os.getpid()}"
    return ReplicaEvents(url, runtime.journal, service.from_replica, name)


def replicated_status(runtime: Runtime) -> ReplicatedStatus | None:
    """The shared status of replicas when the store is PostgreSQL (``store_url``), else None."""
    from tenantry.store import engine_of

    url = str(runtime.settings.store_url)
    if not url or engine_of(url) != "postgresql":
        return None
    import os

    from tenantry.facility.poller import SlurmSnapshotSource
    from tenantry.facility.replica import ReplicatedStatus

    source = SlurmSnapshotSource(timeout_s=float(runtime.settings.slurm_timeout_s))
    name = f"{os.uname().nodename}:{os.getpid()}"
    return ReplicatedStatus(
        url,
        source,
        name=name,
        interval_s=CLUSTER_POLL_S,
        idle_after_s=CLUSTER_IDLE_S,
        slow_s=slow_poll_s(runtime.settings.facility_poll_slow_s),
        events_log=slurm_event_log(runtime),
        safety_s=float(runtime.settings.facility_safety_poll_s),
    )
