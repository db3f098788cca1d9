"""SIGKILL the daemon at random points of submission bursts, then retry every request.

Each job appends its request id to ``runs.log``; after the restart every
request is sent again with its own request id. Must hold: 0 lost, 0 run
twice, every job in a true end state, every retried request answered with the
job its first attempt created.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import TenantryError

ITERATIONS = int(os.environ.get("TENANTRY_FAULT_ITERATIONS", "2"))  # full run: 20
gw: Any = sys.modules["_tenantry_gateway_test_helpers"]  # loaded by tests/conftest.py

BURST = 12
THREADS = 3
SCRIPT = '#!/bin/sh\necho "$1" >> {log}\n'


def _params(work: Path, rid: str) -> dict[str, Any]:
    script = work / "job.sh"
    return {
        "script": str(script),
        "script_text": script.read_text(),
        "args": [rid],
        "cwd": str(work),
        "env": {"PATH": "/usr/bin:/bin"},
    }


def _burst(d: Any, work: Path, rids: list[str], rnd: random.Random) -> dict[str, str]:
    """Submit ``rids`` from a few threads; SIGKILL the daemon part-way. rid -> first job id."""
    first: dict[str, str] = {}
    lock = threading.Lock()
    kill_after = rnd.randint(0, len(rids) - 1)

    def worker(mine: list[str]) -> None:
        c = d.client()
        for rid in mine:
            try:
                res = c.call("jobs.submit", _params(work, rid), request_id=rid)
            except TenantryError:
                continue
            with lock:
                first[rid] = res["job"]["id"]

    threads = [
        threading.Thread(target=worker, args=(rids[i::THREADS],), daemon=True)
        for i in range(THREADS)
    ]
    for t in threads:
        t.start()
    gw.wait_for(lambda: len(first) >= kill_after, timeout=60, what="part of the burst")
    d.kill(signal.SIGKILL)
    for t in threads:
        t.join(timeout=60)
    return first


def _check_after_restart(
    d: Any, work: Path, rids: list[str], first: dict[str, str], timeout: float
) -> None:
    d.start()
    c = d.client()
    ids: dict[str, str] = {}
    for rid in rids:
        res = c.call("jobs.submit", _params(work, rid), request_id=rid)
        ids[rid] = res["job"]["id"]
        if rid in first:
            assert ids[rid] == first[rid], f"retry of {rid} got a different job"
            assert res["existing"] is True
    assert len(set(ids.values())) == len(rids)

    def all_done() -> list[dict[str, Any]] | None:
        jobs: list[dict[str, Any]] = c.call("jobs.status", {"ids": list(ids.values())})["jobs"]
        return jobs if all(j["terminal"] for j in jobs) else None

    jobs = gw.wait_for(all_done, timeout=timeout, what="every job to end")
    states = {j["id"]: j["state"] for j in jobs}
    assert set(states.values()) == {"COMPLETED"}, states
    listed = {j["id"] for j in c.call("jobs.list", {"limit": 1000})["jobs"]}
    assert listed == set(ids.values()), "a job appeared that no request asked for"
    runs = (work / "runs.log").read_text().split()
    twice = sorted({r for r in runs if runs.count(r) > 1})
    missing = sorted(set(rids) - set(runs))
    assert not twice, f"ran twice: {twice}"
    assert not missing, f"never ran: {missing}"


def _iterate(
    start: Callable[..., Any], tmp_path: Path, timeout: float, seed: int, **env: str
) -> None:
    rnd = random.Random(seed)
    for it in range(ITERATIONS):
        work = tmp_path / f"it{it}"
        work.mkdir()
        (work / "job.sh").write_text(SCRIPT.format(log=work / "runs.log"))
        d = start(**env)
        rids = [f"s{seed}-i{it}-r{k}" for k in range(BURST)]
        first = _burst(d, work, rids, rnd)
        _check_after_restart(d, work, rids, first, timeout)


def test_sigkill_during_submission_bursts_local(
    fault_daemon: Callable[..., Any], tmp_path: Path
) -> None:
    _iterate(fault_daemon, tmp_path, 60, seed=14, TENANTRY_LOCAL_SLOTS="4")


@pytest.mark.slurm
@pytest.mark.usefixtures("slurm")
def test_sigkill_during_submission_bursts_slurm(
    fault_daemon: Callable[..., Any], tmp_path: Path
) -> None:
    _iterate(fault_daemon, tmp_path, 300, seed=41, TENANTRY_BACKEND="slurm")
