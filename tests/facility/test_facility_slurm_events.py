"""Facility mode end to end: slurmctld's job events reach `tenantry facility serve`.

The service reads the job event log of scripts/dev-slurm (PrologSlurmctld and
EpilogSlurmctld run ``slurm_event.sh``) with a safety poll of 10 minutes, so a
user's job can only reach its executor through the events. Needs root, Slurm
started by scripts/dev-slurm; see conftest.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from .conftest import Facility, running_facility, wait_until
from .test_facility_failover import replica_health

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

LOG = "/var/spool/tenantry-slurm/events"


@pytest.fixture(scope="module")
def fac(slurm: None) -> Iterator[Facility]:
    if not os.path.exists(LOG):
        pytest.skip(f"no job event log at {LOG}: scripts/dev-slurm start (and restart slurmctld)")
    config = f'facility_slurm_events = "{LOG}"\nfacility_safety_poll_s = 600\n'
    with running_facility(config) as f:
        yield f


def _events(fac: Facility) -> dict[str, Any]:
    return dict(replica_health(fac.socket)["slurm_events"] or {})


def test_a_jobs_start_and_end_reach_the_service_through_the_event_log(fac: Facility) -> None:
    wait_until(lambda: _events(fac).get("healthy"), 30, "a trusted, healthy job event log")
    before = _events(fac)
    alice = fac.users["tt-alice"]
    job = alice.ok("submit", "-t", "2", alice.script("e.sh", "sleep 2; echo evented"))
    done = alice.ok("wait", job["job"]["id"], "--timeout", "150")
    assert done["job"]["state"] == "COMPLETED", done
    after = _events(fac)
    # the start, and the end (resolved in accounting, or by the one poll it asked for)
    assert after["events"] >= before["events"] + 2, (before, after)
    assert after["applied"] >= before["applied"] + 1, (before, after)
    assert after["missed"] == 0 and after["healthy"], after
