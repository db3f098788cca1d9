"""Which ops belong to the facility service. Pure data, shared by both sides.

- ``FORWARDED``: ops whose state the facility owns (memory, kill switch,
  approvals, budgets, the facility's views). A user daemon in facility mode
  sends them to the service as they are, for the calling principal.
- ``SERVED``: every op the service answers. Everything else (submitting jobs,
  running commands, the workspace index, leases, sandboxes) runs as the user,
  in the user's daemon, and the service refuses it.
"""

from __future__ import annotations

FORWARDED_PREFIXES: tuple[str, ...] = ("memory.", "admin.", "approvals.")
FORWARDED_OPS: frozenset[str] = frozenset(
    {
        "budgets.show",
        "policy.check",
        "facility.whoami",
        "facility.jobs",
        "facility.job",
        "facility.events",
        "report.live",
        "facility.dashboard_login",
    }
)
# what only executors send: the decision for one of their own ops, their events
SERVICE_OPS: frozenset[str] = frozenset(
    {
        "facility.decide",
        "facility.ingest",
        "facility.flag",
        "facility.lessons",
        "facility.scheduler_status",
        "facility.job_changes",
        "facility.stops",
        "facility.info",
        "facility.replica",
        "events.list",
        "sessions.list",
    }
)


# ops whose facility decision an executor may keep and reuse (``facility.answers``):
# reads of the caller's own jobs from the status cache, what an agent's hook answers
# ``squeue --me``/``sacct -X`` with; never an op that runs, submits or changes anything
KEPT_DECISIONS: frozenset[str] = frozenset({"jobs.list"})


def forwarded(op_name: str) -> bool:
    return op_name in FORWARDED_OPS or op_name.startswith(FORWARDED_PREFIXES)


def served(op_name: str) -> bool:
    return op_name in SERVICE_OPS or forwarded(op_name)
