"""An in-memory backend for fast unit tests: jobs move only when the test says so."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tenantry.backends.base import JobUpdate, Submitted
from tenantry.core.errors import BackendUnavailable, NotFound
from tenantry.core.models import JobSpec, JobState, Principal


class FakeBackend:
    name = "fake"

    def __init__(self) -> None:
        self.jobs: dict[str, JobUpdate] = {}
        self.specs: dict[str, JobSpec] = {}
        self.intents: dict[str, str] = {}
        self.down = False
        self.calls: dict[str, int] = {"submit": 0, "query": 0, "cancel": 0}
        self._next = 100

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    def _check(self, verb: str) -> None:
        self.calls[verb] += 1
        if self.down:
            raise BackendUnavailable("the fake scheduler is down", hint="retry later")

    async def submit(
        self, spec: JobSpec, principal: Principal, job_id: str, *, intent: str = ""
    ) -> Submitted:
        self._check("submit")
        bid = str(self._next)
        self._next += 1
        self.jobs[bid] = JobUpdate(bid, JobState.PENDING)
        self.specs[bid] = spec
        if intent:
            self.intents[intent] = bid
        return Submitted(bid, f"fake-{bid}.out", "")

    async def find(
        self, spec: JobSpec, principal: Principal, job_id: str, intent: str
    ) -> Submitted | None:
        self._check("query")
        bid = self.intents.get(intent)
        return Submitted(bid, f"fake-{bid}.out", "") if bid else None

    async def query(self, backend_ids: Sequence[str]) -> dict[str, JobUpdate]:
        self._check("query")
        return {i: self.jobs[i] for i in backend_ids if i in self.jobs}

    async def cancel(self, backend_id: str) -> None:
        self._check("cancel")
        if backend_id not in self.jobs:
            raise NotFound(f"job {backend_id} does not exist")
        self.set_state(backend_id, JobState.CANCELLED)

    async def info(self) -> dict[str, Any]:
        return {"backend": self.name, "partitions": []}

    def set_state(self, backend_id: str, state: JobState, exit_code: int | None = None) -> None:
        now = time.time()
        old = self.jobs[backend_id]
        self.jobs[backend_id] = JobUpdate(
            backend_id,
            state,
            exit_code=exit_code,
            started_at=old.started_at or (now if state is not JobState.PENDING else None),
            ended_at=now if state.terminal else None,
        )
