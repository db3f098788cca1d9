"""End to end through the real daemon on a real socket, via the real CLI."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from .conftest import Daemon, wait_for

CLAUDE = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "sess-claude-1"}


def test_run_streams_output_and_returns_exit_code(daemon: Daemon) -> None:
    r = daemon.cli("run", "--", "sh", "-c", "echo out; echo err >&2; exit 7")
    assert r.returncode == 7
    assert r.stdout == "out\n"
    assert "err\n" in r.stderr


def test_run_json_result(daemon: Daemon) -> None:
    r = daemon.cli("run", "--json", "--", "python3", "-c", "print('hi')")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["exit_code"] == 0
    assert res["state"] == "completed"
    assert res["stdout_tail"] == "hi\n"
    assert res["where"] == "local"


def test_run_uses_callers_cwd_and_env(daemon: Daemon, tmp_path: Path) -> None:
    r = daemon.cli(
        "run", "--", "sh", "-c", 'pwd; echo "$MY_VAR"', env={"MY_VAR": "xyz"}, cwd=str(tmp_path)
    )
    assert r.stdout.splitlines() == [str(tmp_path), "xyz"]


def test_missing_command_is_a_clear_error(daemon: Daemon) -> None:
    r = daemon.cli("run", "--", "no-such-command-xyz")
    assert r.returncode == 127
    assert "command not found: no-such-command-xyz" in r.stderr
    assert daemon.client().health()["ok"]


def test_timeout_kills_the_command(daemon: Daemon) -> None:
    r = daemon.cli("run", "--timeout", "0.5", "--json", "--", "sleep", "30")
    res = json.loads(r.stdout)
    assert res["state"] == "timeout"
    assert "timeout" in res["reason"]


def test_huge_output_is_streamed_whole_and_tail_capped(daemon: Daemon) -> None:
    n = 20 * 1024 * 1024
    r = daemon.cli("run", "--", "head", "-c", str(n), "/dev/zero")
    assert r.returncode == 0
    assert len(r.stdout) == n
    res = daemon.client().stream("commands.run", {"argv": ["head", "-c", str(n), "/dev/zero"]})
    last = list(res)[-1]["result"]
    assert last["truncated"] is True
    assert len(last["stdout_tail"]) <= daemon.settings.output_cap_bytes
    assert daemon.client().health()["ok"]


def _script(tmp: Path, body: str, name: str = "job.sh") -> Path:
    p = tmp / name
    p.write_text("#!/bin/sh\n" + body)
    return p


def test_submit_wait_logs(daemon: Daemon, tmp_path: Path) -> None:
    s = _script(tmp_path, 'echo "hello $1"\n')
    r = daemon.cli("submit", str(s), "world", cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    jid = r.stdout.strip()
    w = daemon.cli("wait", jid, "--json", "--timeout", "30")
    assert w.returncode == 0, w.stdout + w.stderr
    job = json.loads(w.stdout)["job"]
    assert job["state"] == "COMPLETED"
    assert job["exit_code"] == 0
    logs = daemon.cli("logs", jid, "--json")
    assert json.loads(logs.stdout)["text"] == "hello world"
    assert (tmp_path / f"tenantry-{job['id']}.out").read_text() == "hello world\n"


def test_failing_job_and_wait_exit_code(daemon: Daemon, tmp_path: Path) -> None:
    s = _script(tmp_path, "exit 3\n")
    jid = daemon.cli("submit", str(s), cwd=str(tmp_path)).stdout.strip()
    w = daemon.cli("wait", jid, "--json")
    assert w.returncode == 1
    job = json.loads(w.stdout)["job"]
    assert (job["state"], job["exit_code"]) == ("FAILED", 3)


def test_job_time_limit_gives_timeout(daemon: Daemon, tmp_path: Path) -> None:
    s = _script(tmp_path, "sleep 30\n")
    jid = daemon.cli("submit", "--time", "0:01", str(s), cwd=str(tmp_path)).stdout.strip()
    job = json.loads(daemon.cli("wait", jid, "--json").stdout)["job"]
    assert job["state"] == "TIMEOUT"


@pytest.mark.own_daemon
def test_cancel_running_and_pending(daemon: Daemon, tmp_path: Path) -> None:
    s = _script(tmp_path, "sleep 60\n")
    ids = [
        daemon.cli("submit", "--cpus", "2", "--force", str(s), cwd=str(tmp_path)).stdout.strip()
        for _ in range(2)
    ]
    c = daemon.client()
    wait_for(lambda: c.call("jobs.status", {"ids": [ids[0]]})["jobs"][0]["state"] == "RUNNING")
    assert c.call("jobs.status", {"ids": [ids[1]]})["jobs"][0]["state"] == "PENDING"
    for jid in ids:
        r = daemon.cli("cancel", jid, "--json")
        assert r.returncode == 0, r.stderr
    for jid in ids:
        job = json.loads(daemon.cli("wait", jid, "--json", "--timeout", "20").stdout)["job"]
        assert job["state"] == "CANCELLED"


def test_wait_timeout_exit_124(daemon: Daemon, tmp_path: Path) -> None:
    s = _script(tmp_path, "sleep 30\n")
    jid = daemon.cli("submit", str(s), cwd=str(tmp_path)).stdout.strip()
    w = daemon.cli("wait", jid, "--timeout", "0.3", "--json")
    assert w.returncode == 124
    assert json.loads(w.stdout)["timed_out"] is True
    daemon.cli("cancel", jid)


def test_dedup_and_force(daemon: Daemon, tmp_path: Path) -> None:
    s = _script(tmp_path, "sleep 5\n")
    a = json.loads(daemon.cli("submit", "--json", str(s), cwd=str(tmp_path)).stdout)
    b = json.loads(daemon.cli("submit", "--json", str(s), cwd=str(tmp_path)).stdout)
    assert b["deduplicated"] is True
    assert b["job"]["id"] == a["job"]["id"]
    assert "force" in b["note"]
    c = json.loads(daemon.cli("submit", "--json", "--force", str(s), cwd=str(tmp_path)).stdout)
    assert c["deduplicated"] is False
    assert c["job"]["id"] != a["job"]["id"]
    # different arguments are a different job
    d = json.loads(daemon.cli("submit", "--json", str(s), "x", cwd=str(tmp_path)).stdout)
    assert d["job"]["id"] not in {a["job"]["id"], c["job"]["id"]}
    for j in (a, c, d):
        daemon.cli("cancel", j["job"]["id"])


def test_bad_submissions(daemon: Daemon, tmp_path: Path) -> None:
    r = daemon.cli("submit", str(tmp_path / "missing.sh"))
    assert r.returncode == 2
    assert "does not exist" in r.stderr
    noshebang = tmp_path / "plain.sh"
    noshebang.write_text("echo hi\n")
    r = daemon.cli("submit", "--json", str(noshebang))
    assert r.returncode == 1
    err = json.loads(r.stdout)["error"]
    assert err["code"] == "submission_rejected"
    assert "#!" in err["message"]
    r = daemon.cli("submit", "--cpus", "64", str(_script(tmp_path, "true\n")))
    assert "slots" in r.stderr
    r = daemon.cli("submit", "--time", "0", str(_script(tmp_path, "true\n")))
    assert r.returncode == 2 and "unlimited" in r.stderr


def test_unknown_job_ids(daemon: Daemon) -> None:
    for cmd in (["status", "t999"], ["wait", "4242"], ["cancel", "nope"], ["logs", "t77"]):
        r = daemon.cli(*cmd, "--json")
        assert r.returncode == 2, cmd
        assert json.loads(r.stdout)["error"]["code"] == "not_found"


def _raw(sock_path: str, request: bytes) -> tuple[int, dict[str, object]]:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    s.sendall(request)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, json.loads(body)


def _post(op: str, body: bytes, headers: bytes = b"") -> bytes:
    """A raw HTTP request for ``/v1/op/<op>``, as a client that skips our encoder sends it."""
    return (
        b"POST /v1/op/%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n%s"
        b"Content-Length: %d\r\n\r\n%s" % (op.encode(), headers, len(body), body)
    )


def test_malformed_requests_get_envelopes(daemon: Daemon) -> None:
    status, body = _raw(daemon.socket, _post("jobs.list", b"{not json"))
    assert status == 400
    assert body["ok"] is False
    assert body["error"]["code"] == "usage"  # type: ignore[index]
    bad_header = b"X-Tenantry-Principal: [1,2\r\n"
    status, body = _raw(daemon.socket, _post("jobs.list", b"{}", bad_header))
    assert status == 400
    status, body = _raw(daemon.socket, _post("no.such.op", b"{}"))
    assert status == 404
    status, body = _raw(daemon.socket, _post("commands.run", b'{"argv": "ls"}'))
    assert status == 400
    assert "argv" in body["error"]["message"]  # type: ignore[index]
    assert daemon.client().health()["ok"]


def test_two_principals_told_apart(daemon: Daemon, tmp_path: Path) -> None:
    s = _script(tmp_path, "true\n")
    agent = json.loads(daemon.cli("submit", "--json", str(s), cwd=str(tmp_path), env=CLAUDE).stdout)
    human = json.loads(daemon.cli("submit", "--json", str(s), cwd=str(tmp_path)).stdout)
    # same script, different principals: no dedup across principals
    assert agent["job"]["id"] != human["job"]["id"]
    assert agent["job"]["principal"].endswith("/claude-code/sess-claude-1")
    assert human["job"]["principal"].endswith("/human/-")
    sessions = json.loads(daemon.cli("sessions", "--json").stdout)["sessions"]
    kinds = {(x["agent"], x["session"]) for x in sessions}
    assert ("claude-code", "sess-claude-1") in kinds
    assert ("human", "") in kinds
    only_agent = json.loads(daemon.cli("jobs", "--session", "--json", env=CLAUDE).stdout)["jobs"]
    assert {j["id"] for j in only_agent} == {agent["job"]["id"]}
    codex = daemon.cli("run", "--json", "--", "true", env={"CODEX_THREAD_ID": "th-9"})
    assert codex.returncode == 0
    ev = json.loads(daemon.cli("events", "--json", "--type", "command.finished").stdout)
    assert any("/codex/th-9" in e["principal"] for e in ev["events"])


def test_uid_comes_from_the_socket_not_the_request(daemon: Daemon) -> None:
    forged = daemon.client(agent="human")
    forged.claims["uid"] = "0"  # ignored: not a claim the daemon reads
    forged.claims["user"] = "someone-else"
    me = forged.call("facility.info", {})["you"]
    assert me["uid"] == os.getuid()
    assert me["user"] != "someone-else"


def _as_user(uid: int, gid: int, sock_path: str) -> str:
    """Fork, drop to uid/gid, send one request; returns what the child saw."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: no exec, so no interpreter permissions are needed
        try:
            os.close(r)
            os.setgid(gid)
            os.setuid(uid)
            try:
                status, body = _raw(
                    sock_path,
                    b"POST /v1/op/jobs.list HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                    b"Content-Length: 2\r\n\r\n{}",
                )
                out = f"{status} {json.dumps(body)}"
            except PermissionError:
                out = "EACCES"
            os.write(w, out.encode())
        finally:
            os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return data.decode()


