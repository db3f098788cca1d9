"""Fixtures for sandbox tests: a real normal Unix user and a Python it can run."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the tests' helpers module (importlib mode)
from sandbox_helpers import User

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _bwrap_or_skip() -> str:
    from tenantry.errors import SandboxUnavailable
    from tenantry.sandbox.bwrap import find_bwrap

    try:
        return find_bwrap()
    except SandboxUnavailable as err:
        pytest.skip(f"no usable bubblewrap: {err.message}")


def _python_for(uid: int) -> tuple[str, str]:
    """A Python the user may execute that imports this checkout and its deps."""
    site = sysconfig.get_paths()["purelib"]
    path = os.pathsep.join([SRC, site])
    for exe in ("/usr/bin/python3", os.path.realpath(sys.executable)):
        probe = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", exe, "-c",
             "import sys, uvicorn, starlette, tenantry; print(sys.version_info[:2])"],
            env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"},
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if probe.returncode == 0 and probe.stdout.strip() == str(tuple(sys.version_info[:2])):
            return exe, path
    pytest.skip("no Python that a normal user can run imports this checkout and its deps")


@pytest.fixture
def unix_user() -> Iterator[User]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create a normal Unix user (CI runs as root)")
    if shutil.which("useradd") is None or shutil.which("setpriv") is None:
        pytest.skip("needs useradd and setpriv")
    _bwrap_or_skip()
    name = "tsbx" + secrets.token_hex(3)
    subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
    try:
        pw = pwd.getpwnam(name)
        python, pythonpath = _python_for(pw.pw_uid)
        yield User(name, pw.pw_uid, Path(pw.pw_dir), python, pythonpath)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", "-r", "-f", name], check=False, capture_output=True)
