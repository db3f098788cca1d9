"""Facility mode: one Tenantry service for every user of a cluster.

``service`` (the facility service's component), ``executor`` (a user daemon
as the user's executor), ``seams`` (the Protocols other parts plug into),
``identity`` (who calls: uid from the socket, staff by Unix group),
``jobview`` (every user's job status, per-user visibility), ``routing``
(which ops belong to the service), ``link`` (the executor's connection),
``install`` (account, directories, unit, config). See docs/facility.md.
"""

__all__: list[str] = []
