"""Denied shim commands: the PATH shims of a real daemon on the real Slurm meet the policy."""

from __future__ import annotations

import subprocess

import pytest

from ..slurm.conftest import Env, env  # noqa: F401  (the fixture)

pytestmark = pytest.mark.slurm


def test_shim_sbatch_and_scancel_are_judged(env: Env) -> None:  # noqa: F811
    # an operator QoS and too many GPUs for an agent job: denied before Slurm sees them
    r = env.run("sbatch", "--parsable", "--time=1", "--qos=admin", "--wrap", "true")
    assert r.returncode != 0
    assert "reserved for operators" in r.stderr, r.stderr
    r = env.run("sbatch", "--parsable", "--time=1", "--gres=gpu:16", "--wrap", "true")
    assert r.returncode != 0 and "16 GPUs" in r.stderr, r.stderr
    # a job of this session, then a sibling session's scancel of it
    script = env.work / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=2\nsleep 30\n")
    r = env.run("sbatch", "--parsable", str(script))
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip()
    sibling = {**env.agent, "CLAUDE_CODE_SESSION_ID": "other-sess"}
    r = subprocess.run(
        ["scancel", job], env=sibling, cwd=env.work, capture_output=True, text=True, timeout=60
    )
    assert r.returncode != 0
    assert "not submitted by this agent session" in r.stderr, r.stderr
    # the owning session may cancel it
    r = env.run("scancel", job)
    assert r.returncode == 0, r.stderr
