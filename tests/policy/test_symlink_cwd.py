"""Programs named by relative paths are resolved from the command's cwd.

The measured hole: ``./lnk -u bob`` with ``lnk -> scancel`` ran, because the
symlink was looked up from the daemon's working directory.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tenantry.core.models import Principal
from tenantry.safety.policy.judge import Judge

SCANCEL = shutil.which("scancel") or "/usr/bin/scancel"


def test_relative_symlink_resolved_from_command_cwd(
    judge: Judge, agent: Principal, tmp_path: Path
) -> None:
    (tmp_path / "lnk").symlink_to(SCANCEL)
    assert os.getcwd() != str(tmp_path)
    d = judge.evaluate(agent, "run_command", {"command": "./lnk -u bob", "cwd": str(tmp_path)})
    assert not d.allowed
    assert d.rule == "agent-not-others-jobs"


def test_copied_slurm_client_judged_as_itself(
    judge: Judge, agent: Principal, tmp_path: Path
) -> None:
    if not Path(SCANCEL).exists():
        pytest.skip("no scancel binary on this machine to copy")
    copy = tmp_path / "tool"
    shutil.copy2(SCANCEL, copy)
    d = judge.evaluate(agent, "run_command", {"command": "./tool 1002", "cwd": str(tmp_path)})
    assert not d.allowed, d.message
    ok = judge.evaluate(agent, "run_command", {"command": "./other 1002", "cwd": str(tmp_path)})
    assert ok.allowed, ok.message
