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
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _bwrap_or_skip() -> str:
    from tenantry.errors import SandboxUnavailable
    from tenantry.sandbox.bwrap import find_bwrap

    try:
        return find_bwrap()
    except SandboxUnavailable as err:
        pytest.skip(f"no usable bubblewrap: {err.message}")


@dataclass
class User:
    name: str
    uid: int
    home: Path
    python: str
    pythonpath: str

    def env(self, **extra: str) -> dict[str, str]:
        env = {
            "HOME": str(self.home),
            "USER": self.name,
            "LOGNAME": self.name,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "PYTHONPATH": self.pythonpath,
        }
        env.update(extra)
        return env

    def run(
        self, argv: list[str], *, cwd: Path, timeout: float = 120, **extra: str
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--init-groups", *argv],
            cwd=cwd,
            env=self.env(**extra),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def tenantry(self, *args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        return self.run([self.python, "-m", "tenantry", *args], cwd=cwd, **extra)


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
