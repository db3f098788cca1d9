"""Capture from events on the runtime bus, and verification probes (fake prober)."""

from __future__ import annotations

import time

from tenantry.core.events import Event, EventType
from tenantry.memory import (
    FakeProber,
    Kind,
    MemoryService,
    PartitionInfo,
    Scope,
    Status,
    SubmitCheck,
    Trust,
)
from tenantry.memory.capture import Capture, is_variant, program
from tenantry.service.runtime import Runtime

from .conftest import principal, remember_limit

ALICE = principal("alice", "a1", project="chem")


def finished(
    key: str, cid: str, argv: list[str], outcome: str, stderr: str = "", ts: float | None = None
) -> Event:
    return Event(
        EventType.COMMAND_FINISHED,
        principal=key,
        subject=cid,
        outcome=outcome,
        duration_s=1.0,
        data={
            "argv": argv,
            "cwd": "/w",
            "exit_code": 1 if outcome == "failed" else 0,
            "where": "local",
            "stdout_tail": "",
            "stderr_tail": stderr,
            "cpu_s": 0.1,
        },
        ts=time.time() if ts is None else ts,
    )


def test_variants() -> None:
    assert program(("srun", "-n", "4", "./a.out")) == "a.out"
    assert is_variant(("nvcc", "-arch=sm_90", "k.cu"), ("nvcc", "-arch=sm_80", "k.cu"))
    assert not is_variant(("nvcc", "k.cu"), ("nvcc", "k.cu"))  # identical: a retry, not a fix
    assert not is_variant(("make",), ("pytest", "-x"))


def test_capture_window_and_sessions() -> None:
    cap = Capture(window_s=60)
    t0 = 1000.0
    err = "nvcc fatal   : Unsupported gpu architecture 'compute_90'"
    assert (
        cap.observe(
            finished("a/claude-code/1", "c1", ["nvcc", "-arch=sm_90", "k.cu"], "failed", err, t0)
        )
        == []
    )
    # another session's success is not this session's fix
    assert (
        cap.observe(
            finished(
                "a/claude-code/2", "c2", ["nvcc", "-arch=sm_80", "k.cu"], "completed", ts=t0 + 5
            )
        )
        == []
    )
    # too late
    assert (
        cap.observe(
            finished(
                "a/claude-code/1", "c3", ["nvcc", "-arch=sm_80", "k.cu"], "completed", ts=t0 + 120
            )
        )
        == []
    )
    cap.observe(
        finished("a/claude-code/1", "c4", ["nvcc", "-arch=sm_90", "k.cu"], "failed", err, t0 + 200)
    )
    (p,) = cap.observe(
        finished("a/claude-code/1", "c5", ["nvcc", "-arch=sm_80", "k.cu"], "completed", ts=t0 + 210)
    )
    assert p.kind is Kind.FAILURE_FIX and "added -arch=sm_80" in p.body
    assert p.error_signature.startswith("nvcc fatal")


async def test_fail_then_fix_on_the_bus_gives_a_candidate(
    service: MemoryService, runtime: Runtime
) -> None:
    err = (
        'Traceback (most recent call last):\n  File "/home/alice/t.py", line 3\n'
        "ModuleNotFoundError: No module named 'mpi4py'\n"
    )

    async def fail_then_fix(failed: str, fixed: str) -> None:
        """The mpi4py failure, then the same script run in the conda env."""
        await runtime.bus.publish(
            finished(ALICE.key, failed, ["python", "train.py", "--mpi"], "failed", err)
        )
        fix = ["conda", "run", "-n", "mpi", "python", "train.py", "--mpi"]
        await runtime.bus.publish(finished(ALICE.key, fixed, fix, "completed"))

    await fail_then_fix("c1", "c2")
    (les,) = await service.store.query("kind = 'failure-fix'")
    assert les.status is Status.CANDIDATE and les.scope is Scope.USER
    assert les.trust is Trust.AGENT_OBSERVED and les.owner_key == ALICE.key
    assert "conda run -n mpi" in les.body
    # the next session of the same user gets it for the same error, with other paths
    other = principal("alice", "a9", project="chem")
    got = await service.lessons_for_failure(other, err.replace("/home/alice", "/scratch/a"))
    assert [d["id"] for d in got] == [les.id]
    # a repeat of the same pattern does not create a duplicate
    await fail_then_fix("c3", "c4")
    assert len(await service.store.query("kind = 'failure-fix'")) == 1