@pytest.mark.own_daemon
def test_another_users_request_is_refused(daemon: Daemon) -> None:
    import pwd

    import pytest

    if os.getuid() != 0:
        pytest.skip("needs root to act as another user")
    nobody = pwd.getpwnam("nobody")
    # 1. the private socket cannot even be opened by another user
    assert _as_user(nobody.pw_uid, nobody.pw_gid, daemon.socket) == "EACCES"
    # 2. even if the socket is opened up, the daemon checks SO_PEERCRED
    os.chmod(daemon.state, 0o755)
    os.chmod(daemon.socket, 0o777)
    out = _as_user(nobody.pw_uid, nobody.pw_gid, daemon.socket)
    assert out.startswith("403 "), out
    body = json.loads(out[4:])
    assert body["error"]["code"] == "permission_denied"
    assert f"you are uid {nobody.pw_uid}" in body["error"]["message"]
    assert daemon.client().health()["ok"]


def test_client_reports_unreadable_socket(daemon: Daemon, tmp_path: Path) -> None:
    """The client turns EACCES into a clear PermissionDenied."""
    import pytest

    from tenantry.client.sync import Client
    from tenantry.core.errors import PermissionDenied
    from tenantry.core.settings import load

    if os.getuid() == 0:
        # root bypasses file modes; exercise the client's mapping directly instead
        pytest.skip("root can open any socket")
    c = Client(
        load(env={"TENANTRY_STATE_DIR": str(tmp_path), "TENANTRY_SOCKET": "/root/x"}),
        autostart=False,
    )
    with pytest.raises(PermissionDenied):
        c.call("jobs.list", {})


