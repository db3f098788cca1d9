"""Identity on the user's socket: claimed agents, and the facility's `claimed_agents`."""

from __future__ import annotations

import logging
import os
import re
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import PermissionDenied
from tenantry.safety.sandbox import profile


def test_claimed_agent_is_an_agent_and_cannot_register_or_resume(start_daemon: Any) -> None:
    d = start_daemon()
    agent = d.client(agent="codex", session="s1")
    rows = agent.call("sessions.list", {})["sessions"]
    assert {"agent": "codex", "kind": "claimed"}.items() <= next(
        r for r in rows if r["agent"] == "codex"
    ).items()
    with pytest.raises(PermissionDenied, match="own socket"):
        agent.call("sandbox.register", {"agent": "codex"})
    with pytest.raises(PermissionDenied, match="humans"):
        agent.call("admin.resume_session", {"session": "s1"})


def test_facility_can_refuse_claimed_agents(start_daemon: Any) -> None:
    d = start_daemon(TENANTRY_CLAIMED_AGENTS="refuse")
    with pytest.raises(PermissionDenied, match="sandboxed sessions") as info:
        d.client(agent="claude-code", session="x").call("sessions.list", {})
    assert "tenantry agent" in (info.value.hint or "")
    assert d.client().call("sessions.list", {})["sessions"] is not None  # the human still works


def test_profile_hides_state_and_credentials_and_filters_env(tmp_path: Path) -> None:
    home, proj, state = tmp_path / "home", tmp_path / "home" / "p", tmp_path / "state"
    for d in (home / ".ssh", proj, state):
        d.mkdir(parents=True)
    paths = profile.SessionPaths(
        home=str(home), project=str(proj), state_dir=str(state),
        session_dir=str(tmp_path / "sess"), inside_runtime="/run/user/1",
    )  # fmt: skip
    env = profile.session_env(
        {"PATH": "/usr/bin", "SSH_AUTH_SOCK": "/x", "TENANTRY_AGENT": "human", "LANG": "C"},
        paths, session="sb-1", agent="codex", project="",
    )  # fmt: skip
    assert env["TENANTRY_AGENT"] == "codex" and "SSH_AUTH_SOCK" not in env
    assert env["TENANTRY_SOCKET"] == "/run/user/1/tenantry/sock"
    argv = profile.bwrap_argv("bwrap", paths, ["true"], env)
    joined = " ".join(argv)
    for hidden in (str(state), str(home / ".ssh")):
        assert f"--tmpfs {hidden} --remount-ro {hidden}" in joined
    assert f"--bind {proj} {proj}" in joined
    for flag in ("--unshare-pid", "--new-session", "--die-with-parent", "--clearenv"):
        assert flag in argv
    assert argv[-2:] == ["--", "true"]


@pytest.fixture
def log_socket() -> Iterator[tuple[str, socket.socket]]:
    """A stand-in for /dev/log: a datagram socket at a short path (AF_UNIX caps it at 108)."""
    with tempfile.TemporaryDirectory(prefix="tlog") as d:
        path = os.path.join(d, "log")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(path)
        try:
            yield path, sock
        finally:
            sock.close()


def test_each_durable_batch_sends_its_anchor_to_the_system_log(
    tmp_path: Path, log_socket: tuple[str, socket.socket]
) -> None:
    from tenantry.safety.audit.anchorlog import AnchorLog
    from tenantry.safety.audit.chain import ChainWriter

    path, sock = log_socket
    w = ChainWriter(tmp_path / "audit", b"k" * 32)
    w.open()
    w.on_anchor = anchors = AnchorLog(path)
    rec = w.append({"action": "op:x"}, fsync=False)
    w.close()
    anchors.close()
    line = sock.recv(4096).decode()
    assert re.match(r"<13>\w{3} [ \d]\d \d\d:\d\d:\d\d tenantry-audit\[\d+\]: ", line)
    assert f"tenantry audit anchor seq=1 hash={rec['hash']} mac=" in line
    assert anchors.sent >= 1 and anchors.dropped == 0


def test_a_slow_or_missing_system_log_never_holds_a_batch(
    tmp_path: Path, log_socket: tuple[str, socket.socket], caplog: pytest.LogCaptureFixture
) -> None:
    """Nobody reads the socket: once its queue is full anchors are dropped, not waited for."""
    from tenantry.safety.audit.anchorlog import AnchorLog

    caplog.set_level(logging.WARNING, logger="tenantry.safety.audit.anchorlog")
    path, _unread = log_socket
    anchors = AnchorLog(path)
    for seq in range(5000):
        anchors(seq, "a" * 64, "b" * 64)  # a blocking send would hang here
    assert anchors.sent > 0 and anchors.dropped > 0
    assert anchors.sent + anchors.dropped == 5000
    anchors.close()
    assert len([r for r in caplog.records if "could not be sent" in r.getMessage()]) == 1
    caplog.clear()

    gone = AnchorLog(str(tmp_path / "no-such-log"))
    for seq in range(3):
        gone(seq, "a" * 64, "")
    assert gone.dropped == 3 and gone.sent == 0
    warned = [r for r in caplog.records if "could not be sent" in r.getMessage()]
    assert len(warned) == 1  # once per outage, not once per batch


def test_a_tier_chosen_at_launch_restricts_the_session_and_never_raises_it(
    start_daemon: Any, tmp_path: Path
) -> None:
    """`tenantry agent --tier read-only`: the session may query but not submit, on its socket."""

    from tenantry.client.sync import Client
    from tenantry.core.errors import PolicyDenied

    d = start_daemon()
    human = d.client()
    job = {"script": "j.sh", "script_text": "#!/bin/sh\ntrue\n", "cwd": str(tmp_path)}

    def session(tier: str) -> Client:
        reg = human.call("sandbox.register", {"agent": "codex", "tier": tier, "cwd": str(tmp_path)})
        assert reg["tier"] == tier
        box = d.settings.replace(socket=reg["socket"])
        return Client(box, autostart=False, claims={"agent": "human", "session": "forged"})

    ro = session("read-only")
    assert ro.call("jobs.list", {}) is not None  # it may look
    with pytest.raises(PolicyDenied, match="read-only"):
        ro.call("jobs.submit", job)
    std = session("trusted")  # the facility's default tier is standard: asking more is ignored
    assert std.call("jobs.submit", job)["job"]["id"]
    with pytest.raises(Exception, match="unknown tier"):
        human.call("sandbox.register", {"agent": "codex", "tier": "root"})