async def test_rejected_submission_gives_a_probed_limit(
    service: MemoryService, runtime: Runtime, prober: FakeProber
) -> None:
    service.capture.slurm = True  # as when the daemon's backend is Slurm
    prober.accept = lambda res: SubmitCheck(
        accepted=(res.get("time_s") or 0) <= 1800,
        message="sbatch: error: Requested time limit is invalid (missing or exceeds some limit)",
    )
    error = (
        "sbatch: error: Batch job submission failed:"
        " Requested time limit is invalid (missing or exceeds some limit)"
    )
    await runtime.bus.publish(
        Event(
            EventType.JOB_REJECTED,
            principal=ALICE.key,
            data={
                "error": error,
                "script": "/w/job.sh",
                "resources": {"partition": "debug", "time_s": 7200},
            },
        )
    )
    await service.idle()
    (les,) = await service.store.query("kind = 'limit'")
    assert les.subject == {"tool": "sbatch", "partition": "debug"}
    assert les.claim == {
        "probe": "sbatch_rejects",
        "resources": {"partition": "debug", "time_s": 7200},
    }
    assert les.status is Status.ACTIVE and les.trust is Trust.PROBE_VERIFIED
    # the limit is raised; the next check finds the lesson stale
    prober.accept = lambda res: SubmitCheck(accepted=True, message="Job 5 to start now")
    out = await service.verify_one(les.id)
    assert out["result"] == "fail"
    assert (await service.store.require(les.id)).status is Status.STALE


async def test_probe_marks_a_stale_limit_and_confirms_a_true_one(service: MemoryService) -> None:
    wrong = await remember_limit(
        service,
        ALICE,
        "debug",
        title="debug partition: 1 hour max",
        body="debug allows one hour",
        max_time_s=3600,
    )
    right = await remember_limit(
        service,
        ALICE,
        "gpu",
        title="gpu partition: 24 h and 4 nodes",
        body="gpu allows 24 h",
        max_time_s=86400,
        max_nodes=4,
    )
    gone = await remember_limit(service, ALICE, "retired", title="old partition", body="x")
    results = {r["id"]: r for r in [await service.verify_one(x.id) for x in (wrong, right, gone)]}
    assert results[wrong.id]["result"] == "fail" and "1800" in results[wrong.id]["detail"]
    assert results[right.id]["result"] == "pass"
    assert results[gone.id]["result"] == "fail"
    assert (await service.store.require(wrong.id)).status is Status.STALE
    ok = await service.store.require(right.id)
    assert ok.trust is Trust.PROBE_VERIFIED and ok.verified_at is not None
    history = await service.store.history(wrong.id)
    assert history[-1]["action"] == "probe-failed"


async def test_probe_passing_verifies_but_never_promotes_beyond_the_writers_scope(
    service: MemoryService,
) -> None:
    les = await service.remember(
        ALICE,
        title="gcc/12.2.0 module exists",
        body="module load gcc/12.2.0",
        kind=Kind.FACT,
        scope=Scope.FACILITY,
        subject={"module": "gcc/12.2.0"},
        claim={"probe": "module_exists", "module": "gcc/12.2.0"},
    )
    await service.idle()
    after = await service.store.require(les.id)
    assert after.status is Status.ACTIVE and after.trust is Trust.PROBE_VERIFIED
    assert after.scope is not Scope.FACILITY and after.proposed_scope == "facility"


async def test_sweep_reverifies_expired_and_stales_unverifiable(
    service: MemoryService, prober: FakeProber
) -> None:
    probed = await remember_limit(
        service, ALICE, "gpu", title="gpu limit", body="24 h", ttl_days=1, max_time_s=86400
    )
    plain = await service.remember(ALICE, title="scratch is fast", body="use scratch", ttl_days=1)
    fresh = await service.remember(ALICE, title="fresh", body="still fresh", ttl_days=30)
    prober.partitions["gpu"] = PartitionInfo("gpu", max_time_s=43200)
    results = {r["id"]: r["result"] for r in await service.sweep(now=time.time() + 2 * 86400)}
    assert results == {probed.id: "fail", plain.id: "expired"}
    assert (await service.store.require(fresh.id)).status is Status.ACTIVE
    assert (await service.store.require(plain.id)).status is Status.STALE


def test_rejections_without_slurm_or_limits() -> None:
    def rejected(error: str) -> Event:
        return Event(
            EventType.JOB_REJECTED,
            principal="a/claude-code/1",
            data={"error": error, "resources": {"cpus": 64}},
        )

    (p,) = Capture().observe(rejected("the job asks for 64 CPUs but the local backend has 2 slots"))
    assert p.kind is Kind.LIMIT and p.claim is None  # no Slurm to replay it on
    (p,) = Capture().observe(rejected("the first line must start with #!"))
    assert p.kind is Kind.WARNING
    (p,) = Capture(slurm=True).observe(rejected("Requested time limit is invalid"))
    assert p.claim == {"probe": "sbatch_rejects", "resources": {"cpus": 64}}
