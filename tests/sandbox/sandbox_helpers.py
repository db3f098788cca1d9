"""Helpers of the sandbox tests: a real normal Unix user and how to run as it."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


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
        self, argv: list[str], *, cwd: Path, extra: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--init-groups", *argv],
            cwd=cwd,
            env=self.env(**(extra or {})),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    def tenantry(self, *args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
        return self.run([self.python, "-m", "tenantry", *args], cwd=cwd, extra=extra)
