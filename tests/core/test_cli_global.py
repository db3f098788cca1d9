"""The CLI's global options, --version, stop, doctor and unusable state, as a person meets them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenantry.client.sync import socket_answers

from ..conftest import run_tenantry, stand_in

SRC = Path(__file__).resolve().parents[2] / "src"


def _env(state: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("CLAUDE", "CODEX", "GEMINI", "OPENCODE", "CURSOR", "TENANTRY_"))
    }
    env.update(
        PYTHONPATH=str(SRC),
        TENANTRY_STATE_DIR=str(state),
        TENANTRY_SOCKET=str(state / "sock"),
        TENANTRY_BACKEND="local",
    )
    return env


def cli(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_tenantry(*args, env=env, cwd=cwd)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[Path]:
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="tnt-"))  # short: socket paths are limited
    yield d
    env = _env(d)
    subprocess.run([sys.executable, "-m", "tenantry", "stop"], env=env, timeout=60)
    import shutil

    shutil.rmtree(d, ignore_errors=True)


def test_jobs_state_filter_is_not_the_state_directory(state: Path, tmp_path: Path) -> None:
    env = _env(state)
    r = cli("jobs", "--state", "COMPLETED", "--json", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["jobs"] == []
    assert list(tmp_path.iterdir()) == [], "a state directory appeared in the cwd"
    assert (state / "daemon.lock").exists(), "the daemon uses TENANTRY_STATE_DIR"
    r = cli("--state-dir", str(state), "jobs", "--json", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_unusable_state_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = _env(blocker / "state")
    r = cli("jobs", env=env, cwd=tmp_path)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    assert "cannot use the state directory" in r.stderr and "hint:" in r.stderr


def test_version(tmp_path: Path) -> None:
    from tenantry import __version__

    r = cli("--version", env=_env(tmp_path), cwd=tmp_path)
    assert (r.returncode, r.stdout.strip()) == (0, f"tenantry {__version__}")


def test_stop_stops_the_daemon(state: Path, tmp_path: Path) -> None:
    env = _env(state)
    assert cli("jobs", env=env, cwd=tmp_path).returncode == 0  # starts one on demand
    pid = int((state / "daemon.lock").read_text())
    r = cli("stop", "--json", env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"stopped": True, "pid": pid, "state_dir": str(state)}
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists()
    again = cli("stop", "--json", env=env, cwd=tmp_path)
    assert json.loads(again.stdout)["stopped"] is False


def test_doctor_names_what_to_fix(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    env = _env(blocker / "state")
    env["HOME"] = str(tmp_path)
    r = cli("doctor", "--json", env=env, cwd=tmp_path)
    rows = {row["check"]: row for row in json.loads(r.stdout)}
    assert r.returncode == 1
    assert rows["state"]["ok"] is False and "TENANTRY_STATE_DIR" in rows["state"]["fix"]
    assert {"daemon", "backend", "sandbox"} <= set(rows)


def test_doctor_names_the_agent_config_that_drifted(tmp_path: Path) -> None:
    """An installed agent whose config lost Tenantry's entry is named, file and all."""
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    env = _env(tmp_path / "state") | {"HOME": str(home)}
    assert cli("install", "--agent", "claude-code", "--yes", env=env, cwd=proj).returncode == 0
    rows = {r["check"]: r for r in json.loads(cli("doctor", "--json", env=env, cwd=proj).stdout)}
    assert rows["agent claude-code (project)"]["ok"] is True
    mcp = proj / ".mcp.json"
    mcp.write_text('{"mcpServers": {}}\n')  # the user (or an agent) dropped Tenantry's server
    r = cli("doctor", "--json", env=env, cwd=proj)
    row = {r["check"]: r for r in json.loads(r.stdout)}["agent claude-code (project)"]
    assert r.returncode == 1 and row["ok"] is False
    assert str(mcp) in row["detail"] and "tenantry install --agent claude-code" in row["fix"]


def test_serve_http_takes_over_from_a_daemon_started_on_demand(state: Path, tmp_path: Path) -> None:
    env = _env(state)
    assert cli("jobs", env=env, cwd=tmp_path).returncode == 0  # a daemon without HTTP
    old = int((state / "daemon.lock").read_text())
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve", "--http", "127.0.0.1:0"],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        text = ""
        while time.monotonic() < deadline and not (
            "dashboard on http://" in text and socket_answers(str(state / "sock"))
        ):
            assert proc.poll() is None, (tmp_path / "serve.log").read_text()
            time.sleep(0.1)
            text = (tmp_path / "serve.log").read_text()
        assert "dashboard on http://" in text, text
        assert f"stopped the running daemon (pid {old})" in text
        assert cli("jobs", env=env, cwd=tmp_path).returncode == 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_bash_completion_completes_commands_and_options(tmp_path: Path) -> None:
    import shutil

    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    env = _env(tmp_path)
    script = cli("completion", "bash", env=env, cwd=tmp_path)
    assert script.returncode == 0, script.stderr
    bindir = tmp_path / "bin"
    stand_in(bindir, "tenantry", f'exec {sys.executable} -m tenantry "$@"')
    env["PATH"] = f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}"
    probe = (
        script.stdout
        + 'COMP_WORDS=(tenantry st); COMP_CWORD=1; _tenantry; echo "${COMPREPLY[*]}"\n'
        + 'COMP_WORDS=(tenantry jobs --st); COMP_CWORD=2; _tenantry; echo "${COMPREPLY[*]}"\n'
    )
    r = subprocess.run(["bash", "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    first, second = r.stdout.splitlines()[:2]
    assert {"status", "stop"} <= set(first.split()), r.stdout + r.stderr
    assert "--state" in second.split(), r.stdout + r.stderr
