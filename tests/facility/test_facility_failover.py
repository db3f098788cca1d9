"""Two facility service replicas on one PostgreSQL; SIGKILL the leader while jobs run.

Replica A (the e2e service, started first: it takes the leader's advisory
lock and runs the cluster's one poller) and replica B (a second install, as
if on another login node) share ``store_url``. ``tt-alice`` has a daemon on
each. Jobs she submitted through B run while her waiters wait through B;
A is killed with SIGKILL. B must take the poller within 5 s, every waiter
must see its job complete, and what A journaled before it died must be there
through B. Needs root, Slurm and PostgreSQL; see conftest.py.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from ..conftest import pg_schema
from .conftest import (
    ACCOUNT,
    PY,
    STAFF,
    TENANTRY,
    Facility,
    User,
    _run,
    running_facility,
    wait_until,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

JOBS = int(os.environ.get("TENANTRY_FAILOVER_JOBS", "3"))
TAKEOVER_S = 5.0


def replica_health(sock: str) -> dict[str, Any]:
    with httpx.Client(transport=httpx.HTTPTransport(uds=sock), timeout=10) as client:
        resp = client.post(
            "http://facility/v1/op/facility.replica", json={},
            headers={"X-Tenantry-Principal": "{}"},
        )  # fmt: skip
    data = resp.json()
    assert data["ok"], data
    return dict(data["result"])


def _health_or_none(sock: str) -> dict[str, Any] | None:
    try:
        return replica_health(sock)
    except (httpx.HTTPError, OSError):
        return None


@dataclass
class Replicas:
    a: Facility
    b: Facility
    alice_a: User
    alice_b: User


def _second_replica(a: Facility, url: str) -> Facility:
    base = a.base
    svc, etc, sock = base / "svc-b", base / "etc-b", str(base / "run-b" / "facility.sock")
    argv = [PY, "-m", "tenantry", "facility", "install", "--account", ACCOUNT, "--staff-group",
            STAFF, "--state-dir", str(svc), "--listen", sock, "--config-dir", str(etc),
            "--unit-dir", str(etc), "--bin-dir", str(base / "sbin-b"), "--tenantry", TENANTRY,
            "--json"]  # fmt: skip
    install = _run(argv)
    assert install.returncode == 0, install.stderr
    with (svc / "config.toml").open("a") as cfg:
        cfg.write(f'budgets_file = "{base / "etc" / "budgets.toml"}"\npoll_fast_s = 0.3\n')
        cfg.write(f'store_url = "{url}"\n')
    start = base / "sbin-b" / "tenantry-facility-start"
    return Facility(base, sock, svc, start, {}, log_name="facility-b.log")


@pytest.fixture(scope="module")
def replicas(slurm: None, pg_database: str) -> Iterator[Replicas]:
    with pg_schema(pg_database, "fo") as url, running_facility(f'store_url = "{url}"\n') as a:
        wait_until(lambda: replica_health(a.socket).get("leader"), 30, "replica A leads")
        b = _second_replica(a, url)
        b.start()
        alice = a.users["tt-alice"]
        try:
            with alice.second_daemon(a.base / "users" / "tt-alice-on-b", b.socket) as alice_b:
                yield Replicas(a, b, alice, alice_b)
        finally:
            b.stop()


def test_the_follower_takes_the_poller_and_no_waiter_misses_a_change(replicas: Replicas) -> None:
    a, b, alice_a, alice_b = (replicas.a, replicas.b, replicas.alice_a, replicas.alice_b)
    assert replica_health(a.socket)["leader"] is True
    follower = replica_health(b.socket)
    assert follower["replicated"] is True and follower["leader"] is False
    # journaled through A before it dies: a command of alice's daemon on A
    marker = "through-a-" + secrets.token_hex(4)
    assert alice_a.call("run", "--", "echo", marker, json_flag=False).rc == 0
    wait_until(
        lambda: marker in json.dumps(alice_a.ok("facility", "events", "--since", "3600")),
        30,
        "the command's event at replica A",
    )
    jobs = [
        alice_b.ok("submit", "-t", "3", alice_b.script(f"j{i}.sh", "sleep 12"))["job"]["id"]
        for i in range(JOBS)
    ]
    wait_until(
        lambda: all(
            alice_b.ok("status", j)["jobs"][0]["state"] in {"RUNNING", "PENDING"} for j in jobs
        ),
        60,
        "the jobs queued",
    )
    waiters = [
        subprocess.Popen(
            alice_b.argv("wait", j, "--timeout", "170", "--json"),
            env=alice_b.env(False),
            cwd=alice_b.work,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for j in jobs
    ]
    try:
        assert a.proc is not None
        a.proc.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        a.proc.wait(10)
        wait_until(lambda: (_health_or_none(b.socket) or {}).get("leader"), 30, "B leads")
        took = time.monotonic() - killed
        print(f"replica B took the poller {took:.2f} s after the SIGKILL")
        assert took <= TAKEOVER_S, f"replica B took the poller {took:.1f} s after the kill"
        # B polls: its poller's freshness moves on
        first = replica_health(b.socket)
        wait_until(
            lambda: replica_health(b.socket)["scheduler_polls"] > first["scheduler_polls"],
            10,
            "B's poller polling",
        )
        for j, w in zip(jobs, waiters, strict=True):
            out, err = w.communicate(timeout=200)
            assert w.returncode == 0, (j, err)
            assert json.loads(out)["job"]["state"] == "COMPLETED", out
    finally:
        for w in waiters:
            if w.poll() is None:
                w.kill()
                w.wait()
    # nothing journaled is lost: A's events and B's job events, through B
    events = json.dumps(alice_b.ok("facility", "events", "--since", "3600"))
    assert marker in events
    seen = {row["id"]: row["state"] for row in alice_b.ok("facility", "jobs")["jobs"]}
    assert all(seen.get(j) == "COMPLETED" for j in jobs), seen
