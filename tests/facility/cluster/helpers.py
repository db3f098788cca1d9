"""Helpers shared by the facility tests (fixtures are in conftest.py)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass

import pytest
from tests.gateway.conftest import wait_for

SLURM_ACCOUNT = "tt_i16c"
USERS = ("tt-i16c-alice", "tt-i16c-bob")


def require(what: str, ok: bool, hint: str, env: str) -> None:
    """Skip when ``what`` is missing, fail instead when ``env``=1 (as CI sets)."""
    if ok:
        return
    if os.environ.get(env) == "1":
        pytest.fail(f"{what} is required ({env}=1) but missing: {hint}")
    pytest.skip(f"no {what}: {hint}")


wait_until = wait_for


@dataclass(frozen=True)
class User:
    name: str
    uid: int


def ensure_user(name: str) -> User:
    """A normal Unix user ``name``, created if missing (idempotent, race-safe)."""
    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        r = subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], capture_output=True)
        if r.returncode not in (0, 9):  # 9: exists (created concurrently)
            raise RuntimeError(r.stderr.decode()) from None
        pw = pwd.getpwnam(name)
    return User(name, pw.pw_uid)


def need_root_users() -> None:
    require("root", os.geteuid() == 0 and shutil.which("useradd") is not None,
            "creating Unix users needs root and useradd (CI runs as root)",
            "TENANTRY_REQUIRE_ROOT")  # fmt: skip


def sacctmgr(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=60)


def sbatch_as(user: User, *args: str, wrap: str) -> str:
    """Submit a job as ``user`` (runuser), returning its id."""
    out = subprocess.run(
        ["runuser", "-u", user.name, "--", "sbatch", "--parsable", f"--account={SLURM_ACCOUNT}",
         "--chdir=/tmp", "--output=/dev/null", "--time=5", *args, f"--wrap={wrap}"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return out.stdout.strip().split(";")[0]


def psql(sql: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", "psql", "-v", "ON_ERROR_STOP=1", "-Atc", sql],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def pg_up() -> bool:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return False
    try:
        return psql("select 1").returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False
