"""Lease commands get the allocation's step environment (GPUs, job id, CPUs)."""

from __future__ import annotations

from tenantry.leases.pilot.worker import Pilot, PilotConfig

ALLOCATION = {
    "PATH": "/usr/bin",
    "SLURM_JOB_ID": "77",
    "SLURM_CPUS_ON_NODE": "8",
    "SLURM_CPUS_PER_TASK": "4",
    "CUDA_VISIBLE_DEVICES": "0,1",
    "HOME": "/home/pilot",
}


def _pilot() -> Pilot:
    return Pilot(PilotConfig("127.0.0.1", 1, "L1", "secret"), env=dict(ALLOCATION))


def test_the_callers_environment_gets_the_step_variables() -> None:
    env = _pilot().command_env(
        {"PATH": "/opt/bin", "HOME": "/home/alice", "CUDA_VISIBLE_DEVICES": ""}
    )
    assert env["SLURM_JOB_ID"] == "77" and env["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert env["SLURM_CPUS_PER_TASK"] == "4"
    assert env["PATH"] == "/opt/bin" and env["HOME"] == "/home/alice"


def test_without_an_environment_the_pilots_is_used() -> None:
    assert _pilot().command_env({}) == ALLOCATION
