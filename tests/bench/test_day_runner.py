"""The day's actor runs a tool call's http hook and its matching command hook at once."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from pathlib import Path

import day_runner


def _serve_once_marker_seen(
    listener: socket.socket, marker: Path, seen: list[bool], count: int
) -> None:
    """Answer ``count`` http hook calls with no opinion. One for a command naming ``wait``
    first waits (10 s at most) for the command hook's marker, which exists only if that
    hook started before this answer."""
    for _ in range(count):
        conn, _ = listener.accept()
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            length = int(
                next(
                    line.split(b":", 1)[1]
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
            )
            while len(body) < length:
                body += conn.recv(65536)
            deadline = time.monotonic() + (10 if b"wait" in body else 0)
            while not marker.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            seen.append(marker.exists())
            marker.unlink(missing_ok=True)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")


def test_the_fallback_hook_runs_beside_the_http_hook_and_its_denial_wins(tmp_path: Path) -> None:
    marker = tmp_path / "hook-started"
    deny = {"hookSpecificOutput": {"permissionDecision": "deny",
                                   "permissionDecisionReason": "Tenantry policy: no"}}  # fmt: skip
    script = (
        f"import pathlib, sys; pathlib.Path({str(marker)!r}).touch(); sys.stdin.read();"
        f" print({json.dumps(json.dumps(deny))})"
    )
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bool] = []
    server = threading.Thread(
        target=_serve_once_marker_seen, args=(listener, marker, seen, 2), daemon=True
    )
    server.start()
    log = tmp_path / "log.jsonl"
    spec = {
        "t0": time.time(),
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": str(tmp_path),
        "log": str(log),
        "hook": [sys.executable, "-c", script],
        "hook_url": f"http://127.0.0.1:{listener.getsockname()[1]}/v1/hook/claude-code",
        "steps": [
            {"t": 0, "cls": "danger", "argv": ["true", "wait"], "hook_if": True},
            {"t": 0, "cls": "ls", "argv": ["true"]},  # no fallback matches: http alone
        ],
    }
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    assert day_runner.main(str(path)) == 0
    server.join(timeout=30)
    listener.close()
    rows = [json.loads(line) for line in log.read_text().splitlines()][:-1]
    assert seen == [True, False]  # the fallback had started before the http hook answered
    assert rows[0]["denied"] and rows[0]["rc"] == -1  # its denial beats the http "no opinion"
    assert not rows[1]["denied"] and rows[1]["rc"] == 0


def test_two_verdicts_on_one_call_the_stricter_decides() -> None:
    assert day_runner._stricter("", "deny") == day_runner._stricter("answered", "deny") == "deny"
    assert day_runner._stricter("answered", "") == "answered"
    assert day_runner._stricter("", "") == ""
