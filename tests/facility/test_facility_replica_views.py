"""Two facility replicas on one PostgreSQL see each other's jobs and stops at once.

Replica A and replica B (the harness of test_facility_failover.py) share
``store_url``; ``tt-alice`` has a daemon on each. A job submitted through A must
be in B's ``facility.jobs`` without B restarting, and a stop set at A (by staff,
``tt-carol``) must refuse alice's agents at B and end the command her agent runs
through B. Needs root, Slurm and PostgreSQL; see conftest.py.
"""

from __future__ import annotations

import time

import pytest

from .conftest import User, wait_until
from .test_facility_failover import Replicas, replicas

__all__ = ["replicas"]  # the fixture, imported

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

AT_ONCE_S = 5.0  # B reads the shared journal on A's NOTIFY; it resyncs every second anyway


def _ids(u: User) -> set[str]:
    return {str(r["id"]) for r in u.ok("facility", "jobs")["jobs"]}


def test_a_job_submitted_through_one_replica_is_in_the_others_view(replicas: Replicas) -> None:
    alice_a, alice_b = replicas.alice_a, replicas.alice_b
    job = alice_a.ok("submit", "-t", "2", alice_a.script("via-a.sh", "sleep 3"))["job"]["id"]
    t0 = time.monotonic()
    wait_until(lambda: job in _ids(alice_b), AT_ONCE_S, "A's job in B's facility.jobs")
    print(f"in B's view {time.monotonic() - t0:.2f} s after the submit returned")
    row = next(r for r in alice_b.ok("facility", "jobs")["jobs"] if str(r["id"]) == job)
    assert row["user"] == "tt-alice" and row.get("backend_id")
    # its state follows at B too (the poller's log is shared), to the end
    wait_until(
        lambda: (
            next(r["state"] for r in alice_b.ok("facility", "jobs")["jobs"] if str(r["id"]) == job)
            == "COMPLETED"
        ),
        120,
        "the job's end in B's view",
    )


def test_a_stop_set_at_one_replica_reaches_executors_of_the_other(replicas: Replicas) -> None:
    a, alice_b = replicas.a, replicas.alice_b
    carol = a.users["tt-carol"]  # staff, through replica A
    agent = alice_b.agent_command("tail", "-f", "/dev/null")  # on the login node's list
    try:
        wait_until(lambda: alice_b.saw_started("tail"), 60, "the agent's command through B")
        carol.ok("admin", "stop-user", "tt-alice", "--reason", "replica test")
        t0 = time.monotonic()
        # the executor connected to B ends the agent's command (B's facility.stops woke)
        agent.wait(30)
        print(f"the agent's command ended {time.monotonic() - t0:.2f} s after the stop at A")
        # and B refuses alice's agents from now on
        refused = alice_b.call("run", "--", "true", agent=True, json_flag=False)
        assert refused.rc != 0 and "stopped" in refused.stderr, refused.stderr
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        carol.call("admin", "resume-user", "tt-alice")
    wait_until(
        lambda: alice_b.call("run", "--", "true", agent=True, json_flag=False).rc == 0,
        AT_ONCE_S,
        "the resume at A to reach B",
    )
