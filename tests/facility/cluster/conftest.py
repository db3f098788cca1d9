"""Fixtures for facility-mode tests: real Unix users, a Slurm account, PostgreSQL.

Users are ``tt-i16c-*`` (created idempotently, left in place for concurrent
tests); the Slurm account ``tt_i16c`` and its associations are removed at the
end of the session. PostgreSQL: a database and role of the test's own, dropped
afterwards.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from tests.facility.cluster.helpers import (
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


POSTGRES_URL_ENV = "TENANTRY_TEST_POSTGRES_URL"  # an admin URL that may create databases


def _create_with(admin: str, name: str, password: str) -> str:
    """A database ``name`` made through the admin URL; its DSN. The database gets a
    role of its own when the admin may create roles, else the admin owns it."""
    with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
        try:
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)))  # fmt: skip
        except psycopg.errors.InsufficientPrivilege:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return make_conninfo(admin, dbname=name)
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
            sql.Identifier(name), sql.Identifier(name)))  # fmt: skip
    return make_conninfo(admin, dbname=name, user=name, password=password)


def _drop_with(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A fresh database and role of this test's own on 127.0.0.1:5432 (dropped afterwards).

    Made with ``TENANTRY_TEST_POSTGRES_URL`` (an admin URL) when set, else as the
    ``postgres`` superuser through runuser (root).
    """
    admin = os.environ.get(POSTGRES_URL_ENV, "")
    require("PostgreSQL", bool(admin) or pg_up(),
            f"start PostgreSQL 15 on 127.0.0.1:5432 or set {POSTGRES_URL_ENV}",
            "TENANTRY_REQUIRE_POSTGRES")  # fmt: skip
    name = f"tt_i16c_{uuid.uuid4().hex[:10]}"
    password = uuid.uuid4().hex
    if admin:
        dsn = _create_with(admin, name, password)
    else:
        for stmt in (f"CREATE ROLE {name} LOGIN PASSWORD '{password}'",
                     f"CREATE DATABASE {name} OWNER {name}"):  # fmt: skip
            r = psql(stmt)
            assert r.returncode == 0, r.stderr
        dsn = f"host=127.0.0.1 port=5432 dbname={name} user={name} password={password}"
    try:
        yield dsn
    finally:
        if admin:
            _drop_with(admin, name)
        else:
            psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            psql(f"DROP ROLE IF EXISTS {name}")
