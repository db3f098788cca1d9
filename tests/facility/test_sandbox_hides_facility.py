"""A sandboxed agent cannot reach the facility service's socket (only its session socket).

The service takes any local uid, so an agent that reached it could describe
itself as its human. Real bubblewrap, a real listening socket outside /tmp
(the sandbox's /tmp is its own anyway).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenantry.safety.sandbox import profile

PROBE = "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('ok')"


@pytest.fixture
def facility_socket() -> Iterator[str]:
    base = "/run" if os.access("/run", os.W_OK) else "/var/tmp"
    d = tempfile.mkdtemp(prefix="tt-i16b-fac-", dir=base)
    os.chmod(d, 0o755)
    path = os.path.join(d, "facility.sock")
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(path)
    srv.listen(8)
    try:
        yield path
    finally:
        srv.close()
        shutil.rmtree(d, ignore_errors=True)


def _run(tmp_path: Path, sock: str, hide: str) -> subprocess.CompletedProcess[str]:
    from tenantry.core.errors import SandboxUnavailable
    from tenantry.safety.sandbox.bwrap import find_bwrap

    try:
        bwrap = find_bwrap()
    except SandboxUnavailable as err:
        pytest.skip(f"no usable bubblewrap: {err.message}")
    home = tmp_path / "home"
    (home / "p").mkdir(parents=True, exist_ok=True)
    paths = profile.SessionPaths(
        home=str(home), project=str(home / "p"), state_dir=str(tmp_path / "state"),
        session_dir=str(tmp_path / "sess"), inside_runtime=str(tmp_path / "rt"),
    )  # fmt: skip
    (tmp_path / "sess").mkdir(exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    extra = [d for d in hide.split(",") if d]
    argv = profile.bwrap_argv(
        bwrap, paths, [sys.executable, "-c", PROBE, sock], env, extra_hidden=extra,
        keep_visible=[os.path.dirname(os.path.realpath(sys.executable))],
    )  # fmt: skip
    with contextlib.suppress(ValueError):
        argv[argv.index("--chdir") + 1] = str(home)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)


def test_the_facility_socket_is_hidden_from_sandboxed_agents(
    tmp_path: Path, facility_socket: str
) -> None:
    seen = _run(tmp_path, facility_socket, "")
    if seen.returncode != 0 and "ok" not in seen.stdout:
        pytest.skip(f"bubblewrap cannot run the probe here: {seen.stderr.strip()[-300:]}")
    assert seen.stdout.strip() == "ok"  # without hiding it, an agent would reach it
    hide = profile.hidden_extra("", "", facility_socket)
    assert hide == os.path.dirname(facility_socket)
    hidden = _run(tmp_path, facility_socket, hide)
    assert hidden.returncode != 0 and "ok" not in hidden.stdout
    assert "FileNotFoundError" in hidden.stderr or "ConnectionRefused" in hidden.stderr
