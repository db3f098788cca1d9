"""Shared fixtures. Concept-specific fixtures live in tests/<concept>/conftest.py."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tenantry.core.models import Job, JobState, Principal


def new_job(who: Principal, **fields: Any) -> Job:
    """A job record as the journal first holds it (pending, nothing handed yet)."""
    now = time.time()
    base: dict[str, Any] = {
        "id": "",
        "backend": "local",
        "backend_id": "",
        "state": JobState.PENDING,
        "principal": who.key,
        "uid": who.uid,
        "name": "job",
        "submitted_at": now,
        "updated_at": now,
    }
    return Job(**{**base, **fields})


def run_tenantry(
    *args: str,
    env: dict[str, str],
    cwd: Path | None = None,
    input: str | None = None,
    timeout: float = 60,
    module: str = "tenantry",
) -> subprocess.CompletedProcess[str]:
    """``python -m tenantry ARGS`` (or another module) to its end, text output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        input=input,
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def slurm_up() -> bool:
    """True when a Slurm controller answers and a node is usable."""
    if shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=15
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and any(
        s.strip().rstrip("*~#!%$@^-") in {"idle", "mix", "alloc", "plnd", "comp"}
        for s in out.stdout.split()
    )


@pytest.fixture(scope="session")
def slurm() -> Iterator[None]:
    """Require a real Slurm (started by scripts/dev-slurm).

    Skipped when none is up, except with TENANTRY_REQUIRE_SLURM=1 (as in CI),
    where a missing Slurm fails the test instead.
    """
    if not slurm_up():
        if os.environ.get("TENANTRY_REQUIRE_SLURM") == "1":
            pytest.fail("Slurm is required (TENANTRY_REQUIRE_SLURM=1) but no controller answers")
        pytest.skip("no Slurm is up; start one with scripts/dev-slurm start")
    yield


@pytest.fixture
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # short path: Unix socket paths are limited to 107 bytes
    d = gw.state_tempdir()
    yield d
    gw.remove_state(d)


# -- a real daemon per test (helpers live in tests/gateway/conftest.py) ---------


def _gateway_helpers() -> ModuleType:
    name = "_tenantry_gateway_test_helpers"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(__file__).parent / "gateway" / "conftest.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gw = _gateway_helpers()
wait_for = gw.wait_for


@pytest.fixture
def start_daemon() -> Iterator[Callable[..., Any]]:
    started: list[Any] = []

    def start(files: dict[str, str] | None = None, **env: str) -> Any:
        state = gw.state_tempdir()
        for name, text in (files or {}).items():
            (Path(state) / name).write_text(text)
        env = {k: v.replace("{state}", state) for k, v in env.items()}
        d = gw.Daemon(
            state,
            gw.clean_env(
                state, TENANTRY_LOCAL_SLOTS="2", TENANTRY_POLL_FAST_S="0.1",
                TENANTRY_POLL_SLOW_S="0.5", **env,
            ),
        )  # fmt: skip
        d.start()
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()
        if os.environ.get("TENANTRY_TEST_SHOW_LOG"):
            sys.stderr.write(d.log())
        gw.remove_state(d.state)
