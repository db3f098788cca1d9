"""Spellings of job options against the real ``sbatch --test-only`` of this machine.

For each spelling the canonical request's CPU count must equal the processors
sbatch says the job would use, and sbatch must accept the spelling (so the
model is not reading options Slurm would refuse).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tenantry.jobs.request import JobRequest

pytestmark = pytest.mark.slurm

# (command-line options, #SBATCH lines, expected cpus, gpus, time_s)
TABLE: list[tuple[list[str], str, int, int, int]] = [
    (["--time=5"], "", 1, 0, 300),
    (["-t", "0:90"], "", 1, 0, 90),
    (["--time=00:10:00", "-c", "3"], "", 3, 0, 600),
    ([], "#SBATCH --ntasks=2 --cpus-per-task=2\n#SBATCH --time=10", 4, 0, 600),
    (["-n", "3"], "#SBATCH -t 1:00", 3, 0, 60),
    (["--ntasks-per-node=2", "-N", "1"], "#SBATCH --time=7", 2, 0, 420),
    (["--cpus-per-task=2"], "#SBATCH -c 8\n#SBATCH --time=3", 2, 0, 180),  # CLI wins
    (["-p", "gpu", "--gres=gpu:1", "--time=5"], "", 1, 1, 300),
    (["-p", "gpu", "--gpus=2", "--time=5"], "", 1, 2, 300),
    (["-p", "gpu", "-G", "1", "--time=5"], "", 1, 1, 300),
    (["-p", "gpu", "--time=5"], "#SBATCH --gpus-per-node=2", 1, 2, 300),
    (["-p", "gpu", "--time=5"], "#SBATCH -n 2 --gpus-per-task=1", 2, 2, 300),
    (["--mem=0", "--time=5"], "", 1, 0, 300),
    (["--mem=1G", "--time=0-0:05"], "", 1, 0, 300),
]


def _processors(argv: list[str], script: Path) -> int:
    out = subprocess.run(
        ["sbatch", "--test-only", *argv, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    text = out.stdout + out.stderr
    assert out.returncode == 0, text
    m = re.search(r"using (\d+) processors", text)
    assert m, text
    return int(m.group(1))


@pytest.mark.parametrize(("argv", "directives", "cpus", "gpus", "time_s"), TABLE)
def test_spelling_matches_sbatch(
    slurm: None,
    tmp_path: Path,
    argv: list[str],
    directives: str,
    cpus: int,
    gpus: int,
    time_s: int,
) -> None:
    text = f"#!/bin/sh\n{directives}\ntrue\n"
    script = tmp_path / "job.sh"
    script.write_text(text)
    r = JobRequest.from_params(
        {"script": str(script), "script_text": text, "cwd": str(tmp_path), "extra": argv}
    )
    assert (r.shape.cpus, r.shape.gpus, r.shape.time_s) == (cpus, gpus, time_s)
    assert _processors(argv, script) == cpus
