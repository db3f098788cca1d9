"""The one job request model: every source of sbatch options merged as Slurm does."""

from __future__ import annotations

import pytest

from tenantry.core.errors import UsageError
from tenantry.jobs.request import JobRequest
from tenantry.safety.budgets.service import amounts_for

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


def req(**params: object) -> JobRequest:
    base: dict[str, object] = {"script": "/p/job.sh", "script_text": "#!/bin/sh\ntrue\n"}
    base.update(params)
    return JobRequest.from_params(base)


def test_directives_stop_at_first_command() -> None:
    r = req(script_text=SCRIPT)
    assert (r.shape.time_s, r.shape.cpus, r.shape.mem_mb, r.shape.gpus) == (1800, 4, 8192, 2)
    out = r.spec_params()
    assert out["resources"] == {"time_s": 1800, "cpus": 4, "mem_mb": 8192, "gpus": 2}
    assert (out["name"], out["output"]) == ("train", "logs/%j.out")


def test_command_line_wins_over_env_over_directives() -> None:
    r = req(
        script_text="#!/bin/sh\n#SBATCH --time=10\n#SBATCH -c 2\n#SBATCH -p debug\ntrue\n",
        env={"SBATCH_TIMELIMIT": "20", "SBATCH_PARTITION": "gpu", "HOME": "/h"},
        resources={"cpus": 8},
    )
    assert r.shape.time_s == 1200  # env over #SBATCH
    assert r.shape.cpus == 8  # the API field (command line) over both
    assert r.shape.partitions == ["gpu"]
    assert r.spec_params()["resources"] == {"cpus": 8, "time_s": 1200, "partition": "gpu"}


def test_sbatch_directives_are_priced() -> None:
    """The measured bypass: GPUs asked in #SBATCH lines were never charged."""
    params = {
        "script": "/p/job.sh",
        "script_text": "#!/bin/sh\n#SBATCH --gpus=8\n#SBATCH --time=12:00:00\nsrun x\n",
    }
    a = amounts_for("submit_job", params)
    assert a["gpu_hours"] == 96.0


@pytest.mark.parametrize(
    ("directives", "gpus"),
    [
        ("#SBATCH --nodes=2 --gpus-per-node=4", 8),
        ("#SBATCH -N 2 --gres=gpu:a100:2", 4),
        ("#SBATCH --gres=gpu:3", 3),
        ("#SBATCH --ntasks=4 --gpus-per-task=1", 4),
        ("#SBATCH -G 2", 2),
        ("#SBATCH --gpus=a100:2", 2),
    ],
)
def test_every_gpu_spelling_is_counted_by_pricing(directives: str, gpus: int) -> None:
    text = f"#!/bin/sh\n{directives}\n#SBATCH --time=60\nsrun x\n"
    a = amounts_for("submit_job", {"script": "/p/j.sh", "script_text": text})
    assert a["gpu_hours"] == float(gpus)


def test_ntasks_times_cpus_per_task_is_priced() -> None:
    text = "#!/bin/sh\n#SBATCH --ntasks=4 --cpus-per-task=2 --time=2:00:00\nsrun x\n"
    a = amounts_for("submit_job", {"script": "/p/j.sh", "script_text": text, "array": "0-2"})
    assert a == {"jobs": 3.0, "core_hours": 48.0, "gpu_hours": 0.0}


def test_extra_options_are_priced() -> None:
    a = amounts_for(
        "submit_job",
        {"script": "/p/j.sh", "script_text": "", "extra": ["--gpus-per-node=2", "--time=30"]},
    )
    assert a["gpu_hours"] == 1.0


def test_mem_zero_is_left_to_sbatch() -> None:
    """--mem=0 (all of each node's memory) must never become --mem=1M."""
    r = req(script_text="#!/bin/sh\n#SBATCH --mem=0\ntrue\n")
    assert r.shape.exclusive
    assert "mem_mb" not in r.spec_params()["resources"]


def test_bare_minutes_and_units() -> None:
    r = req(script_text="#!/bin/sh\n#SBATCH --time=90\n#SBATCH --mem=2G\ntrue\n")
    assert (r.shape.time_s, r.shape.mem_mb) == (5400, 2048)
    assert req(resources={"time_s": 61}).shape.time_s == 120  # rounded up to minutes


def test_chdir_resolves_relative_output() -> None:
    r = req(cwd="/home/alice/proj", extra=["--chdir=/home/alice/.ssh"])
    assert r.path("authorized_keys") == "/home/alice/.ssh/authorized_keys"
    rel = req(cwd="/home/alice/proj", script_text="#!/bin/sh\n#SBATCH -D sub\ntrue\n")
    assert rel.path("x.out") == "/home/alice/proj/sub/x.out"
    assert rel.spec_params()["cwd"] == "/home/alice/proj/sub"


def test_unreadable_values_refused_at_submission() -> None:
    with pytest.raises(UsageError, match="time"):
        req(script_text="#!/bin/sh\n#SBATCH --time=forever\ntrue\n").checked()
    with pytest.raises(UsageError):
        req(script_text="#!/bin/sh\n#SBATCH -c four\ntrue\n").checked()
    with pytest.raises(UsageError):
        amounts_for("submit_job", {"resources": {"cpus": "many"}})
