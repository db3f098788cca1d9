"""A real daemon records commands; the report reads its store (read-only) and classes them."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenantry.client.sync import socket_answers

from ..gateway.conftest import clean_env, remove_state, state_tempdir

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _env(state: str, **extra: str) -> dict[str, str]:
    return clean_env(state, PYTHONPATH=SRC, **extra)


def _until(cond: object, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


@pytest.fixture
def state() -> Iterator[str]:
    d = state_tempdir()
    log = (Path(d) / "daemon.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve"],
        env=_env(d),
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    try:
        _until(lambda: socket_answers(str(Path(d) / "sock")))
        yield d
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
        log.close()
        remove_state(d)


def _commands(db: Path) -> int:
    if not db.exists():
        return 0
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM commands").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def test_report_on_a_live_daemons_store(state: str) -> None:
    agent = _env(state, CLAUDECODE="1", CLAUDE_CODE_SESSION_ID="sess-1")
    for _ in range(3):
        subprocess.run(
            [sys.executable, "-m", "tenantry", "run", "--", "true"],
            env=agent,
            check=True,
            timeout=60,
            capture_output=True,
        )
    subprocess.run(
        [sys.executable, "-m", "tenantry", "run", "--", "true"],
        env=_env(state),
        check=True,
        timeout=60,
        capture_output=True,
    )
    db = Path(state) / "tenantry.sqlite3"
    _until(lambda: _commands(db) >= 4)
    out = subprocess.run(
        [sys.executable, "-m", "tenantry", "report", str(db), "--json"],
        env=_env(state),
        check=True,
        timeout=60,
        capture_output=True,
        text=True,
    )
    r = json.loads(out.stdout)
    assert r["telemetry"]["agent"]["commands"] == 3
    assert r["telemetry"]["human"]["commands"] == 1
    assert r["sessions"]["by_agent"] == {"claude-code": 1}
    assert r["inputs"][0]["kind"] == "telemetry"
