"""Facility mode end to end: Slurm's associations decide a claimed account; job changes
are pushed to the executors, which then do not poll the service.

The Slurm account ``tt_i16e_proj`` is created with an association for ``tt-alice``
only (idempotently, and kept: removing it could break a test running alongside);
``tt-bob`` has none. Needs root, Slurm with accounting; see conftest.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from .conftest import Facility, User, _run, running_facility, wait_until
from .test_facility_failover import replica_health

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

PROJECT = "tt_i16e_proj"  # alice's only; bob has no association with it


def ensure_project() -> None:
    have = _run(["sacctmgr", "-nP", "show", "account", PROJECT, "format=account"])
    if PROJECT not in have.stdout.split():
        _run(["sacctmgr", "-i", "add", "account", PROJECT, "description=tenantry-test"])
    assoc = _run(["sacctmgr", "-nP", "show", "assoc", f"account={PROJECT}", "format=user"])
    if "tt-alice" not in assoc.stdout.split():
        _run(["sacctmgr", "-i", "add", "user", "tt-alice", f"account={PROJECT}"])


@pytest.fixture(scope="module")
def fac(slurm: None) -> Iterator[Facility]:
    if os.geteuid() == 0:
        ensure_project()  # before the service starts: its first read of the facts has it
    with running_facility() as f:
        yield f


def test_a_claimed_account_must_be_one_of_the_users_associations(fac: Facility) -> None:
    alice, bob = fac.users["tt-alice"], fac.users["tt-bob"]
    wait_until(
        lambda: (replica_health(fac.socket).get("slurm_facts") or {}).get("loaded"),
        60,
        "the service's first read of Slurm's associations",
    )
    job = alice.ok("submit", "-A", PROJECT, "-t", "2", alice.script("p.sh", "echo in-project"))
    done = alice.ok("wait", job["job"]["id"], "--timeout", "150")
    assert done["job"]["state"] == "COMPLETED", done
    acct = _run(["sacct", "-nPX", "-j", str(done["job"]["backend_id"]), "--format=account"])
    assert acct.stdout.split()[:1] == [PROJECT], acct.stdout

    refused = bob.call("submit", "-A", PROJECT, "-t", "2", bob.script("p.sh", "echo no"))
    assert refused.rc != 0
    err = json.dumps(refused.data) + refused.stderr
    # refused by the policy's account rule, fed Slurm's associations (the account gate
    # runs after it): it names the account and the ones bob has
    assert '"policy_denied"' in err and PROJECT in err and "root" in err, err
    # the session's project is a claim too (SLURM_ACCOUNT in an agent's environment)
    env = bob.env(True) | {"SLURM_ACCOUNT": PROJECT}
    proc = subprocess.run(
        bob.argv("submit", "--json", "-t", "2", "p.sh"),
        env=env, cwd=bob.work, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"no Slurm association with account '{PROJECT}'" in out, out
    assert replica_health(fac.socket)["slurm_facts"]["refused"] >= 1
    # refused before the budgets charged: bob's agents still have their one job this hour
    admitted = bob.call("submit", "-t", "2", "p.sh", agent=True)
    assert admitted.rc == 0, admitted.data


def wait_pushed(fac: Facility, user: User) -> int:
    """Submit a short job as ``user``, wait for it through the user's daemon once it runs;
    the ``facility.scheduler_status`` requests the user's executor sent meanwhile (the
    service's own count takes other users' daemons too)."""
    job = user.ok("submit", "-t", "2", user.script("push.sh", "sleep 8"))["job"]["id"]
    wait_until(
        lambda: user.ok("status", job)["jobs"][0]["state"] == "RUNNING", 90, "the job running"
    )
    served = replica_health(fac.socket)["served"].get("scheduler_status", 0)
    before = user.ok("info")["scheduler"]["facility_asked"]
    t0 = time.monotonic()
    done = user.ok("wait", job, "--timeout", "120")
    info = user.ok("info")["scheduler"]
    after = info["facility_asked"]
    # the service answered at least the requests this executor sent
    assert (
        replica_health(fac.socket)["served"].get("scheduler_status", 0) - served >= after - before
    )
    assert done["job"]["state"] == "COMPLETED", done
    print(f"waited {time.monotonic() - t0:.1f} s; scheduler_status requests: {after - before}")
    pushed = json.dumps(info.get("facility_push"))
    assert '"live": true' in pushed, pushed
    return int(after - before)


def test_a_waiter_returns_on_a_pushed_change_without_the_executor_polling(
    fac: Facility,
) -> None:
    # a polling executor asks facility.scheduler_status several times in those seconds
    # (poll_fast_s 0.3, backing off 1.5x); pushed, at most one was already in flight
    assert wait_pushed(fac, fac.users["tt-alice"]) <= 1
