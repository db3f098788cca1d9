"""``PolledScheduler``: the service's ``SchedulerStatus`` from the cluster's one poller.

Executors ask ``facility.scheduler_status`` for their jobs' states by Slurm id
(``status.FacilityStatusBackend``); this answers from the poller's cache
(``poller.StatusCache`` or a replica's ``ReplicatedStatus``) with the viewer's
visibility: a user gets only their own jobs (staff: any), and an id the cache
does not know is left out, so the executor asks its own backend for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from tenantry.backends.base import JobUpdate
from tenantry.core import errors
from tenantry.facility.polled_view import StatusReader
from tenantry.facility.seams import Viewer


class PolledScheduler:
    """``max_stale_s``: an answer older than that is left out too (the poller was
    idle, or cannot reach Slurm), so the executor asks its own backend; the read
    wakes an idle poller for the next query."""

    def __init__(self, status: StatusReader, max_stale_s: float = 10.0) -> None:
        self.status = status
        self.max_stale_s = max_stale_s

    async def query(self, backend_ids: Sequence[str], viewer: Viewer) -> dict[str, JobUpdate]:
        out: dict[str, JobUpdate] = {}
        for bid in backend_ids:
            try:
                view = self.status.status_of(bid, viewer)
            except (errors.NotFound, errors.Unavailable):
                continue
            if view.staleness_s > self.max_stale_s:
                continue
            st = view.status
            if not viewer.is_staff and st.user != viewer.user:
                continue  # the cache's own visibility already says so; never another's
            code = st.exit_code if st.state.terminal else None
            age = self.status.status_of(bid, viewer).staleness_s  # of the poll it reflects
            extra = {"staleness_s": round(age, 3)}
            out[bid] = JobUpdate(bid, st.state, exit_code=code, reason=st.reason, extra=extra)
        return out
