"""End to end, as a normal Unix user: an "agent" inside `tenantry agent` tries every escape."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from .sandbox_helpers import User

AGENT = Path(__file__).with_name("escape_agent.py")
ALLOWED = {"write in the project (allowed)"}


def _prepare(user: User) -> tuple[Path, Path]:
    project = user.home / "proj"
    secrets_ = {
        user.home / ".ssh" / "id_ed25519": "PRIVATE KEY",
        user.home / ".aws" / "credentials": "[default]\naws_secret_access_key=x\n",
    }
    for path, text in secrets_.items():
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_text(text)
    project.mkdir()
    for p in [project, *secrets_, *(p.parent for p in secrets_)]:
        os.chown(p, user.uid, user.uid)
    agent = user.home / "agent.py"
    agent.write_text(AGENT.read_text())
    os.chown(agent, user.uid, user.uid)
    return project, agent


def test_scripted_agent_cannot_escape(unix_user: User) -> None:
    user = unix_user
    project, agent = _prepare(user)
    state = user.home / ".local" / "state" / "tenantry"
    sock = state / "sock"
    # the user's daemon starts on demand; first a human call so the state exists
    first = user.tenantry("sessions", cwd=project)
    assert first.returncode == 0, first.stderr
    run = user.tenantry(
        "agent", "--agent", "claude-code", "--",
        "/usr/bin/python3", str(agent), str(state), str(sock), str(os.getpid()),
        cwd=project,
    )  # fmt: skip
    try:
        assert run.returncode == 0, run.stderr
        assert "agent session sb-" in run.stderr and "socket" in run.stderr
        assert run.stdout.strip(), run.stderr
        results: list[dict[str, Any]] = json.loads(run.stdout.strip().splitlines()[-1])
        names = {r["name"] for r in results}
        assert len(results) >= 25
        assert "real sbatch" in names or not Path("/usr/bin/sbatch").exists()
        escaped = [r for r in results if r["escaped"] and r["name"] not in ALLOWED]
        assert not escaped, json.dumps(escaped, indent=1)
        for r in results:
            assert r["message"], f"no clear message for {r['name']}"
        allowed = [r for r in results if r["name"] in ALLOWED]
        assert allowed and all(r["escaped"] for r in allowed), "the project must stay writable"
        by = {r["name"]: r["message"] for r in results}
        assert "humans" in by["admin op as claimed human"]
        assert "humans" in by["resume itself"]
        assert "own socket" in by["register a fresh session"]
        if "real sbatch" in by:
            # no MUNGE inside (when slurmctld itself is down, sbatch says so first)
            assert "munge" in by["real sbatch"].lower() or "controller" in by["real sbatch"]
        # from outside: the session is listed as sandboxed; the forged claim was recorded
        out = user.tenantry("sessions", "--json", cwd=project)
        rows = json.loads(out.stdout)["sessions"]
        kinds = {(r["agent"], r["kind"]) for r in rows}
        assert ("claude-code", "sandboxed") in kinds, rows
        assert not any(r["session"] == "fresh-1" for r in rows)
        ev = user.tenantry("events", "--json", cwd=project)
        assert "session.claim_ignored" in ev.stdout
        # and the audit chain is intact
        ver = user.tenantry("audit", "verify", cwd=project)
        assert ver.returncode == 0, ver.stdout + ver.stderr
    finally:
        subprocess.run(["pkill", "-KILL", "-u", user.name], check=False)
