"""Prometheus metrics for one daemon, fed from the event bus.

``create(runtime)`` makes the ``metrics`` component: a private
``CollectorRegistry`` (one per daemon, so tests and several daemons in one
process never share counters) and a bus subscriber that turns events into
counters, gauges and histograms; ``gateway.opserve`` times every
``/v1/op/<name>`` request into it. ``metrics_route`` serves the text format; queue
depth is read from the store at scrape time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from tenantry.core.events import Event, EventType, Subscription
from tenantry.store import telemetry

if TYPE_CHECKING:
    from tenantry.service.runtime import Runtime

# labelled children kept by Metrics.child (the label values come from a closed set)
MAX_CHILDREN = 4096
_LATENCY = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)


class Metrics:
    """The ``metrics`` component."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry

        def counter(name: str, doc: str, *labels: str) -> Counter:
            return Counter(name, doc, labels, registry=r)

        def gauge(name: str, doc: str, *labels: str) -> Gauge:
            return Gauge(name, doc, labels, registry=r)

        def seconds(name: str, doc: str, *labels: str) -> Histogram:
            return Histogram(name, doc, labels, buckets=_LATENCY, registry=r)

        self.requests = counter(
            "tenantry_requests", "Op requests by op and outcome.", "op", "outcome"
        )
        self.request_seconds = seconds(
            "tenantry_request_duration_seconds", "Op request latency.", "op"
        )
        self.events = counter("tenantry_events", "Events seen on the bus.", "type")
        self.decisions = counter(
            "tenantry_policy_decisions", "Policy and hook decisions.", "source", "decision"
        )
        self.status_queries = counter(
            "tenantry_status_queries",
            "Job status queries by where they were answered.",
            "served_from",
        )
        self.backend_calls = counter(
            "tenantry_backend_calls", "Calls to the scheduler backend (status polls).", "outcome"
        )
        self.backend_seconds = seconds(
            "tenantry_backend_poll_duration_seconds", "Scheduler poll latency."
        )
        self.commands = counter(
            "tenantry_commands",
            "Commands finished, by outcome and where they ran.",
            "outcome",
            "where",
        )
        self.command_seconds = seconds(
            "tenantry_command_duration_seconds", "Command wall time.", "where"
        )
        self.jobs = counter(
            "tenantry_jobs",
            "Job lifecycle events (submitted, rejected, deduplicated, ...).",
            "event",
        )
        self.leases = gauge("tenantry_leases", "Leases by state.", "state")
        self.lease_events = counter("tenantry_lease_events", "Lease lifecycle events.", "event")
        self.queue_depth = gauge(
            "tenantry_queue_depth", "Jobs not yet finished, by state.", "state"
        )
        self.sessions = counter(
            "tenantry_sessions", "Agent sessions seen, by agent and event.", "agent", "event"
        )
        self.memory = counter("tenantry_memory_recalls", "Memory recalls by outcome.", "outcome")
        self.index = counter("tenantry_index_queries", "Index queries by outcome.", "outcome")
        self.lease_counts = {"requested": 0, "ready": 0}
        for state in self.lease_counts:
            self.leases.labels(state).set(0)
        self._subscription = Subscription()
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    async def start(self) -> None:
        self._subscription.open(self.runtime.bus, self.on_event)

    async def aclose(self) -> None:
        self._subscription.close()

    # -- feeding -------------------------------------------------------------------------
    def child(self, metric: Counter | Histogram, *values: str) -> Any:
        """``metric.labels(*values)``, looked up once (every request and command asks)."""
        key = (id(metric), values)
        found = self._children.get(key)
        if found is None:
            if len(self._children) >= MAX_CHILDREN:
                self._children.clear()
            found = self._children[key] = metric.labels(*values)
        return found

    def observe_request(self, op: str, outcome: str, seconds: float) -> None:
        self.child(self.requests, op, outcome).inc()
        self.child(self.request_seconds, op).observe(seconds)

    async def on_event(self, e: Event) -> None:
        self.child(self.events, e.type.value).inc()
        handler = _HANDLERS.get(e.type)
        if handler is not None:
            handler(self, e)
        elif e.type.value == "budget.exceeded":  # added by the budgets component
            self.decisions.labels("budget", "deny").inc()

    async def refresh(self) -> None:
        """Update gauges that come from the store (called at scrape time)."""
        journal = self.runtime.journal
        if journal is None:  # a runtime without a store (unit tests)
            return
        counts = await telemetry.active_job_counts(journal.db)
        self.queue_depth.clear()
        for state in ("PENDING", "RUNNING"):
            self.queue_depth.labels(state).set(0)
        for state, n in counts.items():
            self.queue_depth.labels(state).set(n)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _lease(m: Metrics, e: Event) -> None:
    m.lease_events.labels(e.type.value.split(".", 1)[1]).inc()
    if e.type is EventType.LEASE_REQUESTED:
        m.lease_counts["requested"] += 1
    elif e.type is EventType.LEASE_READY:
        m.lease_counts["ready"] += 1
        m.lease_counts["requested"] = max(0, m.lease_counts["requested"] - 1)
    else:
        m.lease_counts["ready"] = max(0, m.lease_counts["ready"] - 1)
    for state, n in m.lease_counts.items():
        m.leases.labels(state).set(n)


