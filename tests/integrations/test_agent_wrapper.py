"""`tenantry install --wrapper DIR`: starting the agent goes through `tenantry agent`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tenantry.agents.wrapper import MARKER, write_wrappers
from tenantry.core.errors import UsageError

from ..conftest import stand_in


def test_wrapper_execs_tenantry_agent_with_the_real_program(tmp_path: Path) -> None:
    real_dir, wrap_dir = tmp_path / "real", tmp_path / "wrap"
    real = stand_in(real_dir, "codex", 'echo real codex "$@"')
    path = f"{wrap_dir}:{real_dir}:/usr/bin:/bin"
    (w,) = write_wrappers(["codex"], str(wrap_dir), path=path)
    text = Path(w["wrapper"]).read_text()
    assert MARKER in text and "agent --agent codex --" in text and str(real) in text
    # inside a sandbox already, the wrapper runs the real program directly
    env = {"PATH": path, "TENANTRY_SANDBOX": "1"}
    out = subprocess.run(["codex", "x"], env=env, capture_output=True, text=True, check=True)
    assert out.stdout == "real codex x\n"
    assert write_wrappers(["gemini-cli"], str(wrap_dir), path=path)[0]["skipped"]


def test_an_unrelated_program_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "codex").write_text("#!/bin/sh\n")
    real = tmp_path / "real"
    real.mkdir()
    (real / "codex").write_text("#!/bin/sh\n")
    os.chmod(real / "codex", 0o755)
    with pytest.raises(UsageError, match="not a Tenantry wrapper"):
        write_wrappers(["codex"], str(tmp_path / "bin"), path=str(real))
