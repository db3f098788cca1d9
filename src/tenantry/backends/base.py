"""The Backend protocol: the few verbs every job backend implements.

A backend runs *batch jobs*; short commands go through ``tenantry.commands.runner``
(locally) or through leases. Implementations: ``local`` (embedded default),
``slurm``, and ``fake`` for unit tests. Constructors never do I/O; ``start``
does. Every verb translates foreign errors into ``tenantry.core.errors``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tenantry.core.models import JobSpec, JobState, Principal


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """What a backend knows of one job right now."""

    backend_id: str
    state: JobState
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Submitted:
    backend_id: str
    output: str  # resolved stdout path
    error: str  # resolved stderr path ("" = merged into output)


@runtime_checkable
class Backend(Protocol):
    name: str

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def submit(self, spec: JobSpec, principal: Principal, job_id: str) -> Submitted:
        """Hand the job to the scheduler; returns its backend id and output paths."""
        ...

    async def query(self, backend_ids: Sequence[str]) -> dict[str, JobUpdate]:
        """Current state of these jobs; ids the backend no longer knows are omitted."""
        ...

    async def cancel(self, backend_id: str) -> None: ...

    async def info(self) -> dict[str, Any]:
        """Facility facts for agents: partitions, limits, slots."""
        ...


@runtime_checkable
class Recoverable(Protocol):
    """A backend that can tell whether a job handed over before a crash exists.

    ``submit`` carries ``intent`` (a token unique to one journaled job) where
    the backend keeps it (Slurm: the comment tag; local: the job directory);
    ``find`` looks it up, so recovery never submits a job twice.
    """

    async def submit(
        self, spec: JobSpec, principal: Principal, job_id: str, *, intent: str = ""
    ) -> Submitted: ...

    async def find(
        self, spec: JobSpec, principal: Principal, job_id: str, intent: str
    ) -> Submitted | None:
        """The job submitted for ``job_id``/``intent``, or None when there is none."""
        ...
