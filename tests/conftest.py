"""Shared fixtures. Concept-specific fixtures live in tests/<concept>/conftest.py."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tenantry.core.models import Job, JobState, Principal

from .slurm_probe import slurm_up


def need_fuse(also: str = "") -> None:
    """Skip (fail, with TENANTRY_REQUIRE_FUSE=1) where a test cannot mount FUSE as root.

    ``also``: a reason of the caller's own to skip, checked the same way.
    """
    why = ""
    if os.geteuid() != 0:
        why = "mounting FUSE needs root"
    elif not os.path.exists("/dev/fuse") or shutil.which("fusermount3") is None:
        why = "needs FUSE (fuse3)"
    elif importlib.util.find_spec("pyfuse3") is None:
        why = "needs pyfuse3 (pip install -e '.[bench]')"
    why = why or also
    if why and os.environ.get("TENANTRY_REQUIRE_FUSE") == "1":
        pytest.fail(f"{why} (TENANTRY_REQUIRE_FUSE=1)")
    if why:
        pytest.skip(why)


STOP_WAIT_S = 30.0  # as long as `tenantry stop` waits by default


def stop_daemon(proc: subprocess.Popen[bytes], log: Path) -> None:
    """SIGTERM a test's daemon and wait as ``tenantry stop`` would. One still running
    after that writes every thread's stack to ``log`` (its SIGUSR1), is killed, and
    fails the test with those stacks: a slow stop says where it hung."""
    import signal

    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=STOP_WAIT_S)
        return
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1.0)
        proc.kill()
        proc.wait(timeout=15)
    text = log.read_text(errors="replace") if log.exists() else "(no log)"
    # what it logged of its stop (a close under way is named) first, then the stacks
    said = [ln for ln in text.splitlines() if " WARNING " in ln or " ERROR " in ln][-30:]
    raise AssertionError(
        f"the daemon did not stop in {STOP_WAIT_S:g} s after SIGTERM; it logged:\n"
        + "\n".join(said)
        + f"\n--- the end of its log, with every thread's stack:\n{text[-12000:]}"
    )


def new_job(who: Principal, **fields: Any) -> Job:
    """A job record as the journal first holds it (pending, nothing handed yet)."""
    now = time.time()
    base: dict[str, Any] = {
        "id": "",
        "backend": "local",
        "backend_id": "",
        "state": JobState.PENDING,
        "principal": who.key,
        "uid": who.uid,
        "name": "job",
        "submitted_at": now,
        "updated_at": now,
    }
    return Job(**{**base, **fields})


def run_tenantry(
    *args: str,
    env: dict[str, str],
    cwd: Path | None = None,
    input: str | None = None,
    timeout: float = 60,
    module: str = "tenantry",
) -> subprocess.CompletedProcess[str]:
    """``python -m tenantry ARGS`` (or another module) to its end, text output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def stand_in(bindir: Path, name: str, body: str) -> Path:
    """An executable ``#!/bin/sh`` program ``name`` in ``bindir`` (made if missing) that
    runs ``body``: a stand-in for a real tool, found first on a test's PATH."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body + ("" if body.endswith("\n") else "\n"))
    path.chmod(0o755)
    return path


@pytest.fixture(scope="session")
def slurm() -> Iterator[None]:
    """Require a real Slurm (started by scripts/dev-slurm).

    Skipped when none is up, except with TENANTRY_REQUIRE_SLURM=1 (as in CI),
    where a missing Slurm fails the test instead.
    """
    if not slurm_up():
        if os.environ.get("TENANTRY_REQUIRE_SLURM") == "1":
            pytest.fail("Slurm is required (TENANTRY_REQUIRE_SLURM=1) but no controller answers")
        pytest.skip("no Slurm is up; start one with scripts/dev-slurm start")
    yield


@pytest.fixture
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # short path: Unix socket paths are limited to 107 bytes
    d = gw.state_tempdir()
    yield d
    gw.remove_state(d)


# -- a real daemon per test (helpers live in tests/gateway/conftest.py) ---------


def _gateway_helpers() -> ModuleType:
    name = "_tenantry_gateway_test_helpers"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).parent / "gateway" / "conftest.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gw = _gateway_helpers()
wait_for = gw.wait_for


@pytest.fixture
def start_daemon() -> Iterator[Callable[..., Any]]:
    with gw.daemons(
        TENANTRY_LOCAL_SLOTS="2", TENANTRY_POLL_FAST_S="0.1", TENANTRY_POLL_SLOW_S="0.5"
    ) as start:
        yield start


# -- PostgreSQL (facility mode's store) ------------------------------------------

POSTGRES_URL_ENV = "TENANTRY_TEST_POSTGRES_URL"
POSTGRES_DEFAULT_URL = "postgresql://tenantry_test:tenantry_test@127.0.0.1:5432/postgres"


def _no_postgres(reason: str) -> None:
    if os.environ.get("TENANTRY_REQUIRE_POSTGRES") == "1":
        pytest.fail(f"PostgreSQL is required (TENANTRY_REQUIRE_POSTGRES=1): {reason}")
    pytest.skip(f"{reason}; start one with scripts/dev-postgres and export {POSTGRES_URL_ENV}")


def _with_path(url: str, path: str, query: str = "") -> str:
    import urllib.parse

    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, query, ""))


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """URL of a throwaway PostgreSQL database for this test session (dropped at the end).

    The server and a role that may create databases come from
    ``TENANTRY_TEST_POSTGRES_URL`` (default: scripts/dev-postgres's role).
    Skipped when no server answers, failed instead with TENANTRY_REQUIRE_POSTGRES=1.
    """
    import secrets

    try:
        import psycopg
        from psycopg import sql
    except ImportError:
        _no_postgres("psycopg is not installed (pip install -e '.[dev]')")
        raise
    from tenantry.store.url import mask_url

    admin = os.environ.get(POSTGRES_URL_ENV) or POSTGRES_DEFAULT_URL
    try:
        conn = psycopg.connect(admin, autocommit=True, connect_timeout=3)
    except psycopg.Error as exc:
        _no_postgres(f"no PostgreSQL answers at {mask_url(admin)} ({str(exc).strip()})")
        raise
    name = f"tenantry_test_{os.getpid()}_{secrets.token_hex(3)}"
    with conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        try:
            yield _with_path(admin, "/" + name)
        finally:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@contextlib.contextmanager
def pg_schema(database: str, prefix: str = "t") -> Iterator[str]:
    """URL of a fresh, empty schema ``PREFIX_<hex>`` in ``database`` (dropped on exit)."""
    import secrets
    import urllib.parse

    import psycopg
    from psycopg import sql

    schema = f"{prefix}_{secrets.token_hex(6)}"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    query = urllib.parse.urlencode({"options": f"-csearch_path={schema}"})
    try:
        yield _with_path(database, urllib.parse.urlsplit(database).path, query)
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def pg_url(pg_database: str) -> Iterator[str]:
    """URL of a fresh, empty schema in the session's database (dropped after the test)."""
    with pg_schema(pg_database) as url:
        yield url
