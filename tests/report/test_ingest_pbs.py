"""PBS accounting logs (PBS Pro / OpenPBS and TORQUE) as a report input.

The records follow the layouts the PBS Professional and TORQUE administrator guides
document for ``server_priv/accounting/YYYYMMDD`` (written here, not copied).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from tenantry.report.ingest_pbs import looks_like, pairs, read_pbs
from tenantry.report.sources import load, sniff

T0 = 1_765_000_000  # 2025-12-06T05:46:40Z

TORQUE = [
    "12/06/2025 05:46:40;Q;501.head;queue=batch",
    f"12/06/2025 05:46:50;S;501.head;user=ana group=chem jobname=md queue=batch ctime={T0} "
    f"qtime={T0} etime={T0} start={T0 + 10} owner=ana@login1 exec_host=n1/0+n1/1+n2/0-1 "
    "Resource_List.nodes=2:ppn=2 Resource_List.walltime=01:00:00",
    f"12/06/2025 06:46:50;E;501.head;user=ana group=chem jobname=md queue=batch ctime={T0} "
    f"qtime={T0} etime={T0} start={T0 + 10} owner=ana@login1 exec_host=n1/0+n1/1+n2/0-1 "
    "Resource_List.nodes=2:ppn=2 Resource_List.walltime=01:00:00 session=4242 "
    f"end={T0 + 3610} Exit_status=0 resources_used.cput=03:59:10 resources_used.mem=812kb "
    "resources_used.vmem=2048kb resources_used.walltime=01:00:00",
    "12/06/2025 05:47:00;Q;502.head;queue=batch",
    "12/06/2025 05:48:00;D;502.head;requestor=ben@login1",
]
PBSPRO = [
    "12/06/2025 07:00:00;Q;7001[].srv;queue=workq",
    f"12/06/2025 07:00:05;E;7001[1].srv;user=ana group=chem project=p42 jobname=sweep "
    f"queue=workq ctime={T0 + 4000} qtime={T0 + 4000} etime={T0 + 4000} start={T0 + 4005} "
    "exec_host=g1/0*8 exec_vnode=(g1:ncpus=8:ngpus=2) Resource_List.ncpus=8 "
    "Resource_List.ngpus=2 Resource_List.nodect=1 Resource_List.select=1:ncpus=8:ngpus=2 "
    f"session=99 end={T0 + 5805} Exit_status=1 resources_used.cput=00:10:00 "
    "resources_used.ncpus=8 resources_used.walltime=00:30:00 run_count=1",
    f"12/06/2025 07:00:05;E;7002.srv;user=cai group=phys jobname=long queue=workq "
    f"ctime={T0 + 4000} start={T0 + 4100} end={T0 + 7700} exec_host=c1/0*4 "
    "Resource_List.ncpus=4 Exit_status=-29 resources_used.ncpus=4",
    f"12/06/2025 07:00:05;E;7003.srv;user=cai jobname=killed queue=workq ctime={T0 + 4000} "
    f"start={T0 + 4100} end={T0 + 4200} exec_host=c1/0 Resource_List.ncpus=1 Exit_status=271",
]


def _ts(epoch: int) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def test_pairs_keep_values_whole() -> None:
    kv = pairs("user=ana exec_vnode=(g1:ncpus=8) Resource_List.select=1:ncpus=8 jobname=a b")
    assert kv["exec_vnode"] == "(g1:ncpus=8)" and kv["Resource_List.select"] == "1:ncpus=8"
    assert kv["jobname"] == "a b"


def test_torque_jobs_cpus_from_exec_host_and_a_deleted_job(tmp_path: Path) -> None:
    log = tmp_path / "20251206"
    log.write_text("\n".join(TORQUE) + "\n")
    assert sniff(log) == "pbs" and looks_like(log.read_text())
    jobs = read_pbs(log).jobs.sort("job_id")
    ran, gone = jobs.row(0, named=True), jobs.row(1, named=True)
    assert (ran["job_id"], ran["user"], ran["partition"], ran["cluster"]) == (
        "501", "ana", "batch", "head"
    )  # fmt: skip
    assert ran["cpus"] == 4 and ran["elapsed_s"] == 3600 and ran["state"] == "COMPLETED"
    assert ran["start"] == _ts(T0 + 10) and ran["submit"] == _ts(T0)
    # deleted while queued: the requestor, no start, submitted when it was queued
    assert (gone["job_id"], gone["user"], gone["state"]) == ("502", "ben", "CANCELLED")
    assert gone["start"] is None and gone["submit"] == datetime(2025, 12, 6, 5, 47, tzinfo=UTC)


def test_pbspro_arrays_gpus_and_exit_states(tmp_path: Path) -> None:
    log = tmp_path / "20251206"
    log.write_text("\n".join(PBSPRO) + "\n")
    jobs = read_pbs(log).jobs.sort("job_id")
    assert jobs["job_id"].to_list() == ["7001_1", "7002", "7003"]  # the array's parent is not a job
    sub = jobs.row(0, named=True)
    assert (sub["cpus"], sub["gpus"], sub["account"], sub["state"]) == (8, 2, "p42", "FAILED")
    assert jobs["state"].to_list()[1:] == ["TIMEOUT", "CANCELLED"]  # -29: walltime; 256+15
    assert jobs.filter(pl.col("job_id") == "7001_1")["submission_id"].item().endswith(":7001")


def test_the_report_reads_it_with_other_inputs(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("\n".join(TORQUE) + "\nnot a record\n")
    b.write_text("\n".join(PBSPRO) + "\n")
    data = load([a, b])
    assert data.jobs.height == 5
    assert [u.line for s in data.stats for u in s.unreadable] == [6]
    assert all(any("behaviour only" in n for n in s.notes) for s in data.stats)
