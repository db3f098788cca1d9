"""Facility mode end to end: one service as its system account, three users' executors.

Real Unix users (``tt-alice``, ``tt-bob``, ``tt-carol`` in the staff group
``tt-staff``), the service started by the script ``tenantry facility
install`` wrote (as ``tt-tenantry``), each user's daemon in facility mode as
that user, real Slurm jobs. Needs root and Slurm; see conftest.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from .conftest import ACCOUNT, Facility, User, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _ids(rows: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(str(r["user"]), str(r["id"])) for r in rows}


def test_service_runs_as_its_account_on_a_socket_every_user_may_open(facility: Facility) -> None:
    import pwd

    assert pwd.getpwuid(facility.service_uid()).pw_name == ACCOUNT
    st = os.stat(facility.socket)
    assert st.st_mode & 0o777 == 0o666
    assert pwd.getpwuid(st.st_uid).pw_name == ACCOUNT
    assert oct(facility.state.stat().st_mode & 0o777) == "0o700"
    alice = facility.users["tt-alice"].ok("facility", "status")
    carol = facility.users["tt-carol"].ok("facility", "status")
    assert alice["principal"]["user"] == "tt-alice" and alice["staff"] is False
    assert carol["principal"]["user"] == "tt-carol" and carol["staff"] is True
    # staff is a group, never a claim: carol's agent is not staff
    assert facility.users["tt-carol"].ok("facility", "status", agent=True)["staff"] is False


def test_jobs_submit_status_wait_cancel_through_the_users_daemons(facility: Facility) -> None:
    alice, bob, carol = (facility.users[n] for n in ("tt-alice", "tt-bob", "tt-carol"))
    short = alice.ok("submit", "-t", "2", alice.script("hello.sh", "echo hello-from-$(id -un)"))
    ajob = short["job"]["id"]
    done = alice.ok("wait", ajob, "--timeout", "150")
    assert done["job"]["state"] == "COMPLETED", done
    out = alice.work / f"tenantry-{ajob}.out"
    assert out.read_text().strip() == "hello-from-tt-alice"
    assert alice.ok("status", ajob)["jobs"][0]["state"] == "COMPLETED"

    long = bob.ok("submit", "-t", "5", bob.script("long.sh", "sleep 120"))
    bjob = long["job"]["id"]
    wait_until(
        lambda: bob.ok("status", bjob)["jobs"][0]["state"] in {"RUNNING", "PENDING"},
        60,
        "bob's job queued",
    )
    # bob's job means nothing to alice's daemon: she can neither see nor cancel it, by
    # Tenantry's id or by Slurm's
    backend_id = str(bob.ok("status", bjob)["jobs"][0]["backend_id"])
    assert alice.call("cancel", backend_id).rc != 0
    if bjob != ajob:  # job ids are per daemon; alice's own t1 is hers
        assert alice.call("status", bjob).rc != 0
    assert bob.ok("status", bjob)["jobs"][0]["state"] in {"RUNNING", "PENDING"}
    cancelled = bob.ok("cancel", bjob)
    assert cancelled["job"]["state"] in {"CANCELLED", "RUNNING", "PENDING"}
    wait_until(lambda: bob.ok("status", bjob)["jobs"][0]["state"] == "CANCELLED", 60, "cancelled")

    # the facility sees both through the events the executors send; each user theirs only
    def facility_jobs(u: User) -> set[tuple[str, str]]:
        return _ids(u.ok("facility", "jobs")["jobs"])

    wait_until(
        lambda: {("tt-alice", ajob), ("tt-bob", bjob)} <= facility_jobs(carol),
        30,
        "staff see every user's jobs",
    )
    assert {u for u, _ in facility_jobs(alice)} == {"tt-alice"}
    assert {u for u, _ in facility_jobs(bob)} == {"tt-bob"}
    rows = {(r["user"], r["id"]): r for r in carol.ok("facility", "jobs")["jobs"]}
    assert rows[("tt-alice", ajob)]["state"] == "COMPLETED"
    # the service polls Slurm once for everyone: its views carry the poller's state
    wait_until(
        lambda: any(r.get("served_from") == "poller" for r in carol.ok("facility", "jobs")["jobs"]),
        30,
        "the facility's one poller serving the job views",
    )
    wait_until(
        lambda: (
            {(r["user"], r["id"]): r["state"] for r in carol.ok("facility", "jobs")["jobs"]}[
                ("tt-bob", bjob)
            ]
            == "CANCELLED"
        ),
        30,
        "the cancel reached the facility",
    )


def test_a_user_cannot_reach_another_users_daemon_commands_or_events(facility: Facility) -> None:
    alice, bob, carol = (facility.users[n] for n in ("tt-alice", "tt-bob", "tt-carol"))
    marker = "only-alice-" + os.urandom(4).hex()
    assert alice.call("run", "--", "echo", marker, json_flag=False).rc == 0
    # bob pointing his client at alice's socket: the kernel refuses (0700 directory)
    env_other = bob.env(False) | {"TENANTRY_SOCKET": str(alice.state / "sock")}
    import subprocess

    peek = subprocess.run(
        bob.argv("run", "--", "true"), env=env_other, capture_output=True, text=True, check=False
    )
    assert peek.returncode != 0
    # the facility keeps every user's events; bob sees only his, even when he asks for alice's
    wait_until(
        lambda: marker in json.dumps(carol.ok("facility", "events", "--user", "tt-alice")),
        30,
        "alice's command event at the facility",
    )
    bob_view = bob.ok("facility", "events", "--user", "tt-alice", "--since", "3600")
    assert bob_view["events"], "bob sees his own events"
    assert {e["principal"].split("/")[0] for e in bob_view["events"]} == {"tt-bob"}
    assert marker not in json.dumps(bob_view)


def test_the_facility_audit_and_dashboard_hold_every_users_actions(facility: Facility) -> None:
    alice, bob = facility.users["tt-alice"], facility.users["tt-bob"]
    for u in (alice, bob):
        assert u.call("run", "--", "true", agent=True, json_flag=False).rc == 0
    keys = {u.name: f"{u.name}/claude-code/s-{u.name}" for u in (alice, bob)}

    def audited(key: str) -> bool:
        shown = facility.tenantry_as_root("audit", "show", "--principal", key)
        return isinstance(shown, list) and any(r.get("principal") == key for r in shown)

    for key in keys.values():
        wait_until(lambda key=key: audited(key), 30, f"{key} in the facility's audit log")
    verdict = facility.tenantry_as_root("audit", "verify")
    assert verdict["ok"] is True, verdict
    # the service's dashboard (the staff's view) shows every user's sessions
    page = facility.dashboard("/sessions")
    assert "tt-alice" in page and "tt-bob" in page


def test_lessons_staff_reach_everyone_agents_only_after_approval(facility: Facility) -> None:
    alice, bob, carol = (facility.users[n] for n in ("tt-alice", "tt-bob", "tt-carol"))
    tag = os.urandom(3).hex()
    staff = carol.ok(
        "memory", "add", "--kind", "fact", "--scope", "facility",
        "--title", f"scratch quota {tag} zebrafish",
        "--body", f"scratch is purged after 30 days zebrafish {tag}",
    )  # fmt: skip
    sid = staff["lesson"]["id"]
    assert staff["lesson"]["scope"] == "facility"
    for u in (alice, bob):
        assert sid in json.dumps(u.ok("memory", "search", f"zebrafish {tag}"))

    agent = alice.ok(
        "memory", "add", "--kind", "fact", "--scope", "facility",
        "--title", f"module load {tag} quokka",
        "--body", f"quokka toolchain {tag} needs module load quokka/2",
        agent=True,
    )  # fmt: skip
    aid = agent["lesson"]["id"]
    assert agent["lesson"]["scope"] != "facility"  # a candidate in alice's own scope
    assert aid in json.dumps(alice.ok("memory", "show", aid))
    assert aid not in json.dumps(bob.ok("memory", "search", f"quokka {tag}"))
    assert bob.call("memory", "show", aid).rc != 0
    # another user cannot approve it; staff can
    assert bob.call("memory", "approve", aid).rc != 0
    carol.ok("memory", "approve", aid)
    assert aid in json.dumps(bob.ok("memory", "search", f"quokka {tag}"))

    # staff seed the facility memory with import (here: a copy of an exported lesson)
    assert carol.call("memory", "export", "--out", "seed.jsonl", json_flag=False).rc == 0
    records = [json.loads(x) for x in (carol.work / "seed.jsonl").read_text().splitlines()]
    seed = next(r for r in records if r["id"] == sid)
    seed |= {"id": f"seed{tag}", "title": f"seeded {tag} wombat", "body": f"wombat {tag} fact"}
    (carol.work / "seed.jsonl").write_text(json.dumps(seed) + "\n")
    assert carol.ok("memory", "import", "seed.jsonl")["imported"] == 1
    assert f"seed{tag}" in json.dumps(alice.ok("memory", "search", f"wombat {tag}"))
    # alice's export holds her own lessons only; staff's holds everyone's
    assert carol.call("memory", "export", "--out", "all.jsonl", json_flag=False).rc == 0
    assert aid in (carol.work / "all.jsonl").read_text()
    assert bob.call("memory", "export", "--out", "mine.jsonl", json_flag=False).rc == 0
    assert aid not in (bob.work / "mine.jsonl").read_text()


def test_kill_switch_and_budgets_set_at_the_facility_apply_to_every_user(
    facility: Facility,
) -> None:
    alice, bob, carol = (facility.users[n] for n in ("tt-alice", "tt-bob", "tt-carol"))
    # budgets (the facility's file: one agent submission an hour per user)
    running: dict[str, str] = {}
    for u in (alice, bob):
        first = u.call("submit", "-t", "5", u.script("b1.sh", "sleep 300"), agent=True)
        assert first.rc == 0, first.stderr
        running[u.name] = first.data["job"]["id"]
        second = u.call("submit", "-t", "1", "--force", u.script("b2.sh", "true"), agent=True)
        assert second.rc != 0
        assert second.data["error"]["code"] == "budget_exceeded", second.data
        assert u.call("submit", "-t", "1", u.script("h.sh", "true")).rc == 0  # humans: not
    # a user cannot stop another user's agents; staff can stop anyone's
    assert bob.call("admin", "stop-user", "tt-alice").rc != 0
    for u in (alice, bob):
        carol.ok("admin", "stop-user", u.name, "--reason", "maintenance")
    try:
        for u in (alice, bob):
            refused = u.call("run", "--", "true", agent=True)
            assert refused.rc != 0
            assert refused.data["error"]["code"] == "session_stopped", refused.data
            assert u.call("run", "--", "true", json_flag=False).rc == 0  # their own shell works
            # the stopped agent's job is cancelled by the user's daemon (the user's credentials)
            job = running[u.name]

            def cancelled(u: User = u, job: str = job) -> bool:
                if u.ok("status", job)["jobs"][0]["state"] == "CANCELLED":
                    return True
                u.call("run", "--", "true", agent=True)  # it keeps trying; each refusal sweeps
                return False

            wait_until(cancelled, 90, f"{u.name}'s agent job cancelled by the stop")
    finally:
        for u in (alice, bob):
            carol.ok("admin", "resume-user", u.name)
    assert alice.call("run", "--", "true", agent=True, json_flag=False).rc == 0


def test_a_stop_at_the_facility_ends_a_running_agent_command_at_once(facility: Facility) -> None:

    alice, carol = facility.users["tt-alice"], facility.users["tt-carol"]
    cmd = alice.agent_command("tail", "-f", "/dev/null")
    try:
        wait_until(lambda: carol.saw_started("tail", "tt-alice"), 60, "alice's agent command")
        carol.ok("admin", "stop-user", "tt-alice", "--reason", "runaway")
        bob = facility.users["tt-bob"]
        assert "tt-alice" not in json.dumps(bob.ok("admin", "stopped"))  # not bob's business
        assert "tt-alice" in json.dumps(alice.ok("admin", "stopped"))
        # no further request from the agent: the daemon learns of the stop and ends it
        cmd.wait(timeout=30)
        assert cmd.returncode != 0
    finally:
        if cmd.poll() is None:
            cmd.kill()
            cmd.wait()
        carol.call("admin", "resume-user", "tt-alice")
    assert alice.call("run", "--", "true", agent=True, json_flag=False).rc == 0


def test_a_users_own_policy_layer_only_restricts_that_user(facility: Facility) -> None:
    alice, bob = facility.users["tt-alice"], facility.users["tt-bob"]
    layer = alice.state / "policy.cedar"
    layer.write_text(
        '@id("alice-no-date")\n@message("alice keeps her agents off date")\n'
        'forbid (principal is Agent, action == Action::"run_command", resource is Command)\n'
        'when { resource.program == "date" };\n'
    )
    os.chown(layer, alice.uid, alice.gid)
    alice.stop()
    alice.start()  # the layer is read at start
    try:
        refused = alice.call("run", "--", "date", agent=True)
        assert refused.rc != 0 and refused.data["error"]["details"]["rule"] == "alice-no-date"
        assert bob.call("run", "--", "date", agent=True, json_flag=False).rc == 0
        assert alice.call("run", "--", "date", json_flag=False).rc == 0  # her own shell
    finally:
        layer.unlink()
        alice.stop()
        alice.start()
    assert alice.call("run", "--", "date", agent=True, json_flag=False).rc == 0


def test_facility_down_agent_refused_retryable_human_works(facility: Facility) -> None:
    alice = facility.users["tt-alice"]
    facility.stop()
    try:
        refused = alice.call("run", "--", "true", agent=True)
        assert refused.rc == 69, refused
        err = refused.data["error"]
        assert err["code"] == "facility_unavailable" and err["retryable"] is True
        human = alice.call("run", "--", "echo", "still-works", json_flag=False)
        assert human.rc == 0 and "still-works" in human.data
        assert "facility service" in human.stderr  # told it ran without the facility
    finally:
        facility.start()
    assert alice.call("run", "--", "true", agent=True, json_flag=False).rc == 0


def test_install_dry_run_lists_account_dirs_unit_script_config(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "tenantry", "facility", "install", "--dry-run", "--json",
         "--root", str(tmp_path)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    steps = json.loads(out.stdout)["steps"]
    kinds = [s["kind"] for s in steps]
    assert kinds[:2] == ["group", "account"]
    assert "--system" in steps[1]["argv"]
    files = {Path(s["path"]).name: s for s in steps if s["kind"] == "file"}
    assert set(files) == {"config.toml", "tenantry-facility.service", "tenantry-facility-start"}
    assert "User=tenantry" in files["tenantry-facility.service"]["content"]
    assert not list(tmp_path.iterdir())  # a dry run writes nothing
