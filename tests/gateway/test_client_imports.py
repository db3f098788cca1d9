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
import sys
sys.argv = ["tenantry", *sys.argv[1:]]
from tenantry.cli.main import main
try:
    main()
except SystemExit:
    pass
modules = sorted(sys.modules)
import json
sys.stderr.write("\\nMODULES " + json.dumps(modules) + "\\n")
"""
FORBIDDEN_TOP = {
    *("http", "email", "ssl", "starlette", "uvicorn", "httpx", "anyio", "mcp", "pydantic"),
    *("cedarpy", "tree_sitter", "polars", "sqlite3", "watchdog", "rich"),
}
# what a plain cold `tenantry run` and the hook no longer pay for: argparse (with gettext,
# locale, and shutil for the terminal width), the `socket` module (its enums, selectors)
COLD_RUN_SKIPS = {
    *("argparse", "gettext", "locale", "shutil", "bz2", "lzma", "socket", "selectors"),
    *("typing", "dataclasses", "subprocess", "pathlib", "importlib.util", "contextlib"),
}
# the client's JSON drives _json directly; `--json` output (indented) takes the json package
JSON_PACKAGE = {"json", "re", "enum", "collections"}
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
        ["submit", "-J", "lean", "job.sh", "1"],
    ],
)
def test_client_commands_stay_lean(daemon: Daemon, tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    (tmp_path / "job.sh").write_text("#!/bin/sh\ntrue\n")
    # pytest-cov measures subprocesses by importing coverage (and its sqlite3) at start
    env = {k: v for k, v in daemon.env.items() if not k.startswith(("COV_CORE_", "COVERAGE_"))}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        env=env,
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
        skips = COLD_RUN_SKIPS if "--json" in args else COLD_RUN_SKIPS | JSON_PACKAGE
        assert not skips & set(modules), (args, sorted(skips & set(modules)))
    if args[0] == "submit":  # an agent's sbatch the hook redirected: as lean as `run`
        assert proc.stdout.strip().startswith("t"), proc.stdout + proc.stderr
        assert not COLD_RUN_SKIPS & set(modules), (args, sorted(COLD_RUN_SKIPS & set(modules)))
    if args[0] in ("find", "grep"):  # argparse, but not its terminal-width extras nor typing
        skips = {"shutil", "bz2", "lzma", "socket", "selectors", "typing"}
        assert not skips & set(modules), (args, sorted(skips & set(modules)))
