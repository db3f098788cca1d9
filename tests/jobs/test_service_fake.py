"""JobService on the fake backend: dedup, cache, staleness, lost jobs, recovery."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenantry.backends.fake import FakeBackend
from tenantry.core.errors import BackendUnavailable, NotFound
from tenantry.core.events import EventType
from tenantry.core.models import AgentProduct, JobSpec, JobState, Principal, Resources
from tenantry.core.settings import load
from tenantry.gateway.app import open_runtime
from tenantry.jobs.service import JobService, spec_hash
from tenantry.service.runtime import Runtime

ALICE = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1")
ALICE2 = Principal(1000, "alice", AgentProduct.CODEX, "s2")
BOB = Principal(1001, "bob")


def spec(text: str = "#!/bin/sh\ntrue\n", **kw: object) -> JobSpec:
    return JobSpec(script="/w/job.sh", script_text=text, cwd="/w", **kw)  # type: ignore[arg-type]


@pytest.fixture
async def rt(tmp_path: Path) -> AsyncIterator[Runtime]:
    settings = load(
        env={
            "TENANTRY_STATE_DIR": str(tmp_path),
            "TENANTRY_POLL_FAST_S": "0.02",
            "TENANTRY_POLL_SLOW_S": "0.05",
        }
    )
    async with open_runtime(settings, FakeBackend()) as runtime:
        yield runtime


def svc(rt: Runtime) -> JobService:
    return rt.component("jobs", JobService)


def fake(rt: Runtime) -> FakeBackend:
    assert isinstance(rt.backend, FakeBackend)
    return rt.backend


async def test_dedup_window_principal_and_force(rt: Runtime) -> None:
    a, dup_a, _ = await svc(rt).submit(ALICE, spec())
    b, dup_b, note = await svc(rt).submit(ALICE, spec())
    assert (dup_a, dup_b, b.id) == (False, True, a.id)
    assert "force" in note
    c, dup_c, _ = await svc(rt).submit(ALICE2, spec())  # another session: not a duplicate
    assert not dup_c and c.id != a.id
    d, dup_d, _ = await svc(rt).submit(
        ALICE, JobSpec.from_dict({**spec().to_dict(), "force": True})
    )
    assert not dup_d and d.id != a.id
    assert fake(rt).calls["submit"] == 3


def test_spec_hash_ignores_env_only() -> None:
    base = spec()
    assert spec_hash(base) == spec_hash(JobSpec.from_dict({**base.to_dict(), "env": {"A": "1"}}))
    for change in (
        {"args": ["x"]},
        {"cwd": "/other"},
        {"script_text": "#!/bin/sh\nfalse\n"},
        {"resources": Resources(cpus=2).to_dict()},
    ):
        assert spec_hash(base) != spec_hash(JobSpec.from_dict({**base.to_dict(), **change}))


async def test_status_is_served_from_cache(rt: Runtime) -> None:
    job, _, _ = await svc(rt).submit(ALICE, spec())
    before = fake(rt).calls["query"]
    for _ in range(50):
        await svc(rt).status(ALICE, [job.id])
    # 50 status calls did not become 50 scheduler queries
    assert fake(rt).calls["query"] - before < 10


async def test_waiters_wake_on_change(rt: Runtime) -> None:
    job, _, _ = await svc(rt).submit(ALICE, spec())

    async def finish() -> None:
        await asyncio.sleep(0.05)
        fake(rt).set_state(job.backend_id, JobState.RUNNING)
        await asyncio.sleep(0.05)
        fake(rt).set_state(job.backend_id, JobState.COMPLETED, 0)

    task = asyncio.create_task(finish())
    chunks = [c async for c in svc(rt).wait(ALICE, job.id, 10, heartbeat_s=0.5)]
    await task
    assert chunks[-1]["done"] and chunks[-1]["job"]["state"] == "COMPLETED"
    assert chunks[-1]["job"]["exit_code"] == 0


async def test_backend_down_marks_status_stale_and_recovers(rt: Runtime) -> None:
    job, _, _ = await svc(rt).submit(ALICE, spec())
    fake(rt).down = True
    await asyncio.sleep(0.2)
    (view,) = await svc(rt).status(ALICE, [job.id])
    assert view["stale"] is True and "down" in view["stale_reason"]
    with pytest.raises(BackendUnavailable) as exc:
        await svc(rt).submit(ALICE, spec("#!/bin/sh\necho other\n"))
    assert exc.value.retryable
    fake(rt).down = False
    fake(rt).set_state(job.backend_id, JobState.COMPLETED, 0)
    chunks = [c async for c in svc(rt).wait(ALICE, job.id, 10, heartbeat_s=0.2)]
    assert chunks[-1]["job"]["state"] == "COMPLETED"
    assert chunks[-1]["job"]["stale"] is False


async def test_job_unknown_to_backend_becomes_lost(rt: Runtime) -> None:
    job, _, _ = await svc(rt).submit(ALICE, spec())
    del fake(rt).jobs[job.backend_id]
    chunks = [c async for c in svc(rt).wait(ALICE, job.id, 10, heartbeat_s=0.2)]
    final = chunks[-1]["job"]
    assert final["state"] == "LOST"
    assert "no longer knows" in final["reason"]


async def test_ownership_by_uid(rt: Runtime) -> None:
    job, _, _ = await svc(rt).submit(ALICE, spec())
    assert (await svc(rt).get(ALICE2, job.id)).id == job.id  # same user, other session
    with pytest.raises(NotFound):
        await svc(rt).get(BOB, job.id)
    with pytest.raises(NotFound):
        await svc(rt).cancel(BOB, job.backend_id)


async def test_events_are_journaled(rt: Runtime) -> None:
    job, _, _ = await svc(rt).submit(ALICE, spec())
    fake(rt).set_state(job.backend_id, JobState.FAILED, 1)
    _ = [c async for c in svc(rt).wait(ALICE, job.id, 10, heartbeat_s=0.2)]
    events = await rt.journal.events()
    kinds = [(e["type"], e["outcome"]) for e in events if e["subject"] == job.id]
    assert (EventType.JOB_SUBMITTED.value, "ok") in kinds
    assert (EventType.JOB_STATE.value, "FAILED") in kinds


async def test_unhanded_job_is_resubmitted_on_start(tmp_path: Path) -> None:
    settings = load(env={"TENANTRY_STATE_DIR": str(tmp_path)})
    backend = FakeBackend()
    async with open_runtime(settings, backend) as rt:
        job, _, _ = await svc(rt).submit(ALICE, spec())
        # simulate a crash between journal and hand-over
        await rt.journal.db.execute(
            "UPDATE jobs SET phase='journaled', backend_id='' WHERE id=?", (job.id,)
        )
    backend2 = FakeBackend()
    async with open_runtime(settings, backend2) as rt:
        assert backend2.calls["submit"] == 1
        again = await svc(rt).get(ALICE, job.id)
        assert again.backend_id and "resubmitted" in again.reason
        row = await rt.journal.db.fetchone(
            "SELECT phase, spec_json FROM jobs WHERE id=?", (job.id,)
        )
        assert row is not None and row["phase"] == "handed"
        assert json.loads(row["spec_json"])["script_text"] == spec().script_text


async def test_submissions_back_to_back_share_one_status_query_after_they_are_answered(
    tmp_path: Path,
) -> None:
    """A submission asks the poller for a query ``poll_fast_s`` later, not at once:
    its answer does not wait behind one, and a burst shares one."""
    settings = load(
        env={
            "TENANTRY_STATE_DIR": str(tmp_path),
            "TENANTRY_POLL_FAST_S": "1.0",  # the burst below takes far less
            "TENANTRY_POLL_SLOW_S": "30",
        }
    )
    async with open_runtime(settings, FakeBackend()) as rt:
        await asyncio.sleep(0.05)  # the poller's first (empty) turn
        before = fake(rt).calls["query"]
        jobs = [(await svc(rt).submit(ALICE, spec(f"#!/bin/sh\necho {i}\n")))[0] for i in range(10)]
        assert fake(rt).calls["query"] == before
        for _ in range(250):
            if fake(rt).calls["query"] > before:
                break
            await asyncio.sleep(0.02)
        assert fake(rt).calls["query"] == before + 1
        assert all(svc(rt).cache[j.id].backend_id for j in jobs)
