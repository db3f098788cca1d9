"""The sbatch/srun option registry and computed job shapes."""

from __future__ import annotations

import pytest

from tenantry.safety.policy.slurmopts import REGISTRY, JobShape, parse_time, script_directives


def shape(*argv: str, script: str = "", env: dict[str, str] | None = None) -> JobShape:
    return JobShape.build("sbatch", list(argv), script, env)


@pytest.mark.parametrize(
    ("argv", "gpus"),
    [
        (["--gpus-per-node=4", "-N", "3", "x"], 12),
        (["--gres=gpu:2", "-N2", "x"], 4),
        (["--gres=gpu:a100:2,nvme:1", "--nodes=2-3", "x"], 6),
        (["-G", "5", "x"], 5),
        (["--gpus=a100:3", "x"], 3),
        (["-n", "6", "--gpus-per-task=2", "x"], 12),
        (["--ntasks-per-node=2", "-N", "2", "--gpus-per-task=1", "x"], 4),
        (["--tres-per-task=gres/gpu:1", "-n", "3", "x"], 3),
        (["x"], 0),
    ],
)
def test_gpus_are_totalled(argv: list[str], gpus: int) -> None:
    assert shape(*argv).gpus == gpus


@pytest.mark.parametrize(
    ("spec", "seconds"),
    [("10", 600), ("1:30", 90), ("2:00:00", 7200), ("1-0", 86400), ("1-2:3", 93780),
     ("1-00:00:01", 86401), ("0", 0), ("UNLIMITED", 0), ("infinite", 0), ("x", None)],
)  # fmt: skip
def test_time_formats(spec: str, seconds: int | None) -> None:
    assert parse_time(spec) == seconds


def test_precedence_script_env_cli() -> None:
    script = "#!/bin/bash\n#SBATCH -p cpu\n#SBATCH --qos=long\necho\n#SBATCH --qos=late\n"
    assert script_directives(script) == ["-p", "cpu", "--qos=long"]
    s = shape("x.sh", script=script, env={"SBATCH_QOS": "debug"})
    assert (s.partitions, s.qos) == (["cpu"], "debug")
    s = shape("--qos=normal", "x.sh", script=script, env={"SBATCH_QOS": "debug"})
    assert s.qos == "normal"


def test_unknown_privileged_and_bad() -> None:
    s = shape("--frob", "--uid=0", "--time=zz", "--exclu", "x.sh", env={"SBATCH_NOPE": "1"})
    assert "--frob" in s.unknown and "--exclu" in s.unknown and "SBATCH_NOPE" in s.unknown
    assert s.privileged == ["--uid"]
    assert s.bad_values == ["--time=zz"]


def test_wrap_array_export_paths() -> None:
    s = shape("--wrap=sudo id", "--array=1-10:3,20", "--export=ALL,LD_PRELOAD=x",
              "-o", "out", "-i", "in")  # fmt: skip
    assert s.wrap == "sudo id" and s.array_size == 5
    assert s.env_names == {"LD_PRELOAD"} and s.writes == ["out"] and s.reads == ["in"]


def test_srun_stops_at_the_command_and_sees_jobid() -> None:
    s = JobShape.build("srun", ["--jobid=7", "-n2", "python", "x.py", "-p", "q"])
    assert s.positional == ["python", "x.py", "-p", "q"] and s.jobref == ["7"]
    assert s.partitions == []


def test_every_option_is_classified() -> None:
    classes = {"shape", "identity", "write", "read", "dir", "env", "wrap", "jobref",
               "privileged", "info", "plain"}  # fmt: skip
    for tool, (longs, shorts) in REGISTRY.items():
        assert len(longs) > 90 if tool == "sbatch" else len(longs) > 80
        for spec in [*longs.values(), *shorts.values()]:
            assert spec.cls in classes and spec.arg in ("y", "n", "o"), (tool, spec)


def test_scontrol_update_fields_read_as_the_options_they_change() -> None:
    from tenantry.safety.policy.slurmcmds import update_options

    fields = ["jobid=5", "TimeLimit=2-00:00:00", "QOS=long", "NumNodes=3", "Nice=-5",
              "TresPerNode=gres/gpu:2", "StdOut=/tmp/o", "ArrayTaskThrottle=4", "Contiguous=yes",
              "JobName=x"]  # fmt: skip
    opts = update_options(fields)
    assert opts == ["--time=2-00:00:00", "--qos=long", "--nodes=3", "--nice=-5",
                    "--gres=gpu:2", "--output=/tmp/o", "--contiguous"]  # fmt: skip
    shape = JobShape.build("sbatch", opts)
    assert (shape.time_s, shape.qos, shape.gpus) == (172800, "long", 6)  # 2 per node, 3 nodes
    assert not shape.unknown
