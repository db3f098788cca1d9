"""scripts/dev-postgres prints the URL alone on stdout, whatever the cluster tools say.

CI reads the URL with ``$(scripts/dev-postgres)``; a cluster left with a stale pid
file makes ``pg_ctlcluster start`` print "Removed stale pid file." on stdout, which
once became part of the URL. The cluster tools are stand-ins on PATH here, so the
script's own plumbing is what is tested.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "dev-postgres"

_TOOLS = {
    "pg_lsclusters": (
        '[ -f "$STATE/up" ] && s=online || s=down\n'
        'echo "15 main 5433 $s postgres /var/lib/postgresql/15/main log"\n'
    ),
    "pg_ctlcluster": (
        'echo "Removed stale pid file."\necho "$@" >> "$STATE/calls"\ntouch "$STATE/up"\n'
    ),
    "runuser": "cat > /dev/null\nexit 0\n",
}


def _fake_path(tmp_path: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in _TOOLS.items():
        tool = bindir / name
        tool.write_text("#!/bin/sh\n" + body)
        tool.chmod(0o755)
    return {**os.environ, "PATH": f"{bindir}:/usr/bin:/bin", "STATE": str(tmp_path)}


def test_start_prints_only_the_url_when_the_cluster_tools_talk(tmp_path: Path) -> None:
    env = _fake_path(tmp_path)
    done = subprocess.run([str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "postgresql://tenantry_test:tenantry_test@127.0.0.1:5433/postgres\n"
    assert "Removed stale pid file." in done.stderr
    assert (tmp_path / "calls").read_text().split() == ["15", "main", "start"]


def test_url_and_a_bad_role_are_answered_without_starting(tmp_path: Path) -> None:
    env = _fake_path(tmp_path)
    url = subprocess.run(
        [str(SCRIPT), "url", "--role", "alice_1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert url.stdout == "postgresql://alice_1:alice_1@127.0.0.1:5433/postgres\n"
    bad = subprocess.run(
        [str(SCRIPT), "--role", "a;b"], env=env, capture_output=True, text=True, timeout=30
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert "role must be" in bad.stderr
    assert not (tmp_path / "calls").exists()
