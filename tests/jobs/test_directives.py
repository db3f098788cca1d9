from __future__ import annotations

import pytest

from tenantry.errors import UsageError
from tenantry.jobs import directives

SCRIPT = """#!/bin/bash
# a comment
#SBATCH --time=0:30:00
#SBATCH -c 4 --mem 8G   # inline comment
#SBATCH -J train -o logs/%j.out
#SBATCH --constraint=skylake
#SBATCH -G2

module load cuda
#SBATCH --time=99:00:00
srun python train.py
"""


def test_parse_stops_at_first_command() -> None:
    found = directives.parse(SCRIPT)
    assert found["resources"] == {"time_s": 1800, "cpus": 4, "mem_mb": 8192, "gpus": 2}
    assert (found["name"], found["output"]) == ("train", "logs/%j.out")


def test_command_line_wins() -> None:
    out = directives.apply(
        {"script_text": SCRIPT, "resources": {"cpus": 2}, "name": "", "output": "x.out"}
    )
    assert out["resources"] == {"cpus": 2, "time_s": 1800, "mem_mb": 8192, "gpus": 2}
    assert (out["name"], out["output"]) == ("train", "x.out")


def test_bad_directive() -> None:
    with pytest.raises(UsageError, match="time"):
        directives.parse("#!/bin/sh\n#SBATCH --time=forever\n")
    with pytest.raises(UsageError):
        directives.parse("#!/bin/sh\n#SBATCH -c four\n")
