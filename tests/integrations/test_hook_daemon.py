"""The daemon answers agent hooks itself: ``POST /v1/hook/<agent>`` (``gateway.hookserve``).

On its Unix socket (what the lean command hook, ``agents.hook_fast``, calls) and,
with ``hook_http``, on loopback TCP (Claude Code's http hooks), where the caller's
uid is the kernel's record of the connecting socket (``gateway.tcpcred``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tenantry.agents import hook
from tenantry.client import wire
from tenantry.gateway import tcpcred

from ..conftest import run_tenantry
from .test_hook import FIXTURES, PRE, SRC, with_command

COMMANDS = ["squeue -u me", "rm -rf ~", "ls -la", "find . -name '*.py'", "tenantry jobs"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post_unix(path: str, agent: str, body: str) -> tuple[int, str]:
    conn = wire.Connection(path, 10.0)
    data = wire.encode_request("POST", f"/v1/hook/{agent}", body.encode())
    status, chunks = 0, []
    try:
        for ev in conn.request(data):
            if isinstance(ev, wire.Head):
                status = ev.status
            elif isinstance(ev, bytes):
                chunks.append(ev)
    finally:
        conn.close()
    return status, b"".join(chunks).decode()


HTTP_CLIENT = """
import socket, sys
host, port, path, body = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.stdin.read().encode()
s = socket.create_connection((host, port), timeout=10)
head = f"POST {path} HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: {len(body)}\\r\\n"
s.sendall(head.encode() + b"Connection: close\\r\\n\\r\\n" + body)
out = b""
while chunk := s.recv(65536):
    out += chunk
