"""Fixtures for facility-mode tests: real Unix users, a Slurm account, PostgreSQL.

Users are ``tt-i16c-*`` (created idempotently, left in place for concurrent
tests); the Slurm account ``tt_i16c`` and its associations are removed at the
end of the session. PostgreSQL: a database of the test's own on 127.0.0.1:5432,
dropped afterwards (``TENANTRY_TEST_PG_DSN`` points at another server instead).
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import pytest
from tests.facility.helpers import (
    SLURM_ACCOUNT,
    USERS,
    User,
    ensure_user,
    need_root_users,
    pg_up,
    psql,
    require,
    sacctmgr,
)


@pytest.fixture(scope="session")
def unix_users() -> list[User]:
    need_root_users()
    return [ensure_user(n) for n in USERS]


@pytest.fixture(scope="session")
def slurm_users(slurm: None, unix_users: list[User]) -> Iterator[list[User]]:
    """The Unix users with an association to ``tt_i16c`` in Slurm's accounting."""
    sacctmgr("add", "account", SLURM_ACCOUNT, "description=tenantry-tests", "organization=tt")
    for u in unix_users:
        sacctmgr("add", "user", u.name, f"account={SLURM_ACCOUNT}")
    yield unix_users
    subprocess.run(["scancel", f"--account={SLURM_ACCOUNT}"], capture_output=True, check=False)
    for u in unix_users:
        sacctmgr("delete", "user", f"name={u.name}", f"account={SLURM_ACCOUNT}")
    sacctmgr("delete", "account", SLURM_ACCOUNT)


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A fresh database of this test's own (dropped afterwards)."""
    require("PostgreSQL", pg_up(), "start PostgreSQL 15 on 127.0.0.1:5432 (.ci/run does)",
            "TENANTRY_REQUIRE_POSTGRES")  # fmt: skip
    base = os.environ.get("TENANTRY_TEST_PG_DSN")
    if base:
        yield base
        return
    name = f"tt_i16c_{uuid.uuid4().hex[:10]}"
    password = uuid.uuid4().hex
    r = psql(f"CREATE ROLE {name} LOGIN PASSWORD '{password}'")
    assert r.returncode == 0, r.stderr
    r = psql(f"CREATE DATABASE {name} OWNER {name}")
    assert r.returncode == 0, r.stderr
    try:
        yield f"host=127.0.0.1 port=5432 dbname={name} user={name} password={password}"
    finally:
        psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        psql(f"DROP ROLE IF EXISTS {name}")
