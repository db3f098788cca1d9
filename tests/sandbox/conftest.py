"""Fixtures for sandbox tests: a real normal Unix user and a Python it can run."""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .sandbox_helpers import User

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _bwrap_or_skip() -> str:
    from tenantry.core.errors import SandboxUnavailable
    from tenantry.safety.sandbox.bwrap import find_bwrap

    try:
        return find_bwrap()
    except SandboxUnavailable as err:
        pytest.skip(f"no usable bubblewrap: {err.message}")


def _probe(exe: str, uid: int, path: str) -> bool:
    probe = subprocess.run(
        ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", exe, "-c",
         "import sys, uvicorn, starlette, tenantry; print(sys.version_info[:2])"],
        env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin"},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return probe.returncode == 0 and probe.stdout.strip() == str(tuple(sys.version_info[:2]))


def _python_for(uid: int, mounts: list[str]) -> tuple[str, str]:
    """A Python the user may execute that imports this checkout and its deps.

    When the checkout or its virtualenv is not readable by others (a clone under
    /root), they are bind-mounted read-only under /var/tmp (visible inside the
    sandbox, unlike /tmp), which the test removes afterwards.
    """
    site = sysconfig.get_paths()["purelib"]
    exes = ("/usr/bin/python3", os.path.realpath(sys.executable))
    for exe in exes:
        if _probe(exe, uid, os.pathsep.join([SRC, site])):
            return exe, os.pathsep.join([SRC, site])
    base = tempfile.mkdtemp(prefix="tsbx-", dir="/var/tmp")
    os.chmod(base, 0o755)
    mounts.append(base)
    for name, source in (("src", SRC), ("site", site)):
        os.mkdir(os.path.join(base, name))
        subprocess.run(["mount", "--bind", source, os.path.join(base, name)], check=True)
        subprocess.run(["mount", "-o", "remount,bind,ro", os.path.join(base, name)], check=False)
    path = os.pathsep.join([os.path.join(base, "src"), os.path.join(base, "site")])
    for exe in exes:
        if _probe(exe, uid, path):
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
    mounts: list[str] = []
    try:
        pw = pwd.getpwnam(name)
        python, pythonpath = _python_for(pw.pw_uid, mounts)
        yield User(name, pw.pw_uid, Path(pw.pw_dir), python, pythonpath)
    finally:
        subprocess.run(["pkill", "-KILL", "-u", name], check=False)
        subprocess.run(["userdel", "-r", "-f", name], check=False, capture_output=True)
        for base in mounts:
            for sub in ("src", "site"):
                subprocess.run(["umount", os.path.join(base, sub)], check=False)
            for d in (os.path.join(base, "src"), os.path.join(base, "site"), base):
                with contextlib.suppress(OSError):  # never rmtree: a mount may remain
                    os.rmdir(d)
