"""Whether a real Slurm is up: the probe behind the tests' ``slurm`` fixture and the benches.

Standard library only, so a benchmark can import it without pytest.
"""

from __future__ import annotations

import shutil
import subprocess


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