def test_state_and_socket_are_private(daemon: Daemon) -> None:
    assert os.stat(daemon.state).st_mode & 0o777 == 0o700
    assert os.stat(daemon.socket).st_mode & 0o777 == 0o600
    assert os.stat(Path(daemon.state) / "tenantry.sqlite3").st_mode & 0o777 == 0o600


def test_second_daemon_refuses_to_start(daemon: Daemon) -> None:
    r = daemon.cli("serve")
    assert r.returncode == 2
    assert "already serves" in r.stderr
    assert daemon.client().health()["ok"]


@pytest.mark.own_daemon
def test_events_record_every_action(daemon: Daemon, tmp_path: Path) -> None:
    daemon.cli("run", "--", "true")
    jid = daemon.cli("submit", str(_script(tmp_path, "true\n")), cwd=str(tmp_path)).stdout.strip()
    daemon.cli("wait", jid)
    ev = json.loads(daemon.cli("events", "--json").stdout)["events"]
    types = [e["type"] for e in ev]
    for t in (
        "session.seen",
        "command.started",
        "command.finished",
        "job.submitted",
        "job.state",
        "status.query",
    ):
        assert t in types, t
    done = [e for e in ev if e["type"] == "job.state" and e["subject"] == jid]
    assert done[-1]["outcome"] == "COMPLETED"


