"""Job views whose state comes from the cluster's one poller.

The facility service knows each job's owner, Tenantry id and Slurm id from
the events executors send (a job-view source keyed ``user:job_id``); the
poller knows every job's current state in Slurm. :class:`PolledJobView`
joins them: it answers with the source's view, its state, reason, exit code
and staleness replaced by the poller's, whenever the poller knows the job's
``backend_id`` *as a job of the same user* (never another user's job, whatever
id an event carried). It has the shape of the service's ``JobStatusSource``
(``status_of``, ``jobs_of``, ``wait_change`` on the view's state), so it can
stand in for the event-built view; jobs the poller does not know (arrays,
other backends) keep the source's answer.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from tenantry.core import errors
from tenantry.core.models import JobState
from tenantry.facility.poller import StatusView, Viewer

__all__ = ["JobViewSource", "PolledJobView", "StatusReader"]


class JobViewSource(Protocol):
    """Views (dicts with ``user``, ``state`` and maybe ``backend_id``) by Tenantry id."""

    async def status_of(self, job_id: str, viewer: Any, owner: str = "") -> dict[str, Any]: ...

    async def jobs_of(self, viewer: Any, *, active: bool = False) -> list[dict[str, Any]]: ...

    async def wait_change(
        self, job_id: str, viewer: Any, state: str, timeout_s: float, owner: str = ""
    ) -> dict[str, Any]: ...


class StatusReader(Protocol):
    """The poller's reads (``StatusCache`` or ``ReplicatedStatus``)."""

    def status_of(self, job_id: str, viewer: Viewer) -> StatusView: ...

    async def wait_change(
        self, job_id: str, viewer: Viewer, since: int, *, timeout_s: float | None = None
    ) -> StatusView: ...


class PolledJobView:
    """A ``JobStatusSource``: ownership from ``views``, state from ``status``."""

    def __init__(self, views: JobViewSource, status: StatusReader) -> None:
        self.views = views
        self.status = status

    def _polled(self, view: dict[str, Any], viewer: Viewer) -> StatusView | None:
        bid = str(view.get("backend_id") or "")
        if not bid:
            return None
        try:
            polled = self.status.status_of(bid, viewer)
        except (errors.NotFound, errors.Unavailable):
            return None
        return polled if polled.status.user == view.get("user") else None

    @staticmethod
    def _merge(view: dict[str, Any], polled: StatusView | None) -> dict[str, Any]:
        if polled is None:
            return view
        st = polled.status
        out = dict(view)
        out.update(
            state=st.state.value,
            reason=st.reason,
            staleness_s=round(polled.staleness_s, 3),
            seq=st.seq,
            observed_at=st.observed_at,
            served_from="poller",
        )
        if st.state.terminal and st.exit_code is not None:
            out["exit_code"] = st.exit_code
        return out

    async def status_of(self, job_id: str, viewer: Viewer, owner: str = "") -> dict[str, Any]:
        view = await self.views.status_of(job_id, viewer, owner)
        return self._merge(view, self._polled(view, viewer))

    async def jobs_of(self, viewer: Viewer, *, active: bool = False) -> list[dict[str, Any]]:
        rows = [self._merge(v, self._polled(v, viewer)) for v in await self.views.jobs_of(viewer)]
        if active:
            rows = [r for r in rows if not _terminal(str(r.get("state")))]
        return rows

    async def wait_change(
        self, job_id: str, viewer: Viewer, state: str, timeout_s: float, owner: str = ""
    ) -> dict[str, Any]:
        """The view once its (polled) state differs from ``state``, or at the timeout."""
        deadline = time.monotonic() + timeout_s
        view = await self.views.status_of(job_id, viewer, owner)
        polled = self._polled(view, viewer)
        if polled is None:  # the poller does not know it: the source's own wait
            return await self.views.wait_change(job_id, viewer, state, timeout_s, owner)
        while polled.status.state.value == state:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            polled = await self.status.wait_change(
                polled.status.job_id, viewer, polled.status.seq, timeout_s=left
            )
        return self._merge(view, polled)


def _terminal(state: str) -> bool:
    try:
        return JobState(state).terminal
    except ValueError:
        return False
