"""The backend contract: one suite, run against the local, fake and Slurm backends.

``BackendContract`` holds the cases; each backend subclasses it with
``open_backend`` and, for the fake one whose jobs move only when told,
``drive``. The Slurm run needs the real Slurm of scripts/dev-slurm (marked
``slurm``: skipped when none is up, required in CI).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenantry.backends.base import Backend, JobUpdate
from tenantry.backends.fake import FakeBackend
from tenantry.backends.local import LocalBackend
from tenantry.backends.slurm import SlurmBackend
from tenantry.core.errors import NotFound
from tenantry.core.models import AgentProduct, JobSpec, JobState, Principal, Resources
from tenantry.core.settings import load

ALICE = Principal(uid=0, user="alice", agent=AgentProduct.CODEX, session="contract")


def job(workdir: Path, name: str, body: str) -> JobSpec:
    script = workdir / f"{name}.sh"
    text = f"#!/bin/bash\n{body}\n"
    script.write_text(text)
    return JobSpec(
        script=str(script),
        script_text=text,
        cwd=str(workdir),
        name=name,
        resources=Resources(cpus=1, time_s=120),
    )


class BackendContract:
    """What every backend does. Subclasses provide ``open_backend``."""

    NAME = ""
    WRITES_OUTPUT = True  # the job's stdout lands in Submitted.output
    TIMEOUT = 60.0
    CANCEL_UNKNOWN_RAISES = True

    NEEDS: tuple[str, ...] = ()  # fixtures that must hold first (e.g. "slurm": one is up)

    @pytest.fixture
    async def backend(
        self, tmp_path: Path, request: pytest.FixtureRequest
    ) -> AsyncIterator[Backend]:
        for name in self.NEEDS:
            request.getfixturevalue(name)
        be = self.open_backend(tmp_path / "state")
        await be.start()
        try:
            yield be
        finally:
            await be.aclose()

    def open_backend(self, state: Path) -> Backend:
        raise NotImplementedError

    async def drive(self, be: Backend, backend_id: str, exit_code: int) -> None:
        """Make a submitted job run to ``exit_code`` (real backends run it themselves)."""

    async def settle(self, be: Backend, backend_id: str) -> JobUpdate:
        deadline = time.monotonic() + self.TIMEOUT
        while True:
            update = (await be.query([backend_id])).get(backend_id)
            if update is not None and update.state.terminal:
                return update
            assert time.monotonic() < deadline, f"job {backend_id} still {update}"
            await asyncio.sleep(0.2)

    async def test_is_a_backend_with_its_name(self, backend: Backend) -> None:
        assert isinstance(backend, Backend)
        assert backend.name == self.NAME
        info = await backend.info()
        assert info["backend"] == self.NAME

    async def test_jobs_end_with_their_exit_code(self, backend: Backend, tmp_path: Path) -> None:
        ok = await backend.submit(job(tmp_path, "ok", "echo contract-ok"), ALICE, "t1")
        bad = await backend.submit(job(tmp_path, "bad", "exit 3"), ALICE, "t2")
        assert ok.backend_id and bad.backend_id and ok.backend_id != bad.backend_id
        assert ok.output and bad.output
        first = await backend.query([ok.backend_id])
        assert first[ok.backend_id].backend_id == ok.backend_id
        await self.drive(backend, ok.backend_id, 0)
        await self.drive(backend, bad.backend_id, 3)
        done, failed = (
            await self.settle(backend, ok.backend_id),
            await self.settle(backend, bad.backend_id),
        )
        assert (done.state, done.exit_code) == (JobState.COMPLETED, 0)
        assert (failed.state, failed.exit_code) == (JobState.FAILED, 3)
        if self.WRITES_OUTPUT:
            out = Path(ok.output)
            assert out.is_absolute() and out.parent == tmp_path
            deadline = time.monotonic() + 30
            while "contract-ok" not in (out.read_text() if out.exists() else ""):
                assert time.monotonic() < deadline, f"no output in {out}"
                await asyncio.sleep(0.1)

    async def test_cancel_ends_a_job_cancelled(self, backend: Backend, tmp_path: Path) -> None:
        sub = await backend.submit(job(tmp_path, "long", "sleep 300"), ALICE, "t3")
        await backend.cancel(sub.backend_id)
        end = await self.settle(backend, sub.backend_id)
        assert end.state is JobState.CANCELLED

    async def test_unknown_ids_are_omitted_and_not_cancellable(self, backend: Backend) -> None:
        assert await backend.query(["987654321"]) == {}
        if not self.CANCEL_UNKNOWN_RAISES:
            await backend.cancel("987654321")  # accepted: the scheduler cannot tell
            return
        with pytest.raises(NotFound):
            await backend.cancel("987654321")


class TestFakeBackend(BackendContract):
    NAME = "fake"
    WRITES_OUTPUT = False

    def open_backend(self, state: Path) -> Backend:
        return FakeBackend()

    async def drive(self, be: Backend, backend_id: str, exit_code: int) -> None:
        assert isinstance(be, FakeBackend)
        be.set_state(backend_id, JobState.RUNNING)
        be.set_state(
            backend_id, JobState.COMPLETED if exit_code == 0 else JobState.FAILED, exit_code
        )


class TestLocalBackend(BackendContract):
    NAME = "local"

    def open_backend(self, state: Path) -> Backend:
        return LocalBackend(state, slots=2)


@pytest.mark.slurm
class TestSlurmBackend(BackendContract):
    NAME = "slurm"
    TIMEOUT = 240.0  # the shared dev Slurm may be busy with other tests' jobs
    # scancel of an id Slurm never had exits 0 and prints nothing (22.05)
    CANCEL_UNKNOWN_RAISES = False
    NEEDS = ("slurm",)

    def open_backend(self, state: Path) -> Backend:
        return SlurmBackend(load(env={}, overrides={"state_dir": str(state), "backend": "slurm"}))


@pytest.mark.slurm
async def test_slurm_info_is_read_once_per_ttl(slurm: None, tmp_path: Path) -> None:
    # the facility day: sinfo and scontrol at every lease's pilot and policy refresh
    from tenantry.backends import slurm as slurm_backend

    backend = SlurmBackend(load(env={}, overrides={"state_dir": str(tmp_path), "backend": "slurm"}))
    await backend.start()
    first = await backend.info()
    first["partitions"] = []  # a caller's copy: the cached facts stay whole
    again = await backend.info()
    assert again["partitions"] and backend.calls["sinfo"] == 1 and slurm_backend.INFO_TTL_S > 0
