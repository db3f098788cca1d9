"""Facility mode across login nodes: one user's two daemons, one over TCP + MUNGE.

The service listens on its Unix socket and on ``facility_tcp`` (loopback
here); ``tt-alice`` has one daemon on the socket (login node A) and one that
reaches the service with ``--facility munge://127.0.0.1:PORT`` (as if on login
node B), each request proven by a credential ``munge`` makes as her. Needs
root, Slurm and a running munged; see conftest.py.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tenantry.core import errors
from tenantry.facility.munge_auth import MungeAuthClient, MungeCodec
from tenantry.facility.tcp import AUDIENCE

from .conftest import Facility, User, free_port, running_facility

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

HUMAN = {"agent": "human", "session": "", "host": "", "project": "", "origin": "user", "tier": ""}


def _munged_up() -> bool:
    if shutil.which("munge") is None or shutil.which("unmunge") is None:
        return False
    probe = subprocess.run(["munge", "-n"], capture_output=True, check=False)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def tcp_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def facility_tcp(slurm: None, tcp_port: int) -> Iterator[Facility]:
    if not _munged_up():
        if os.environ.get("TENANTRY_REQUIRE_SLURM") == "1":
            pytest.fail("TCP + MUNGE tests need munged (TENANTRY_REQUIRE_SLURM=1)")
        pytest.skip("TCP + MUNGE tests need munge/unmunge and a running munged")
    with running_facility(f'facility_tcp = "127.0.0.1:{tcp_port}"\n') as fac:
        yield fac


@pytest.fixture(scope="module")
def alice_b(facility_tcp: Facility, tcp_port: int) -> Iterator[User]:
    """tt-alice's second daemon, on "another login node": over TCP + MUNGE."""
    home = facility_tcp.base / "users" / "tt-alice-node-b"
    with facility_tcp.users["tt-alice"].second_daemon(home, f"munge://127.0.0.1:{tcp_port}") as b:
        yield b


def _codec_of(name: str) -> MungeCodec:
    pw = pwd.getpwnam(name)
    as_user = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups", "--"]
    return MungeCodec(munge_argv=(*as_user, "munge"))


def _body(op: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"op": op, "params": params or {}, "claims": HUMAN}


def test_the_daemon_on_another_node_is_its_user_proven_by_munge(
    facility_tcp: Facility, alice_b: User
) -> None:
    far = alice_b.ok("facility", "status")
    near = facility_tcp.users["tt-alice"].ok("facility", "status")
    assert far["principal"]["user"] == near["principal"]["user"] == "tt-alice"
    assert far["principal"]["uid"] == alice_b.uid and far["staff"] is False


def test_kill_switch_and_budget_at_the_facility_apply_to_both_daemons_of_a_user(
    facility_tcp: Facility, alice_b: User
) -> None:
    alice_a, carol = facility_tcp.users["tt-alice"], facility_tcp.users["tt-carol"]
    # the budget is the user's (one agent submission an hour), whichever node submits
    first = alice_a.call("submit", "-t", "5", alice_a.script("b1.sh", "sleep 300"), agent=True)
    assert first.rc == 0, first.stderr
    job = first.data["job"]["id"]
    try:
        second = alice_b.call("submit", "-t", "1", "--force", alice_b.script("b2.sh", "true"),
                              agent=True)  # fmt: skip
        assert second.rc != 0, second.data
        assert second.data["error"]["code"] == "budget_exceeded", second.data
        assert alice_b.call("submit", "-t", "1", alice_b.script("h.sh", "true")).rc == 0
        # a stop set at the facility refuses her agents on both nodes; her own shell works
        carol.ok("admin", "stop-user", "tt-alice", "--reason", "maintenance")
        try:
            for u in (alice_a, alice_b):
                refused = u.call("run", "--", "true", agent=True)
                assert refused.rc != 0
                assert refused.data["error"]["code"] == "session_stopped", refused.data
                assert u.call("run", "--", "true", json_flag=False).rc == 0
        finally:
            carol.ok("admin", "resume-user", "tt-alice")
        assert alice_b.call("run", "--", "true", agent=True, json_flag=False).rc == 0
    finally:
        alice_a.call("cancel", job)


def test_a_credential_of_one_user_cannot_act_as_another(
    facility_tcp: Facility, tcp_port: int
) -> None:
    async def scenario() -> None:
        alice = MungeAuthClient("127.0.0.1", tcp_port, _codec_of("tt-alice"), AUDIENCE)
        bob = MungeAuthClient("127.0.0.1", tcp_port, _codec_of("tt-bob"), AUDIENCE)
        try:
            me = (await alice.request(_body("facility.whoami")))["result"]
            assert me["principal"]["user"] == "tt-alice" and me["staff"] is False
            assert (await bob.request(_body("facility.whoami")))["result"]["principal"][
                "user"
            ] == "tt-bob"
            # what she asks for is hers only: bob's events are not there for her
            rows = (await alice.request(_body("facility.events", {"user": "tt-bob"})))["result"]
            assert rows["events"]
            assert {str(r["principal"]).split("/", 1)[0] for r in rows["events"]} == {"tt-alice"}
            # nor may she stop bob's agents (staff only)
            with pytest.raises(errors.PermissionDenied):
                await alice.request(_body("admin.stop_user", {"user": "tt-bob"}))
            # her credential bound to one request does not carry another body
            forger = MungeAuthClient("127.0.0.1", tcp_port, _codec_of("tt-alice"), AUDIENCE)
            try:
                await forger.connect()
                cred = await forger.codec.encode(forger.claims(_body("facility.whoami")))
                refused = await forger.send_raw(cred, _body("admin.stop_user", {"user": "x"}))
                assert refused["ok"] is False
                assert refused["error"]["code"] == errors.PermissionDenied.code, refused
                # and a credential of her connection is worth nothing on another one
                other = MungeAuthClient("127.0.0.1", tcp_port, _codec_of("tt-alice"), AUDIENCE)
                await other.connect()
                try:
                    replay = await other.send_raw(cred, _body("facility.whoami"))
                    assert replay["ok"] is False, replay
                finally:
                    await other.aclose()
            finally:
                await forger.aclose()
        finally:
            await alice.aclose()
            await bob.aclose()

    asyncio.run(scenario())


def test_live_report_over_munge_is_the_proven_users_own(
    facility_tcp: Facility, alice_b: User
) -> None:
    from .conftest import wait_until

    assert alice_b.call("run", "--", "true", json_flag=False).rc == 0  # on "node B"

    def mine() -> dict[str, Any] | None:
        res = alice_b.call("report", "--live")
        assert res.rc == 0, res.stderr
        rows = {r["user"]: r for r in res.data["facility"]["by_user"]}
        return res.data if rows.get("tt-alice", {}).get("human_commands", 0) >= 1 else None

    report = wait_until(mine, 60, "node B's command in the live report")
    assert report["scope"]["staff"] is False and report["scope"]["users"] == ["tt-alice"]
    assert {r["user"] for r in report["facility"]["by_user"]} == {"tt-alice"}
