"""Client commands import no HTTP library and nothing of the daemon.

The measured cost: cold ``tenantry run -- true`` imported ``http.client`` (about
50 ms) and ``tenantry find``/``grep`` the daemon-side index component (113 ms).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Daemon

PROBE = """
import json, sys
sys.argv = ["tenantry", *sys.argv[1:]]
from tenantry.cli.main import main
try:
    main()
except SystemExit:
    pass
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""
FORBIDDEN_TOP = {
    *("http", "email", "ssl", "starlette", "uvicorn", "httpx", "anyio", "mcp", "pydantic"),
    *("cedarpy", "tree_sitter", "polars", "sqlite3", "watchdog", "rich"),
}
DAEMON_SIDE = (
    *("tenantry.gateway", "tenantry.store", "tenantry.service"),
    *("tenantry.index.component", "tenantry.index.store", "tenantry.index.query"),
)


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--", "true"],
        ["run", "--json", "--", "sh", "-c", "echo hi"],
        ["find", ".", "--name", "*.txt"],
        ["grep", "needle", "."],
        ["jobs"],
    ],
)
def test_client_commands_stay_lean(daemon: Daemon, tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=daemon.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    modules = json.loads(line[len("MODULES ") :])
    bad = [m for m in modules if m.split(".")[0] in FORBIDDEN_TOP or m.startswith(DAEMON_SIDE)]
    assert not bad, (args, bad)
    if args[0] == "run":
        assert proc.stdout.strip() in ("", "hi") or json.loads(proc.stdout)["exit_code"] == 0
