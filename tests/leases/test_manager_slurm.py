"""The lease contract on the real single-node Slurm (scripts/dev-slurm).

Runs on the real ``tenantry.backends.slurm.SlurmBackend``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from tenantry.backends.slurm import SlurmBackend
from tenantry.core.models import CommandSpec, Principal, Resources
from tenantry.core.settings import Settings

from .conftest import Collect, Stack, Until

pytestmark = pytest.mark.slurm
PY = sys.executable
START = 240.0  # the shared dev Slurm may be busy with other tests' jobs


def _backend(settings: Settings) -> SlurmBackend:
    return SlurmBackend(settings)


def sbatches(be: SlurmBackend) -> int:
    return int(be.calls.get("sbatch", 0))


def py(code: str, **kw: object) -> CommandSpec:
    return CommandSpec(argv=(PY, "-c", code), **kw)  # type: ignore[arg-type]


def sacct_state(jid: str) -> str:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-o", "State", "-j", jid],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.stdout.strip().split("\n")[0]


@pytest.fixture
async def slurm_backend(slurm: None, stack: Stack) -> AsyncIterator[SlurmBackend]:
    be = _backend(stack.settings)
    await be.start()
    yield be
    for mgr in stack.managers:
        for lease in mgr.leases(include_ended=True):
            if lease["backend_id"]:
                subprocess.run(["scancel", lease["backend_id"]], capture_output=True, timeout=30)
    await be.aclose()


async def test_lease_is_one_slurm_job_serving_many_commands_and_surviving_restart(
    stack: Stack, slurm_backend: SlurmBackend, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager(slurm_backend, start_timeout_s=START, reconnect_grace_s=8)
    first = await mgr.run(py("import os; print(os.environ['SLURM_JOB_ID'])"), alice, collect())
    assert first.state == "completed"
    (lease,) = mgr.leases()
    assert first.stdout_tail.strip() == lease["backend_id"], "ran inside the lease's Slurm job"
    for i in range(30):
        r = await mgr.run(py(f"print({i})"), alice, collect())
        assert r.stdout_tail == f"{i}\n"
    assert sbatches(slurm_backend) == 1
    assert mgr.leases()[0]["served"] == 31

    sink = collect()
    code = "import time; print('start', flush=True); time.sleep(1.5); print('done')"
    task = asyncio.create_task(mgr.run(py(code), alice, sink, cid="c-slurm-restart"))
    await wait(lambda: "start" in sink.text(), what="command start")
    await mgr.aclose()
    with pytest.raises(Exception, match="daemon stopped"):
        await task
    mgr2 = await stack.manager(slurm_backend, start_timeout_s=START, reconnect_grace_s=8)
    result = await wait(lambda: mgr2.result("c-slurm-restart"), 30, "replayed result")
    assert result["exit_code"] == 0 and "done" in result["stdout_tail"]
    again = await mgr2.run(py("print('after restart')"), alice, collect())
    assert again.stdout_tail == "after restart\n"
    assert sbatches(slurm_backend) == 1

    task = asyncio.create_task(mgr2.run(py("import time; time.sleep(20)"), alice, collect()))
    await wait(lambda: mgr2.leases()[0]["in_use"] == 1)
    os.kill(mgr2._live[lease["id"]].lease.pid, signal.SIGKILL)
    lost = await asyncio.wait_for(task, 30)
    assert (lost.state, lost.reason) == ("lost", "lease lost")


async def test_scancel_of_a_lease_and_idle_release(
    stack: Stack, slurm_backend: SlurmBackend, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager(slurm_backend, start_timeout_s=START, idle_s=2.0)
    task = asyncio.create_task(mgr.run(py("import time; time.sleep(30)"), alice, collect()))
    lease = await wait(lambda: next((x for x in mgr.leases() if x["in_use"]), None), START)
    subprocess.run(["scancel", lease["backend_id"]], check=True, timeout=30)
    lost = await asyncio.wait_for(task, 30)
    assert (lost.state, lost.reason) == ("lost", "lease lost")

    r = await mgr.run(py("print('next')"), alice, collect())
    assert r.stdout_tail == "next\n"
    (second,) = mgr.leases()
    assert second["id"] != lease["id"]
    await wait(lambda: not mgr.leases(), 30, "idle release")
    await wait(lambda: sacct_state(second["backend_id"]) == "COMPLETED", 60, "job to complete")


async def test_walltime_drain_on_slurm(
    stack: Stack, slurm_backend: SlurmBackend, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    # Slurm walltimes are whole minutes: a 60 s lease that drains in its last 56 s.
    mgr = await stack.manager(slurm_backend, start_timeout_s=START, time_s=60, drain_s=56, slots=1)
    long = asyncio.create_task(mgr.run(py("import time; time.sleep(6)"), alice, collect()))
    first = await wait(lambda: next((x for x in mgr.leases() if x["in_use"]), None), START)
    await wait(lambda: mgr.leases()[0]["state"] == "draining", 30, "walltime drain")
    later = await mgr.run(py("print('elsewhere')"), alice, collect())
    assert later.stdout_tail == "elsewhere\n"
    assert (await asyncio.wait_for(long, 30)).state == "completed"
    ended = {x["id"]: x for x in mgr.leases(include_ended=True)}
    assert ended[first["id"]]["state"] in {"draining", "ended"}
    assert sbatches(slurm_backend) == 2


def allocated_gpus(jid: str) -> int:
    out = subprocess.run(
        ["squeue", "-h", "-j", jid, "-O", "tres-alloc:200"],
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    for item in out.strip().split(","):
        name, _, value = item.partition("=")
        if name == "gres/gpu":
            return int(value)
    return 0


async def test_a_gpu_lease_holds_only_what_a_command_uses_and_is_released_idle(
    stack: Stack, slurm_backend: SlurmBackend, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager(slurm_backend, start_timeout_s=START, idle_s=2.0)
    code = "import os, time; print(os.environ['CUDA_VISIBLE_DEVICES'], flush=True); time.sleep(3)"
    spec = CommandSpec(argv=(PY, "-c", code), resources=Resources(gpus=1))
    sink = collect()
    task = asyncio.create_task(mgr.run(spec, alice, sink))
    await wait(lambda: sink.text(), START, "the GPU command to start")
    (lease,) = mgr.leases()
    assert len(sink.text().strip().split(",")) == 1, "a 1-GPU command sees one GPU"
    assert allocated_gpus(lease["backend_id"]) == 1, "no spare GPU held beside the busy one"
    assert (await task).state == "completed"
    await wait(lambda: not mgr.leases(), 30, "idle release of the GPU lease")
    await wait(lambda: allocated_gpus(lease["backend_id"]) == 0, 60, "the GPU to be freed")


async def test_a_lease_on_a_short_partition_asks_for_no_more_than_its_max_time(
    stack: Stack, slurm_backend: SlurmBackend, alice: Principal, collect: type[Collect]
) -> None:
    """The dev Slurm's `gpu` partition allows 30 min; a 1-hour lease pilot would be refused."""
    mgr = await stack.manager(slurm_backend, start_timeout_s=START, time_s=3600)
    spec = CommandSpec(argv=(PY, "-c", "print('on gpu')"), resources=Resources(partition="gpu"))
    res = await mgr.run(spec, alice, collect())
    assert res.state == "completed" and "on gpu" in res.stdout_tail, res
    (lease,) = mgr.leases()
    out = subprocess.run(
        ["scontrol", "show", "job", str(lease["backend_id"]), "--oneliner"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "TimeLimit=00:30:00" in out and "Partition=gpu" in out, out
