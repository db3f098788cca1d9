"""The closed event vocabulary and a tiny in-process bus.

Every action of every principal becomes one of these events. Subscribers
(store journal, telemetry, dashboard, caches) register on the bus; a
subscriber that raises is logged and never breaks the publisher.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)


class EventType(enum.StrEnum):
    SESSION_SEEN = "session.seen"
    REQUEST_DENIED = "request.denied"
    COMMAND_STARTED = "command.started"
    COMMAND_FINISHED = "command.finished"
    JOB_SUBMITTED = "job.submitted"
    JOB_REJECTED = "job.rejected"
    JOB_DEDUPLICATED = "job.deduplicated"
    JOB_STATE = "job.state"
    JOB_CANCELLED = "job.cancelled"
    JOB_RECOVERED = "job.recovered"
    STATUS_QUERY = "status.query"
    BACKEND_POLL = "backend.poll"
    LEASE_REQUESTED = "lease.requested"
    LEASE_READY = "lease.ready"
    LEASE_RELEASED = "lease.released"
    LEASE_LOST = "lease.lost"
    POLICY_DECISION = "policy.decision"
    BUDGET_WARNING = "budget.warning"
    MEMORY_RECALL = "memory.recall"
    MEMORY_REMEMBER = "memory.remember"
    INDEX_QUERY = "index.query"
    HOOK_DECISION = "hook.decision"
    DAEMON_STARTED = "daemon.started"
    DAEMON_STOPPED = "daemon.stopped"
    BUDGET_EXCEEDED = "budget.exceeded"
    SESSION_STOPPED = "session.stopped"
    SESSION_RESUMED = "session.resumed"
    GUARD_FINDING = "guard.finding"
    SESSION_REGISTERED = "session.registered"
    SESSION_ENDED = "session.ended"
    SESSION_CLAIM_IGNORED = "session.claim_ignored"


@dataclass(frozen=True, slots=True)
class Event:
    type: EventType
    principal: str = ""  # Principal.key, empty for the daemon itself
    subject: str = ""  # job id, command id, lease id, ...
    outcome: str = ""  # ok | error | denied | ...
    duration_s: float | None = None
    data: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "principal": self.principal,
            "subject": self.subject,
            "outcome": self.outcome,
            "duration_s": self.duration_s,
            "data": self.data,
            "ts": self.ts,
        }


Handler = Callable[[Event], Awaitable[None]]


class Bus:
    """Publish events to async subscribers, in subscription order."""

    def __init__(self) -> None:
        self._handlers: list[Handler] = []

    def subscribe(self, handler: Handler) -> Callable[[], None]:
        self._handlers.append(handler)
        return lambda: self._handlers.remove(handler)

    async def publish(self, event: Event) -> None:
        for handler in list(self._handlers):
            try:
                await handler(event)
            except Exception:  # a broken subscriber never breaks the publisher
                log.exception("event subscriber failed on %s", event.type)


class Subscription:
    """A component's hold on the bus, from its ``start`` to its ``aclose``.

    ``open`` subscribes ``handler`` (dropping an earlier hold); ``close`` unsubscribes and
    may be called any number of times."""

    __slots__ = ("_cancel",)

    def __init__(self) -> None:
        self._cancel: Callable[[], None] | None = None

    def open(self, bus: Bus, handler: Handler) -> None:
        self.close()
        self._cancel = bus.subscribe(handler)

    def close(self) -> None:
        if self._cancel is not None:
            self._cancel()
            self._cancel = None
