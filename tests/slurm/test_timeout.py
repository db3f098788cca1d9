"""A job that overruns its time limit ends TIMEOUT (runs last: see conftest.timeout_job)."""

from __future__ import annotations

import pytest

from tenantry.backends.slurm import SlurmBackend
from tenantry.core.models import JobState

from .conftest import wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


async def test_timeout(backend: SlurmBackend, timeout_job: str) -> None:
    done = await wait_until(backend, timeout_job, lambda u: u.state.terminal, timeout=150)
    assert done.state is JobState.TIMEOUT
    assert done.reason == "TimeLimit"
