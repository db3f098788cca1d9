"""Live: submit to the real Slurm, dump with sacct, parse (needs scripts/dev-slurm)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from tenantry.core.attribution import encode
from tenantry.core.models import AgentProduct, Principal
from tenantry.report.ingest_json import read_json
from tenantry.report.ingest_sacct import XDMOD_FIELDS, read_sacct

pytestmark = pytest.mark.slurm


def _sbatch(*args: str) -> str:
    out = subprocess.run(
        ["sbatch", "--parsable", "-t", "2", "--chdir=/tmp", "-o", "/dev/null", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout.strip().split(";")[0]


def _out(argv: list[str], env: dict[str, str]) -> str:
    """The standard output of a command that must succeed within a minute."""
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=60, check=True, env=env
    ).stdout


def _done(ids: list[str]) -> bool:
    out = subprocess.run(
        ["squeue", "-h", "-j", ",".join(ids), "-o", "%i"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.returncode == 0 and out.stdout.strip() == ""


def test_live_sacct_dumps_parse(slurm: None, tmp_path: Path) -> None:
    tag = encode(Principal(uid=0, user="x", agent=AgentProduct.CODEX, session="live"))
    ids = [
        _sbatch("-J", "rpt-live|pipe", "--comment", tag, "--wrap", "echo a | tr a b"),
        _sbatch("-J", "rpt-live-fail", "--wrap", "exit 2"),
        _sbatch("-J", "rpt-live-arr", "--array=1-2", "--wrap", "true"),
    ]
    deadline = time.monotonic() + 180
    while not _done(ids):
        assert time.monotonic() < deadline, "jobs did not finish in 180 s"
        time.sleep(1)
    env = {"TZ": "UTC", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    # name the array tasks too: sacct -j <master> alone may list only one task
    jobs = ",".join([*ids, f"{ids[2]}_1", f"{ids[2]}_2"])
    xdmod = tmp_path / "x.txt"
    fmt = ",".join(XDMOD_FIELDS)
    argv = ["sacct", "--allusers", "--parsable2", "--noheader", "--allocations", "--duplicates"]
    argv += [f"--format={fmt}", "-j", jobs]
    # slurmdbd records end states asynchronously: wait until all four are final there
    while True:
        text = _out(argv, env)
        states = [line.split("|")[16] for line in text.splitlines() if line[:1].isdigit()]
        if len(states) == 4 and all(s in ("COMPLETED", "FAILED") for s in states):
            break
        assert time.monotonic() < deadline, f"sacct never showed the end states: {states}"
        time.sleep(1)
    xdmod.write_text(text)
    wide = tmp_path / "w.txt"
    wide.write_text(
        _out(
            [
                "sacct",
                "--allusers",
                "--parsable2",
                "--allocations",
                "--duplicates",
                "--format=JobID,User,Submit,Start,End,ElapsedRaw,State,AllocCPUS,AllocTRES,"
                "JobName,Comment,SubmitLine,WorkDir",
                "-j",
                jobs,
            ],
            env,
        )
    )
    js = tmp_path / "j.json"
    js.write_text(_out(["sacct", "--allusers", "--json", "-j", jobs], env))
    a, b, c = read_sacct(xdmod), read_sacct(wide), read_json(js)
    for d in (a, b, c):
        assert d.stats[0].unreadable == []
        assert d.jobs.height == 4  # one job, one failing job, two array tasks
        assert d.jobs["submission_id"].n_unique() == 3
    w = b.jobs
    piped = w.filter(pl.col("name") == "rpt-live|pipe").row(0, named=True)
    assert piped["comment"] == tag and piped["submit_line"].endswith("echo a | tr a b")
    assert w.filter(pl.col("name") == "rpt-live-fail")["state"].to_list() == ["FAILED"]
