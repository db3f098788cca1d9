"""``BudgetService``: charge actions against budgets, account real usage.

``charge(principal, action, amounts)`` is called by the gateway before an
action runs. Counted metrics (jobs, commands, queries) are recorded at once;
consumed metrics (core/GPU-hours) are only *checked* there -- used so far plus
the estimates of jobs still running plus what this action asks -- and recorded
when the bus reports what really ran (``command.finished`` cpu seconds,
``job.state`` terminal elapsed time x job shape). Leases are a gauge fed by
lease events. Check and record happen in one write transaction, so two
concurrent charges cannot both slip under a limit.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tenantry.core.errors import BudgetExceeded, UsageError
from tenantry.core.events import Event, EventType, Subscription
from tenantry.core.models import JobState, Principal, Resources
from tenantry.safety.budgets import config as cfgmod
from tenantry.safety.budgets.config import CONSUMED, METRICS, BudgetConfig, Limit
from tenantry.safety.budgets.store import SCHEMA, BudgetStore, UsageRow
from tenantry.safety.budgets.windows import bounds, describe_reset
from tenantry.service.runtime import Runtime
from tenantry.store.engine import Conn

log = logging.getLogger(__name__)

WINDOW_WORDS = {
    "minute": "this minute's",
    "hour": "this hour's",
    "day": "today's",
    "night": "tonight's",
    "total": "this session's total",
    "concurrent": "concurrent",
}
METRIC_WORDS = {
    "core_hours": "core-hour",
    "gpu_hours": "GPU-hour",
    "jobs": "job",
    "commands": "command",
    "queries": "scheduler-query",
    "leases": "lease",
}
ADVICE = {
    "core_hours": "batch your work into fewer, right-sized jobs",
    "gpu_hours": "batch your sweep into fewer jobs or a job array, and test on CPU first",
    "jobs": "use a job array or one job that runs many steps",
    "commands": "combine steps into one script instead of many small commands",
    "queries": "use jobs.wait instead of polling job status",
    "leases": "reuse the lease you already hold",
}


def user_of(key: str) -> str:
    return key.split("/", 1)[0]


def estimate(resources: Resources, tasks: int = 1, default_hours: float = 1.0) -> dict[str, float]:
    """The amounts a job submission charges: jobs, core-hours and GPU-hours asked."""
    hours = (resources.time_s / 3600.0) if resources.time_s else default_hours
    return {
        "jobs": float(tasks),
        "core_hours": tasks * max(resources.cpus, 1) * hours,
        "gpu_hours": tasks * resources.gpus * hours,
    }


def array_tasks(spec: str) -> int:
    """Number of tasks of an sbatch ``--array`` spec (``0-9``, ``1,3,5-7``, ``0-99:2%10``)."""
    spec = spec.split("%", 1)[0].strip()
    if not spec:
        return 1
    total = 0
    for part in spec.split(","):
        rng, _, step_s = part.partition(":")
        lo_s, _, hi_s = rng.partition("-")
        try:
            lo = int(lo_s)
            hi = int(hi_s) if hi_s else lo
            step = int(step_s) if step_s else 1
        except ValueError:
            return 1
        if hi < lo or step < 1:
            return 1
        total += (hi - lo) // step + 1
    return max(total, 1)


def amounts_for(
    action: str | None, params: dict[str, Any], default_hours: float = 1.0
) -> dict[str, float]:
    """What an op with policy ``action`` charges, from its raw params."""
    if action == "run_command":
        return {"commands": 1.0}
    if action == "query_jobs":
        return {"queries": 1.0}
    if action in ("acquire_lease", "lease_acquire"):
        return {"leases": 1.0}
    if action == "submit_job":
        # priced from the one canonical request: the fields, the extra options,
        # the script's #SBATCH lines and SBATCH_* variables, merged as Slurm does
        from tenantry.jobs.request import JobRequest

        return JobRequest.from_params(params).amounts(default_hours)
    return {}


@dataclass(frozen=True, slots=True)
class Usage:
    limit: Limit
    scope_key: str
    used: float
    start: float
    reset: float

    def to_dict(self, now: float, cfg: BudgetConfig) -> dict[str, Any]:
        return {
            "scope": self.limit.scope,
            "scope_key": self.scope_key,
            "window": self.limit.window,
            "metric": self.limit.metric,
            "used": round(self.used, 4),
            "limit": self.limit.hard,
            "fraction": round(self.used / self.limit.hard, 4) if self.limit.hard else 1.0,
            "reset_at": None if math.isinf(self.reset) else self.reset,
            "resets": _resets(self.limit, self.reset, now, cfg),
        }


class BudgetService:
    def __init__(self, runtime: Runtime, config: BudgetConfig | None = None) -> None:
        self.runtime = runtime
        self.config = config
        self.clock: Callable[[], float] = time.time
        self.store = BudgetStore(runtime.store_for(SCHEMA))
        self._subscription = Subscription()
        self._warned: set[tuple[str, str, str, float]] = set()

    async def start(self) -> None:
        if self.config is None:
            self.config = cfgmod.load(self.runtime.settings.budgets_file)
        await self.store.start()
        self._subscription.open(self.runtime.bus, self._on_event)

    async def aclose(self) -> None:
        self._subscription.close()
        await self.store.aclose()

    @property
    def cfg(self) -> BudgetConfig:
        if self.config is None:
            raise RuntimeError("BudgetService is not started")
        return self.config

    def _exempt(self, principal: Principal | str) -> bool:
        if not self.cfg.agents_only:
            return False
        if isinstance(principal, Principal):
            return not principal.is_agent
        parts = principal.split("/")
        return len(parts) > 1 and parts[1] == "human"

    # -- reading usage ---------------------------------------------------------------
    def _used(self, conn: Conn, lim: Limit, key: str, start: float) -> float:
        scope_key = key if lim.scope == "session" else user_of(key)
        if lim.metric == "leases":
            return self.store.leases_held(conn, lim.scope, scope_key)
        used = self.store.used(conn, lim.scope, scope_key, lim.metric, start)
        if lim.metric in CONSUMED:
            factor = "cpus" if lim.metric == "core_hours" else "gpus"
            used += self.store.committed(conn, lim.scope, scope_key, factor)
        return used

    def _usages(self, conn: Conn, key: str, metrics: set[str], now: float) -> list[Usage]:
        out: list[Usage] = []
        for lim in self.cfg.limits:
            if lim.metric not in metrics:
                continue
            b = bounds(lim.window, now, self.cfg)
            if b is None:
                continue
            scope_key = key if lim.scope == "session" else user_of(key)
            out.append(Usage(lim, scope_key, self._used(conn, lim, key, b[0]), b[0], b[1]))
        return out

    # -- the API ---------------------------------------------------------------------
    async def charge(
        self, principal: Principal, action: str, amounts: dict[str, float]
    ) -> list[str]:
        """Check and record ``amounts``; returns warnings, raises ``BudgetExceeded``."""
        bad = sorted(set(amounts) - set(METRICS))
        if bad:
            raise UsageError(f"unknown budget metric(s): {', '.join(bad)}")
        if self._exempt(principal):
            return []
        key = principal.key
        asked = {m: float(v) for m, v in amounts.items() if v and float(v) > 0}
        if not asked:
            return []
        now = self.clock()

        def txn(conn: Conn) -> list[Usage]:
            self.store.lock(conn, principal.user)
            usages = self._usages(conn, key, set(asked), now)
            for u in usages:
                want = asked[u.limit.metric]
                if u.used + want > u.limit.hard + 1e-9:
                    raise self._exceeded(u, want, now, action)
            for metric, amount in asked.items():
                if metric in CONSUMED or metric == "leases":
                    continue
                row = UsageRow(now, principal.user, key, metric, amount, action)
                self.store.add_usage(conn, row)
            return usages

        try:
            usages = await self.store.db.write(txn)
        except BudgetExceeded as err:
            await self.runtime.emit(
                Event(EventType.BUDGET_EXCEEDED, key, action, "denied", data=dict(err.details))
            )
            raise
        warnings: list[str] = []
        for u in usages:
            after = u.used + asked[u.limit.metric]
            if u.limit.hard and after >= u.limit.soft * u.limit.hard:
                warnings.append(self._warning(u, after, now))
                mark = (u.scope_key, u.limit.window, u.limit.metric, u.start)
                if mark not in self._warned:
                    self._warned.add(mark)
                    await self.runtime.emit(
                        Event(
                            EventType.BUDGET_WARNING,
                            key,
                            action,
                            "warning",
                            data={**u.to_dict(now, self.cfg), "used": round(after, 4)},
                        )
                    )
        return warnings

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        """The gateway's per-request hook: charge what this op asks for."""
        amounts = self.amounts(action, params)
        if not amounts:
            return []
        return await self.charge(principal, action or op_name, amounts)

    def amounts(self, action: str | None, params: dict[str, Any]) -> dict[str, float]:
        """What an op with policy ``action`` would be charged ({}: nothing is counted)."""
        amounts = amounts_for(action, params, self.cfg.default_job_hours)
        if "queries" in amounts and not self.cfg.applicable("queries"):
            # cache reads cost the facility nothing: counted only when limited
            del amounts["queries"]
        return amounts

    async def status(self, principal: Principal) -> list[dict[str, Any]]:
        """Every budget that applies to ``principal`` now, with use and reset time."""
        now = self.clock()
        usages = await self.store.db.read(
            lambda c: self._usages(c, principal.key, set(METRICS), now)
        )
        return [u.to_dict(now, self.cfg) for u in usages]

    async def record_usage(
        self, principal_key: str, metric: str, amount: float, ref: str = "", action: str = ""
    ) -> None:
        """Record measured usage (also used by the bus subscriber)."""
        if amount <= 0 or self._exempt(principal_key):
            return
        await self.store.record(
            UsageRow(
                self.clock(), user_of(principal_key), principal_key, metric, amount, action, ref
            )
        )

    # -- messages --------------------------------------------------------------------
    def _scope_words(self, u: Usage) -> str:
        return f"session {u.scope_key}" if u.limit.scope == "session" else f"user {u.scope_key}"

    def _warning(self, u: Usage, after: float, now: float) -> str:
        lim = u.limit
        pct = 100.0 * after / lim.hard
        return (
            f"{pct:.0f} % of {WINDOW_WORDS[lim.window]} {METRIC_WORDS[lim.metric]} budget used"
            f" ({_num(after)} of {_num(lim.hard)}, {self._scope_words(u)});"
            f" resets {_resets(lim, u.reset, now, self.cfg)}; {ADVICE[lim.metric]}"
        )

    def _exceeded(self, u: Usage, want: float, now: float, action: str) -> BudgetExceeded:
        lim = u.limit
        reset = _resets(lim, u.reset, now, self.cfg)
        return BudgetExceeded(
            f"{WINDOW_WORDS[lim.window]} {METRIC_WORDS[lim.metric]} budget for"
            f" {self._scope_words(u)} is exhausted: {_num(u.used)} used + {_num(want)} asked"
            f" > limit {_num(lim.hard)}; resets {reset}",
            hint=ADVICE[lim.metric],
            scope=lim.scope,
            scope_key=u.scope_key,
            window=lim.window,
            metric=lim.metric,
            used=round(u.used, 4),
            asked=round(want, 4),
            limit=lim.hard,
            reset_at=None if math.isinf(u.reset) else u.reset,
            action=action,
        )

    # -- accounting from events ------------------------------------------------------
    async def _on_event(self, event: Event) -> None:
        if not event.principal or self._exempt(event.principal):
            return
        if event.type is EventType.COMMAND_FINISHED:
            await self._command_finished(event)
        elif event.type is EventType.JOB_SUBMITTED:
            await self._job_submitted(event)
        elif event.type is EventType.JOB_STATE:
            await self._job_state(event)
        elif event.type is EventType.LEASE_READY:
            await self.store.lease_held(
                event.subject, user_of(event.principal), event.principal, event.ts
            )
        elif event.type in (EventType.LEASE_RELEASED, EventType.LEASE_LOST):
            await self.store.lease_gone(event.subject)

    async def _command_finished(self, event: Event) -> None:
        data = event.data or {}
        cpu_s = float(data.get("cpu_s") or 0.0)
        await self.record_usage(
            event.principal, "core_hours", cpu_s / 3600.0, event.subject, "command"
        )
        gpus = (
            float(Resources.from_dict(data.get("resources")).gpus) if data.get("resources") else 0.0
        )
        if gpus and event.duration_s:
            await self.record_usage(
                event.principal,
                "gpu_hours",
                gpus * event.duration_s / 3600.0,
                event.subject,
                "command",
            )

    async def _job_submitted(self, event: Event) -> None:
        res = Resources.from_dict((event.data or {}).get("resources"))
        hours = (res.time_s / 3600.0) if res.time_s else self.cfg.default_job_hours
        await self.store.job_inflight(
            event.subject,
            user_of(event.principal),
            event.principal,
            max(res.cpus, 1),
            res.gpus,
            hours,
            event.ts,
        )

    async def _job_state(self, event: Event) -> None:
        try:
            state = JobState(event.outcome)
        except ValueError:
            return
        data = event.data or {}
        if state is JobState.RUNNING:
            await self.store.job_started(event.subject, event.ts)
            return
        if not state.terminal:
            return
        now = self.clock()

        def finish(conn: Conn) -> None:
            row = self.store.take_inflight(conn, event.subject)
            if row is None:
                return
            cpus, gpus = float(row["cpus"]), float(row["gpus"])
            if data.get("resources"):
                res = Resources.from_dict(data["resources"])
                cpus, gpus = float(max(res.cpus, 1)), float(res.gpus)
            elapsed = _elapsed(data, row["started_at"], event.ts)
            for metric, factor in (("core_hours", cpus), ("gpu_hours", gpus)):
                amount = factor * elapsed / 3600.0
                if amount > 0:
                    charge = UsageRow(
                        now, row["user"], row["principal"], metric, amount, "job", event.subject
                    )
                    self.store.add_usage(conn, charge)

        await self.store.db.write(finish)


def _elapsed(data: dict[str, Any], started_at: float | None, ended: float) -> float:
    if data.get("elapsed_s") is not None:
        return max(float(data["elapsed_s"]), 0.0)
    if data.get("started_at") and data.get("ended_at"):
        return max(float(data["ended_at"]) - float(data["started_at"]), 0.0)
    if started_at:
        return max(ended - float(started_at), 0.0)
    return 0.0


def _resets(lim: Limit, reset: float, now: float, cfg: BudgetConfig) -> str:
    if lim.window == "concurrent":
        return "when one of them is released"
    return describe_reset(reset, now, cfg)


def _num(x: float) -> str:
    return f"{x:.0f}" if float(x).is_integer() else f"{x:.2f}"


def create(runtime: Runtime) -> BudgetService:
    service = BudgetService(runtime)
    runtime.gates["budgets"] = service
    runtime.budgets = service
    return service
