"""A real daemon with the dashboard listener, for end-to-end tests."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tenantry.client.sync import socket_answers

SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass
class Daemon:
    env: dict[str, str]
    url: str
    token: str
    state: Path

    def cli(
        self, *args: str, stdin: str | None = None, agent: str = "", session: str = ""
    ) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if agent:
            env["TENANTRY_AGENT"] = agent
            env["TENANTRY_SESSION"] = session or f"{agent}-session-1"
        return subprocess.run(
            [sys.executable, "-m", "tenantry", *args],
            cwd=self.state,  # job output files land here, not in the checkout
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )


def _wait(pred: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.02
    while time.monotonic() < deadline:
        if pred():  # type: ignore[operator]
            return
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    raise TimeoutError(f"timed out waiting for {what}")


@pytest.fixture
def daemon(state_dir: str) -> Iterator[Daemon]:
    state = Path(state_dir)
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "TENANTRY_STATE_DIR": state_dir,
        "TENANTRY_SOCKET": f"{state_dir}/sock",
        "TENANTRY_BACKEND": "local",
    }
    env.pop("TENANTRY_AGENT", None)
    log = (state / "serve.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve", "--http", "127.0.0.1:0"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        found: list[str] = []

        def ready() -> bool:
            m = re.search(
                r"dashboard on (http://127\.0\.0\.1:\d+/)", (state / "serve.log").read_text()
            )
            if m and socket_answers(env["TENANTRY_SOCKET"]):  # listening means ready
                found.append(m.group(1))
                return True
            if proc.poll() is not None:
                raise RuntimeError((state / "serve.log").read_text())
            return False

        _wait(ready, 30, "the daemon")
        token = (state / "http-token").read_text().strip()
        yield Daemon(env, found[0].rstrip("/"), token, state)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
