"""Helpers for the agent tests: real agent CLIs from npm and a fake model on 127.0.0.1.

The CLIs live outside the checkout (``scripts/install-agent-clis`` puts them
in ``/opt/tenantry-agents``; ``TENANTRY_AGENTS_DIR`` overrides). Tests skip
when a CLI is missing, except with ``TENANTRY_REQUIRE_AGENTS=1`` (as in CI),
where a missing CLI fails them. Each test gets its own HOME, project, state
directory and socket; the daemon the agent starts on demand is stopped after.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
AGENTS_DIR = Path(os.environ.get("TENANTRY_AGENTS_DIR", "/opt/tenantry-agents"))
BIN = AGENTS_DIR / "node_modules" / ".bin"

# no telemetry, no update checks, no error reports: the tests run offline
QUIET = {
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "NO_UPDATE_NOTIFIER": "1",
    "NO_COLOR": "1",
    "CI": "1",
}
# per agent, only in that agent's own runs: these names are also the agent markers
# that `tenantry` itself reads (an OPENCODE_* variable means "inside OpenCode")
QUIET_AGENT = {
    # MCP_TIMEOUT: the MCP server's start may take over Claude Code's default 30 s on a
    # loaded 2-core machine; without its tools the scripted session would end at once
    "claude": {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "MCP_TIMEOUT": "60000"},
    "gemini": {"GEMINI_TELEMETRY_ENABLED": "false", "GEMINI_CLI_NO_RELAUNCH": "true"},
    "opencode": {
        "OPENCODE_DISABLE_AUTOUPDATE": "true",
        "OPENCODE_DISABLE_SHARE": "true",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "true",
        "OPENCODE_DISABLE_MODELS_FETCH": "true",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true",
    },
}


def cli_path(name: str) -> str:
    """The installed CLI, or skip (fail under TENANTRY_REQUIRE_AGENTS=1)."""
    path = BIN / name
    if path.exists():
        return str(path)
    if os.environ.get("TENANTRY_REQUIRE_AGENTS") == "1":
        pytest.fail(f"{name} is required (TENANTRY_REQUIRE_AGENTS=1) but {path} is missing")
    pytest.skip(f"{name} is not installed in {BIN}; run scripts/install-agent-clis")


@dataclass
class Sandbox:
    """One agent session's world: HOME, project, Tenantry state and socket."""

    base: Path
    env: dict[str, str]

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def project(self) -> Path:
        return self.base / "proj"

    @property
    def state(self) -> Path:
        return self.base / "state"

    def tenantry(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [sys.executable, "-m", "tenantry", *args],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"tenantry {' '.join(args)} failed: {r.stdout}{r.stderr}")
        return r

    def tenantry_json(self, *args: str) -> Any:
        return json.loads(self.tenantry(*args, "--json").stdout)

    def agent_sessions(self) -> list[tuple[str, str]]:
        """(agent, session id) of every agent session the daemon knows of."""
        sessions = self.tenantry_json("sessions")["sessions"]
        return [(s["agent"], s["session"]) for s in sessions if s["agent"] != "human"]

    def run(
        self, argv: list[str], timeout: float = 240, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        quiet = QUIET_AGENT.get(Path(argv[0]).name, {})
        return subprocess.run(
            argv,
            cwd=self.project,
            env={**self.env, **quiet, **extra},
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )

    def snapshot(self, *roots: Path) -> dict[str, bytes]:
        """Every file under ``roots`` (default: the project), by path."""
        out: dict[str, bytes] = {}
        for root in roots or (self.project,):
            for p in sorted(root.rglob("*")):
                if p.is_file() and not p.is_symlink():
                    out[str(p.relative_to(self.base))] = p.read_bytes()
        return out


def reap(state: str | Path) -> None:
    """Stop a daemon that a test started on demand in ``state`` (by its pid)."""
    try:
        pid = int((Path(state) / "daemon.lock").read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        return
    if not pid:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)


def new_sandbox() -> Sandbox:
    base = Path(tempfile.mkdtemp(prefix="tnt-"))  # short: socket paths are limited
    os.chmod(base, 0o700)
    for d in ("home", "proj", "state"):
        (base / d).mkdir()
    keep = ("PATH", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "SHELL", "TMPDIR")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    venv_bin = str(Path(sys.executable).parent)
    env.update(QUIET)
    env.update(
        HOME=str(base / "home"),
        XDG_CONFIG_HOME=str(base / "home" / ".config"),
        XDG_DATA_HOME=str(base / "home" / ".local" / "share"),
        XDG_CACHE_HOME=str(base / "home" / ".cache"),
        PATH=os.pathsep.join([venv_bin, str(BIN), env.get("PATH", "/usr/bin:/bin")]),
        PYTHONPATH=str(SRC),
        TENANTRY_STATE_DIR=str(base / "state"),
        TENANTRY_SOCKET=str(base / "sock"),
        TENANTRY_BACKEND="local",
    )
    return Sandbox(base, env)


def close_sandbox(box: Sandbox) -> None:
    reap(box.state)
    shutil.rmtree(box.base, ignore_errors=True)
