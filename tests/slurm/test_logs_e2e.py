"""`tenantry logs --task N` of an array job, through a real daemon on the real Slurm."""

from __future__ import annotations

import json
import sys
import time

import pytest

from .conftest import Env

pytestmark = pytest.mark.slurm


def tenantry(env: Env, *argv: str) -> str:
    r = env.run(sys.executable, "-m", "tenantry", *argv)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_logs_of_one_array_task(env: Env) -> None:
    script = env.work / "arr.sh"
    script.write_text('#!/bin/bash\necho "task $SLURM_ARRAY_TASK_ID says hi"\n')
    job = json.loads(tenantry(env, "submit", "--json", "-a", "0-2", "-t", "2", str(script)))
    jid = job["job"]["id"]
    deadline = time.monotonic() + 90
    while json.loads(tenantry(env, "status", "--json", jid))["jobs"][0]["state"] != "COMPLETED":
        assert time.monotonic() < deadline, "array job did not complete"
        time.sleep(0.3)
    every = tenantry(env, "logs", jid)
    assert all(f"task {n} says hi" in every for n in range(3)), every
    one = tenantry(env, "logs", jid, "--task", "1")
    assert one.strip() == "task 1 says hi", one
    data = json.loads(tenantry(env, "logs", jid, "--task", "2", "--json"))
    assert data["text"].strip() == "task 2 says hi"