def test_background_child_holding_pipes_does_not_hang(daemon: Daemon) -> None:
    r = daemon.cli("run", "--json", "--", "sh", "-c", "echo started; sleep 30 & exit 0")
    res = json.loads(r.stdout)
    assert res["exit_code"] == 0 and res["stdout_tail"] == "started\n"
    assert "background" in res["reason"]
    # the background child was ended with the command
    assert res["duration_s"] < 20


def test_failed_job_wait_gets_the_matching_lesson(daemon: Daemon, tmp_path: Path) -> None:
    c = daemon.client(session="teacher")
    lesson_id = c.call(
        "memory.remember",
        {
            "title": "libcudart missing: load the cuda module first",
            "body": "Run `module load cuda/12.2` before launching; the loader path is set there.",
            "kind": "failure-fix",
            "error_signature": "error while loading shared libraries: libcudart.so.12: cannot"
            " open shared object file: No such file or directory",
            "subject": {"module": "cuda"},
        },
    )["lesson"]["id"]
    script = tmp_path / "gpu.sh"
    script.write_text(
        "#!/bin/sh\necho './train: error while loading shared libraries: libcudart.so.12:"
        " cannot open shared object file: No such file or directory' >&2\nexit 127\n"
    )
    jid = daemon.cli("submit", str(script), cwd=str(tmp_path)).stdout.strip()
    w = daemon.cli("wait", jid, "--json", "--timeout", "60")
    result = json.loads(w.stdout)
    assert result["job"]["state"] == "FAILED"
    assert [x["id"] for x in result["lessons"]] == [lesson_id]
