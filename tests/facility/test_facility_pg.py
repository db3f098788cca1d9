"""The facility service on PostgreSQL (``store_url``): the core flow of test_facility_e2e.

The same service, users and daemons as test_facility_e2e, with the service's
store in a PostgreSQL schema of the session's throwaway database (the
``pg_database`` fixture). The tests are the e2e module's own, run again here
against this ``facility``: jobs submit/status/wait/cancel, lessons shared
after staff approval, the kill switch and budgets. Needs root, Slurm and
PostgreSQL (skipped without; failed with TENANTRY_REQUIRE_POSTGRES=1).
"""

from __future__ import annotations

import secrets
import urllib.parse
from collections.abc import Iterator

import pytest

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
    import psycopg
    from psycopg import sql

    schema = f"fac_{secrets.token_hex(6)}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    parts = urllib.parse.urlsplit(pg_database)
    query = urllib.parse.urlencode({"options": f"-csearch_path={schema}"})
    url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, query, ""))
    try:
        with running_facility(f'store_url = "{url}"\n') as fac:
            yield fac
    finally:
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
