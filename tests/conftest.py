"""Shared fixtures. Concept-specific fixtures live in tests/<concept>/conftest.py."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator

import pytest


def slurm_up() -> bool:
    """True when a Slurm controller answers and a node is usable."""
    if shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=15
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and any(
        s.strip().rstrip("*") in {"idle", "mix", "alloc"} for s in out.stdout.split()
    )


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
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    # short path: Unix socket paths are limited to 107 bytes
    import tempfile

    d = tempfile.mkdtemp(prefix="tnt-")
    os.chmod(d, 0o700)
    return d
