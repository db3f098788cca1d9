"""The facility service on PostgreSQL (``store_url``): the core flow of test_facility_e2e.

The same service, users and daemons as test_facility_e2e, with the service's
store in a PostgreSQL schema of the session's throwaway database (the
``pg_database`` fixture). The tests are the e2e module's own, run again here
against this ``facility``: jobs submit/status/wait/cancel, lessons shared
after staff approval, the kill switch and budgets. Needs root, Slurm and
PostgreSQL (skipped without; failed with TENANTRY_REQUIRE_POSTGRES=1).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..conftest import pg_schema
from .conftest import Facility, running_facility
from .test_facility_e2e import (
    test_jobs_submit_status_wait_cancel_through_the_users_daemons,
    test_kill_switch_and_budgets_set_at_the_facility_apply_to_every_user,
    test_lessons_staff_reach_everyone_agents_only_after_approval,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

__all__ = [
    "test_jobs_submit_status_wait_cancel_through_the_users_daemons",
    "test_kill_switch_and_budgets_set_at_the_facility_apply_to_every_user",
    "test_lessons_staff_reach_everyone_agents_only_after_approval",
]


@pytest.fixture(scope="module")
def facility(slurm: None, pg_database: str) -> Iterator[Facility]:
    with pg_schema(pg_database, "fac") as url, running_facility(f'store_url = "{url}"\n') as fac:
        yield fac
