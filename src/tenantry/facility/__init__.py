"""Facility mode: one Tenantry service for every user of a cluster.

``service`` (the facility service's component), ``executor`` (a user daemon
as the user's executor), ``seams`` (the Protocols other parts plug into),
``identity`` (who calls: uid from the socket, staff by Unix group),
``jobview`` (every user's job status, per-user visibility), ``routing``
(which ops belong to the service), ``link`` (the executor's connection),
``status`` (job states from the service), ``install`` (account, directories,
unit, config); the cluster parts: ``poller``, ``polled_view``, ``leader``,
``replica``, ``munge_auth``, ``slurm_facts``. See docs/facility.md and
docs/facility-cluster.md.
"""

__all__: list[str] = []