head, _, rest = out.partition(b"\\r\\n\\r\\n")
print(head.split(b" ")[1].decode())
sys.stdout.write(rest.decode())
"""


def _post_tcp(port: int, path: str, body: str, user: str | None = None) -> tuple[int, str]:
    """POST from a separate process (as ``user`` when given), as an agent CLI would."""
    # another user cannot run this venv's interpreter (under root's home): the system one
    python = (shutil.which("python3", path="/usr/bin:/bin") if user else None) or sys.executable
    proc = subprocess.run(
        [python, "-c", HTTP_CLIENT, "127.0.0.1", str(port), path],
        input=body, capture_output=True, text=True, timeout=30, check=True,
        user=user,
    )  # fmt: skip
    status, _, text = proc.stdout.partition("\n")
    return int(status), text


def test_the_kernel_socket_table_is_read_right() -> None:
    assert tcpcred.hex_address(socket.AF_INET, "127.0.0.1", 8080) == (
        "0100007F:1F90" if sys.byteorder == "little" else "7F000001:1F90"
    )
    table = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000 0 1\n"
        "   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1234 0 2\n"
    )
    assert tcpcred.uid_in_table(table, "0100007F:D431", "0100007F:1F90") == 1234
    assert tcpcred.uid_in_table(table, "0100007F:D432", "0100007F:1F90") is None
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        conn, _ = server.accept()
        with client, conn:
            assert tcpcred.peer_uid(conn) == os.getuid()
            peer, ours = conn.getpeername(), conn.getsockname()
            # netlink's exact lookup and the text table name the same socket's owner
            assert tcpcred.diag_uid(socket.AF_INET, peer, ours) == os.getuid()
            assert tcpcred.diag_uid(socket.AF_INET, ours, peer) == os.getuid()  # the other end
            with open("/proc/net/tcp") as f:
                text = f.read()
            hexed = [tcpcred.hex_address(socket.AF_INET, *a) for a in (peer, ours)]
            assert tcpcred.uid_in_table(text, *hexed) == os.getuid()
            assert tcpcred.diag_uid(socket.AF_INET, ("127.0.0.1", 1), ours) is None
            # only the hook listener knows TCP callers: every other listener knows none
            from tenantry.gateway.peercred import peer_credentials

            assert peer_credentials(conn) is None
            assert peer_credentials(conn, tcp=True) == (0, os.getuid(), -1)


@pytest.mark.parametrize("agent", sorted(PRE))
def test_the_daemon_answers_as_the_command_hook_does(start_daemon: Any, agent: str) -> None:
    d = start_daemon()
    sock = d.env["TENANTRY_SOCKET"]
    claims_env = {**d.env, "TENANTRY_AGENT": ""}
    for command in COMMANDS:
        payload = json.dumps(with_command(agent, PRE[agent], command))
        status, text = _post_unix(sock, agent, payload)
        assert status == 200, text

        def factory(a: str, s: str) -> hook.Checker:
            os.environ.update({"TENANTRY_SOCKET": sock, "TENANTRY_STATE_DIR": d.state})
            return hook.daemon_checker(a, s)

        import io

        out = io.StringIO()
        old = {k: os.environ.get(k) for k in ("TENANTRY_SOCKET", "TENANTRY_STATE_DIR")}
        try:
            hook.run(agent, io.StringIO(payload), out, io.StringIO(), checker_factory=factory,
                     env=claims_env)  # fmt: skip
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        assert text.strip() == out.getvalue().strip(), command


def test_loopback_http_serves_its_user_only(start_daemon: Any) -> None:
    port = _free_port()
    d = start_daemon(TENANTRY_HOOK_HTTP=f"127.0.0.1:{port}")
    payload = (FIXTURES / "claude-code" / "pretooluse-bash.json").read_text()  # squeue
    status, text = _post_tcp(port, "/v1/hook/claude-code", payload)
    assert status == 200, text
    out = json.loads(text)["hookSpecificOutput"]
    assert (
        out["permissionDecision"] == "deny" and "tenantry jobs" in out["permissionDecisionReason"]
    )
    rm = json.dumps(with_command("claude-code", PRE["claude-code"], "rm -rf ~"))
    status, text = _post_tcp(port, "/v1/hook/claude-code", rm)
    assert "Tenantry policy" in json.loads(text)["hookSpecificOutput"]["permissionDecisionReason"]
    ls = json.dumps(with_command("claude-code", PRE["claude-code"], "ls -la"))
    assert _post_tcp(port, "/v1/hook/claude-code", ls) == (200, "")  # no opinion: silence
    status, text = _post_tcp(port, "/v1/op/jobs.list", "{}")
    assert status == 404, text  # only hooks are served on TCP
    events = json.loads(d.cli("events", "--json", "--limit", "200").stdout)["events"]
    rules = {(e.get("data") or {}).get("rule") for e in events if e["type"] == "hook.decision"}
    assert "redirect.squeue" in rules
    if os.getuid() != 0:
        return  # another user's connection needs root to make
    status, text = _post_tcp(port, "/v1/hook/claude-code", payload, user="nobody")
    assert status == 403 and "you are uid 65534" in text, text


def test_hook_http_must_be_loopback(start_daemon: Any, tmp_path: Path) -> None:
    from tenantry.core.errors import UsageError
    from tenantry.gateway import hookserve

    with pytest.raises(UsageError, match="loopback"):
        hookserve.parse_address("0.0.0.0:4000")
    assert hookserve.parse_address("4000") == ("127.0.0.1", 4000)


LEAN_PROBE = """
import sys
sys.argv = ["tenantry", "hook", "--agent", "claude-code"]
from tenantry.cli.main import main
code = main()
sys.stderr.write("\\nMODULES " + " ".join(sorted(sys.modules)) + "\\n")
sys.exit(code)
"""


def test_the_lean_hook_asks_the_daemon_and_imports_no_decision_code(start_daemon: Any) -> None:
    d = start_daemon()
    env = {**d.env, "PYTHONPATH": str(SRC)}
    payload = (FIXTURES / "claude-code" / "pretooluse-bash.json").read_text()
    proc = subprocess.run(
        [sys.executable, "-c", LEAN_PROBE], input=payload, capture_output=True, text=True,
        env=env, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (
        "tenantry jobs" in json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    )
    modules = proc.stderr.rsplit("MODULES ", 1)[1].split()
    assert "tenantry.agents.steer" not in modules and "shlex" not in modules
    # the same command through the real entry point, and the decision recorded by the daemon
    rm = json.dumps(with_command("claude-code", PRE["claude-code"], "rm -rf ~"))
    out = run_tenantry("hook", "--agent", "claude-code", input=rm, env=env, timeout=60)
    assert "Tenantry policy" in out.stdout, out.stdout + out.stderr


def test_the_installed_hook_script_starts_without_site(start_daemon: Any, tmp_path: Path) -> None:
    """What a user-scope install writes: ``python -I -S .../hook_entry.py hook --agent X``."""
    import shlex

    from tenantry.agents.products.claude_code import hook_groups
    from tenantry.agents.products.common import HOOK_ENTRY, Target

    t = Target("user", tmp_path, tmp_path)
    argv = shlex.split(hook_groups(t)["SessionStart"]["hooks"][0]["command"])
    assert argv == [sys.executable, "-I", "-S", HOOK_ENTRY, "hook", "--agent", "claude-code"]
    d = start_daemon()
    env = {**d.env, "PYTHONPATH": "/nonexistent"}  # -I: the script finds its own package
    payload = (FIXTURES / "claude-code" / "pretooluse-bash.json").read_text()
    rm = json.dumps(with_command("claude-code", PRE["claude-code"], "rm -rf ~"))
    for body, expect in ((payload, "tenantry jobs"), (rm, "Tenantry policy")):
        proc = subprocess.run(argv, input=body, capture_output=True, text=True, env=env,
                              timeout=60)  # fmt: skip
        assert proc.returncode == 0 and expect in proc.stdout, proc.stdout + proc.stderr
    probe = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], input=payload, capture_output=True,
        text=True, env=env, timeout=60,
    )  # fmt: skip
    assert "tenantry jobs" in probe.stdout, probe.stderr
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in probe.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    assert "tenantry.agents.hook_fast" in modules, probe.stderr
    assert not {"site", "re", "enum", "tenantry.agents.steer"} & modules, sorted(modules)
    # no daemon: the same script decides alone and still fails closed
    d.stop()
    down = subprocess.run(argv, input=rm, capture_output=True, text=True, env=env, timeout=60)
    assert "fails closed" in down.stdout, down.stdout + down.stderr
