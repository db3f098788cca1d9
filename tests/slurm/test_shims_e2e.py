"""Installed shims against a real daemon on the real Slurm, in agent and human context."""

from __future__ import annotations

import subprocess
import time

import pytest

from tenantry.backends import slurm_parse as sp
from tenantry.core import attribution

from .conftest import Env

pytestmark = pytest.mark.slurm


def wait_state(env: Env, job: str, states: set[str], timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    got = ""
    while time.monotonic() < deadline:
        r = env.run("sacct", "-P", "-n", "-j", job, "--format=State")
        got = r.stdout.strip()
        if got in states:
            return got
        time.sleep(0.2)
    raise AssertionError(f"job {job} state {got!r}, wanted {states}")


def test_agent_commands_go_through_tenantry(env: Env) -> None:
    script = env.work / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=2\nsleep 30\n")
    r = env.run("sbatch", "--parsable", "-J", "e2e", str(script))
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    assert job.isdigit()
    # the agent's squeue is the shim's: served from the cache, same layout
    r = env.run("squeue", "-h", "-o", "%i %j %T")
    assert r.returncode == 0, r.stderr
    assert f"{job} e2e " in r.stdout
    r = env.run("squeue", "--json")
    assert r.returncode == 0
    (mine,) = [j for j in sp.parse_squeue_json(r.stdout) if j.job_id == job]
    assert attribution.parse(mine.comment)["session"] == "e2e-sess"  # type: ignore[index]
    # the real Slurm sees the same job with the tag in its comment
    real = subprocess.run(
        ["scontrol", "show", "job", job], capture_output=True, text=True, check=True
    ).stdout
    (rec,) = sp.parse_scontrol(real)
    assert attribution.parse(rec["Comment"])["agent"] == "claude-code"  # type: ignore[index]
    r = env.run("scontrol", "show", "job", job)
    (ours,) = sp.parse_scontrol(r.stdout)
    assert ours["JobId"] == job and ours["JobName"] == "e2e"
    # a resubmission of the same script is deduplicated, with a note
    r = env.run("sbatch", "--parsable", "-J", "e2e", str(script))
    assert r.stdout.strip() == job and "note:" in r.stderr
    r = env.run("scancel", job)
    assert r.returncode == 0, r.stderr
    assert wait_state(env, job, {"CANCELLED"}) == "CANCELLED"
    r = env.run("squeue", "-h", "-o", "%i")
    assert job not in r.stdout.split()


def test_human_commands_run_the_real_slurm(env: Env) -> None:
    r = env.run("sbatch", "--parsable", "--wrap", "true", agent=False)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip().split(";")[0]
    r = env.run("squeue", "--json", agent=False)
    assert "openapi" in r.stdout and "served_from" not in r.stdout  # the real one
    r = env.run("scontrol", "show", "job", job, agent=False)
    (rec,) = sp.parse_scontrol(r.stdout)
    assert rec["JobId"] == job and "Comment" not in rec  # never through Tenantry
    # a job Tenantry never saw is unknown to the agent's shim
    r = env.run("scontrol", "show", "job", job)
    assert r.returncode == 1 and "Invalid job id" in r.stderr


def test_squeue_and_sacct_show_partition_nodes_and_work_dir(env: Env) -> None:
    script = env.work / "place.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=2\nsleep 30\n")
    r = env.run("sbatch", "--parsable", str(script))
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    try:
        wait_state(env, job, {"RUNNING"}, 60)
        real = subprocess.run(
            ["squeue", "-h", "-j", job, "-o", "%P|%N|%Z"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        partition, nodes, cwd = real.split("|")
        assert partition and nodes and cwd == str(env.work)
        deadline = time.monotonic() + 30
        shown = ""
        while time.monotonic() < deadline:  # the daemon's cache learns the node list
            shown = env.run("squeue", "-h", "-j", job, "-o", "%P|%N|%Z").stdout.strip()
            if shown == real:
                break
            time.sleep(0.2)
        assert shown == real, "the shim's squeue shows what Slurm's does"
        r = env.run("sacct", "-P", "-n", "-j", job, "--format=Partition,NodeList,WorkDir")
        assert r.stdout.strip() == real
        r = env.run("squeue", "-h", "-j", job)  # default columns: partition, node list
        assert partition in r.stdout.split() and nodes in r.stdout.split()
    finally:
        env.run("scancel", job)
