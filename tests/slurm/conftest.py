"""Fixtures for the Slurm backend tests (real Slurm from scripts/dev-slurm)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.agents.shims.install import install
from tenantry.backends.base import JobUpdate
from tenantry.backends.slurm import SlurmBackend
from tenantry.client.sync import socket_answers
from tenantry.core.models import AgentProduct, JobSpec, Principal, Resources
from tenantry.core.settings import load

from ..conftest import stop_daemon

ROOT = Path(__file__).resolve().parents[2]
DEV_SLURM = ROOT / "scripts" / "dev-slurm"
PIDS = Path("/var/lib/tenantry-dev-slurm/pids")

PRINCIPAL = Principal(
    uid=os.getuid(),
    user="tester",
    agent=AgentProduct.CLAUDE_CODE,
    session="sess-42;x",
    host="h",
    project="chem",
)


_MADE: list[str] = []  # directories the fixtures made, removed after the session


def _tempdir(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=prefix)
    _MADE.append(d)
    return d


@pytest.fixture(scope="session", autouse=True)
def _remove_made() -> Iterator[None]:
    yield
    remove_state: Callable[[str], None] = sys.modules["_tenantry_gateway_test_helpers"].remove_state
    for d in _MADE:
        remove_state(d)


def settings(**over: object):  # type: ignore[no-untyped-def]
    base = _tempdir("tnt-slurm-")
    return load(env={}, overrides={"state_dir": base, "backend": "slurm", **over})


@pytest.fixture
async def backend(slurm: None) -> AsyncIterator[SlurmBackend]:
    b = SlurmBackend(settings())
    await b.start()
    yield b
    await b.aclose()


@pytest.fixture
def workdir() -> Path:
    # /tmp is shared by the job (same host); keep each test's files apart
    return Path(_tempdir("tnt-sj-"))


def spec(workdir: Path, body: str, **kw: object) -> JobSpec:
    script = workdir / "job.sh"
    text = "#!/bin/bash\n" + body + "\n"
    script.write_text(text)
    return JobSpec(
        script=str(script),
        script_text=text,
        cwd=str(workdir),
        resources=kw.pop("resources", Resources(cpus=1, time_s=120)),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )


async def wait_until(
    backend: SlurmBackend,
    backend_id: str,
    done: Callable[[JobUpdate], bool],
    timeout: float = 30.0,
) -> JobUpdate:
    """Poll the backend until ``done`` holds for the job (deadline, no fixed sleep)."""
    deadline = time.monotonic() + timeout
    last: JobUpdate | None = None
    while time.monotonic() < deadline:
        got = await backend.query([backend_id])
        last = got.get(backend_id)
        if last is not None and done(last):
            return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {backend_id} did not get there in {timeout} s; last: {last}")


async def sacct_row(job_id: str, fields: str, timeout: float = 15.0) -> list[str]:
    """The job's sacct allocation row once its end has been recorded (~0.1-0.25 s)."""
    import subprocess

    deadline = time.monotonic() + timeout
    cells: list[str] = []
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["sacct", "-P", "-n", "-X", "-j", job_id, f"--format=State,{fields}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        cells = out.split("|") if out else []
        if cells and cells[0] not in {"", "PENDING", "RUNNING"} and any(cells[1:]):
            return cells[1:]
        await asyncio.sleep(0.1)
    raise AssertionError(f"sacct has no finished record of {job_id}: {cells}")


AGENT_MARKERS = ("CLAUDE", "CODEX", "GEMINI", "OPENCODE", "CURSOR", "OPENHANDS", "TENANTRY_")


class Env:
    def __init__(self, state: str, shims: Path, work: Path) -> None:
        self.state, self.shims, self.work = state, shims, work
        base = {k: v for k, v in os.environ.items() if not k.startswith(AGENT_MARKERS)}
        base.update(
            TENANTRY_STATE_DIR=state,
            TENANTRY_SOCKET=str(Path(state) / "sock"),
            TENANTRY_BACKEND="slurm",
            TENANTRY_POLL_FAST_S="0.2",
            TENANTRY_POLL_SLOW_S="1",
            TENANTRY_SLURM_TIMEOUT_S="4",
            PATH=f"{shims}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        )
        self.human = base
        self.agent = {**base, "CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "e2e-sess"}

    def client(self) -> Any:
        """A client of the daemon, as a Claude Code session would be."""
        from tenantry.client.sync import Client

        claims = {"agent": "claude-code", "session": "e2e-sess", "host": "t", "project": ""}
        return Client(load(env=self.human), autostart=False, claims=claims)

    def run(self, *argv: str, agent: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
        out: subprocess.CompletedProcess[str] = subprocess.run(
            list(argv),
            env=self.agent if agent else self.human,
            cwd=self.work,
            capture_output=True,
            text=True,
            timeout=60,
            **kw,
        )
        return out


@pytest.fixture
def env(slurm: None) -> Iterator[Env]:
    """A real daemon (slurm backend) and installed shims in a fresh work directory."""
    state = _tempdir("tnt-")
    os.chmod(state, 0o700)
    work = Path(_tempdir("tnt-shw-"))
    shims = work / "shims"
    install(shims)
    e = Env(state, shims, work)
    log = (Path(state) / "daemon.log").open("ab")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve"],
        env={**e.human, "PYTHONPATH": str(Path(install.__code__.co_filename).parents[3])},
        stdout=log,
        stderr=log,
        start_new_session=True,
    )
    deadline = time.monotonic() + 20
    while not socket_answers(str(Path(state) / "sock")):
        assert proc.poll() is None, (Path(state) / "daemon.log").read_text()
        assert time.monotonic() < deadline, "daemon did not start"
        time.sleep(0.05)
    try:
        yield e
    finally:
        stop_daemon(proc, Path(state) / "daemon.log")
        log.close()


@pytest.fixture(scope="session")
def timeout_job(slurm: None) -> str:
    """A job with a one-minute limit that sleeps longer, submitted once per session.

    Slurm limits are whole minutes and slurmctld checks them every 30 s, so the
    job times out 60-90 s after it starts: submitted by the first Slurm test,
    awaited by the last one (test_timeout.py).
    """

    async def submit() -> str:
        b = SlurmBackend(settings())
        await b.start()
        s = spec(
            Path(_tempdir("tnt-to-")),
            "sleep 600",
            name="tnt-timeout",
            resources=Resources(time_s=60),
        )
        return (await b.submit(s, PRINCIPAL, "t-timeout")).backend_id

    return asyncio.run(submit())
