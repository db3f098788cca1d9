"""Through the real daemon: GPUs asked in #SBATCH lines are charged like flags.

The measured hole: a 10 GPU-h budget refused ``--gpus 8 --time 12:00:00`` on
the request but accepted the same job three times as ``#SBATCH`` lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import BudgetExceeded

BUDGETS = """
replace_defaults = true
[session.day]
gpu_hours = 10
"""

DIRECTIVES = "#!/bin/sh\n#SBATCH --gpus=8\n#SBATCH --time=12:00:00\ntrue\n"


def test_sbatch_directive_gpus_are_refused_by_the_budget(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon({"budgets.toml": BUDGETS}, TENANTRY_BUDGETS_FILE="{state}/budgets.toml")
    agent = d.client(agent="codex", session="s1")
    script = tmp_path / "train.sh"
    script.write_text(DIRECTIVES)
    params = {"script": str(script), "script_text": DIRECTIVES, "cwd": str(tmp_path)}
    with pytest.raises(BudgetExceeded) as info:
        agent.call("jobs.submit", params)
    assert "GPU-hour" in info.value.message
    # the same through the CLI an agent would run
    env = {"TENANTRY_AGENT": "codex", "TENANTRY_SESSION": "s1"}
    cli = d.cli("submit", str(script), env=env, cwd=str(tmp_path))
    assert cli.returncode == 77, cli.stdout + cli.stderr
    # a small job still fits
    small = "#!/bin/sh\n#SBATCH --gpus=1\n#SBATCH --time=60\ntrue\n"
    ok = agent.call("jobs.submit", {**params, "script_text": small})
    assert ok["job"]["id"]
