"""Through the real daemon: actions are audited; a tampered log is detected."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def test_daemon_audit_log_and_tamper_detection(start_daemon: Any) -> None:
    d = start_daemon()
    agent = d.client(agent="codex", session="s1")
    for word in ("one", "two"):
        list(agent.stream("commands.run", {"argv": ["echo", word], "cwd": d.state}))
    ok = d.cli("audit", "verify", "--json")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    report = json.loads(ok.stdout)
    assert report["ok"] and report["alg"] == "hmac-sha256" and report["records"] >= 5
    user = d.client().call("sessions.list", {})
    key = next(s["principal"] for s in user["sessions"] if "/codex/s1" in s["principal"])
    shown = json.loads(d.cli("audit", "show", "--json", "--principal", key).stdout)
    actions = [r["action"] for r in shown]
    assert actions.count("command.started") == 2 and actions.count("command.finished") == 2
    assert actions.count("op:commands.run") == 2  # the request itself, input as a digest
    assert all(r["input_digest"].startswith("sha256:") for r in shown)
    d.stop()

    log = Path(d.state) / "audit" / "audit.jsonl"
    lines = log.read_text().splitlines()
    rec = json.loads(lines[1])
    rec["decision"] = "ok-but-edited"
    edited = [*lines[:1], json.dumps(rec), *lines[2:]]
    log.write_text("\n".join(edited) + "\n")
    bad = d.cli("audit", "verify", "--json")
    assert bad.returncode == 1
    assert "hash" in {p["kind"] for p in json.loads(bad.stdout)["problems"]}

    log.write_text("\n".join(lines[:-1]) + "\n")  # original minus its last record
    cut = d.cli("audit", "verify")
    assert cut.returncode == 1 and "truncated" in cut.stdout