def _poll(m: Metrics, e: Event) -> None:
    m.backend_calls.labels(e.outcome or "ok").inc(int(_data(e, "calls", 1)) or 1)
    m.backend_seconds.observe(e.duration_s or 0.0)


def _command(m: Metrics, e: Event) -> None:
    where = str(_data(e, "where", "local"))
    m.child(m.commands, e.outcome or "?", where).inc()
    m.child(m.command_seconds, where).observe(e.duration_s or 0.0)


def _recall(e: Event) -> str:
    """hit or miss: the memory's recall events carry the number of lessons as outcome."""
    if e.outcome.isdigit():
        return "hit" if int(e.outcome) > 0 else "miss"
    return e.outcome or "ok"


def _data(e: Event, key: str, default: Any = "") -> Any:
    value = e.data.get(key, default) if isinstance(e.data, dict) else default
    return default if value is None else value


_HANDLERS: dict[EventType, Callable[[Metrics, Event], None]] = {
    EventType.POLICY_DECISION: lambda m, e: m.decisions.labels("policy", e.outcome or "?").inc(),
    EventType.HOOK_DECISION: lambda m, e: m.decisions.labels("hook", e.outcome or "?").inc(),
    EventType.REQUEST_DENIED: lambda m, e: m.decisions.labels("gateway", "deny").inc(),
    EventType.STATUS_QUERY: lambda m, e: m.status_queries.labels(
        str(_data(e, "served_from", "cache"))
    ).inc(),
    EventType.BACKEND_POLL: _poll,
    EventType.COMMAND_FINISHED: _command,
    EventType.JOB_SUBMITTED: lambda m, e: m.jobs.labels("submitted").inc(),
    EventType.JOB_REJECTED: lambda m, e: m.jobs.labels("rejected").inc(),
    EventType.JOB_DEDUPLICATED: lambda m, e: m.jobs.labels("deduplicated").inc(),
    EventType.JOB_CANCELLED: lambda m, e: m.jobs.labels("cancelled").inc(),
    EventType.JOB_STATE: lambda m, e: m.jobs.labels(f"state_{(e.outcome or '?').lower()}").inc(),
    EventType.LEASE_REQUESTED: _lease,
    EventType.LEASE_READY: _lease,
    EventType.LEASE_RELEASED: _lease,
    EventType.LEASE_LOST: _lease,
    EventType.SESSION_SEEN: lambda m, e: m.sessions.labels(
        str(_data(e, "agent", "?")), e.outcome or "seen"
    ).inc(),
    EventType.MEMORY_RECALL: lambda m, e: m.memory.labels(_recall(e)).inc(),
    EventType.INDEX_QUERY: lambda m, e: m.index.labels(e.outcome or "ok").inc(),
}


def create(runtime: Runtime) -> Metrics:
    from prometheus_client import disable_created_metrics

    disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series: they double the output for no use here
    return Metrics(runtime)


def metrics_endpoint(metrics: Callable[[], Metrics | None]) -> Callable[..., Any]:
    from starlette.responses import PlainTextResponse, Response

    async def endpoint(request: Any) -> Response:
        m = metrics()
        if m is None:
            return PlainTextResponse("metrics are not running in this daemon\n", status_code=503)
        await m.refresh()
        return Response(m.render(), media_type=CONTENT_TYPE_LATEST)

    return endpoint
