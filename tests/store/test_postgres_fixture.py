"""The PostgreSQL fixtures skip without a server, and fail when one is required."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(require: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COV_", "TENANTRY_"))}
    env["TENANTRY_TEST_POSTGRES_URL"] = "postgresql://nobody:x@127.0.0.1:1/none"
    if require:
        env["TENANTRY_REQUIRE_POSTGRES"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "tests/contract/test_store_contract.py",
            "-k",
            "Postgres and in_order",
            "-p",
            "no:cacheprovider",
            "--no-cov",
            "-q",
            "-rs",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("require", [False, True])
def test_no_server_skips_unless_required(require: bool) -> None:
    out = run(require)
    text = out.stdout + out.stderr
    if require:
        assert out.returncode != 0, text
        assert "PostgreSQL is required (TENANTRY_REQUIRE_POSTGRES=1)" in text
    else:
        assert out.returncode == 0, text
        assert " skipped, " in text and " failed" not in text.splitlines()[-1]
        assert "scripts/dev-postgres" in text
    assert "nobody:x@" not in text  # the URL is shown without its password
