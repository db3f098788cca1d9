"""A real daemon on a real socket, as a subprocess: one per module where isolation allows."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp.types import CallToolResult, TextContent

from tenantry.client.sync import Client, socket_answers
from tenantry.core.settings import Settings, load


def mcp_text(result: CallToolResult) -> str:
    """The text of an MCP tool result's first content block (our tools send text)."""
    block = result.content[0]
    assert isinstance(block, TextContent), block
    return block.text


def command_states(state: str | Path) -> list[str]:
    """The states of the commands the daemon's journal has committed (read-only).

    The bus's ``command.started`` comes before the spawn and the row after it, so
    a test that needs a command running waits for its row."""
    import sqlite3

    uri = (Path(state) / "tenantry.sqlite3").as_uri() + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as db:
            return [str(r[0]) for r in db.execute("SELECT state FROM commands")]
    except sqlite3.OperationalError:  # not created yet
        return []


def wait_for(cond: Any, timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll ``cond`` (backing off to 0.25 s) until it is truthy, and return its value;
    fail after ``timeout`` seconds. The one condition-wait of the tests."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(delay)
        delay = min(delay * 1.5, 0.25)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def state_tempdir(prefix: str = "tnt-") -> str:
    """A short 0700 directory for a daemon's state (Unix socket paths are short)."""
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o700)
    return d


def remove_state(state: str, timeout: float = 10.0) -> None:
    """Remove a test's state directory and everything it left running.

    Local jobs outlive their daemon by design (re-attached on restart), so
    their wrappers are ended first; then the directory is removed until it
    stays gone.
    """
    for status in Path(state).glob("local/jobs/*/status.json"):
        try:
            pid = int(json.loads(status.read_text()).get("pid") or 0)
        except (OSError, ValueError, AttributeError):
            continue
        if pid > 1:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while os.path.lexists(state):
        shutil.rmtree(state, ignore_errors=True)
        if time.monotonic() > deadline:
            raise AssertionError(f"{state} could not be removed")
        time.sleep(0.05)


@dataclass
class Daemon:
    state: str
    env: dict[str, str]
    extra_env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def socket(self) -> str:
        return str(Path(self.state) / "sock")

    @property
    def settings(self) -> Settings:
        return load(env=self.env)

    def start(self) -> None:
        log = (Path(self.state) / "daemon.log").open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tenantry", "serve"],
            env=self.env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        proc = self.proc

        def up() -> bool:
            if proc.poll() is not None:  # a daemon that died will not answer: say so now
                tail = (Path(self.state) / "daemon.log").read_text(errors="replace")[-2000:]
                raise AssertionError(f"the daemon exited ({proc.returncode}): {tail}")
            return socket_answers(self.socket)

        # a cold start on a loaded 2-core machine can take well over 15 s
        try:
            wait_for(up, timeout=60.0, what="daemon socket")
        except AssertionError:
            if proc.poll() is None:  # a daemon that never answered is not left running
                proc.kill()
                proc.wait(timeout=15)
            raise

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)
        self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGTERM)

    def client(self, **claims: str) -> Client:
        base = {"agent": "human", "session": "", "host": "test", "project": ""}
        base.update(claims)
        return Client(self.settings, autostart=False, claims=base)

    def cli(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        input: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        e = dict(self.env)
        e.update(env or {})
        return subprocess.run(
            [sys.executable, "-m", "tenantry", *args],
            env=e,
            cwd=cwd or self.state,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )

    def log(self) -> str:
        return (Path(self.state) / "daemon.log").read_text(errors="replace")


def clean_env(state: str, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("CLAUDE", "CODEX", "GEMINI", "OPENCODE", "CURSOR", "OPENHANDS", "TENANTRY_")
        )
    }
    env.update(TENANTRY_STATE_DIR=state, TENANTRY_SOCKET=str(Path(state) / "sock"))
    env.update(extra)
    return env


@contextlib.contextmanager
def daemons(**defaults: str) -> Iterator[Callable[..., Daemon]]:
    """Start real daemons, each on its own state directory (``files`` written into it
    first, ``{state}`` in an env value replaced by its path); all stopped and removed
    at the end. ``defaults`` are env settings every one of them gets."""
    started: list[Daemon] = []

    def start(files: dict[str, str] | None = None, **env: str) -> Daemon:
        state = state_tempdir()
        for name, text in (files or {}).items():
            (Path(state) / name).write_text(text)
        env = {k: v.replace("{state}", state) for k, v in env.items()}
        d = Daemon(state, clean_env(state, **{**defaults, **env}))
        d.start()
        started.append(d)
        return d

    try:
        yield start
    finally:
        for d in started:
            d.stop()
            if os.environ.get("TENANTRY_TEST_SHOW_LOG"):
                sys.stderr.write(d.log())
            remove_state(d.state)


def _daemon() -> Iterator[Daemon]:
    state = state_tempdir()
    d = Daemon(state, clean_env(state, TENANTRY_LOCAL_SLOTS="2", TENANTRY_POLL_SLOW_S="1"))
    d.start()
    try:
        yield d
    finally:
        d.stop()
        if os.environ.get("TENANTRY_TEST_SHOW_LOG"):
            sys.stderr.write(d.log())
        remove_state(state)


@pytest.fixture(scope="module")
def shared_daemon() -> Iterator[Daemon]:
    """One daemon for every test of a module that does not ask for its own."""
    yield from _daemon()


@pytest.fixture
def daemon(request: pytest.FixtureRequest) -> Iterator[Daemon]:
    """A real daemon: the module's shared one, or a fresh one for tests marked
    ``own_daemon`` (they kill it, change its files' modes, or count its first events)."""
    if request.node.get_closest_marker("own_daemon") is None:
        shared: Daemon = request.getfixturevalue("shared_daemon")
        assert shared.proc is not None and shared.proc.poll() is None, shared.log()
        yield shared
        return
    yield from _daemon()
