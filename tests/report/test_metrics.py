"""Formulas: window clipping, core/GPU-hours, submissions, shares and bounds, command rate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest

from tenantry.report import metrics, window
from tenantry.report.schema import JOB_SCHEMA, Dataset, conform

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)  # a Monday


def job(**kw: Any) -> dict[str, Any]:
    start = kw.pop("start", T0)
    elapsed = kw.pop("elapsed_s", 3600)
    end = kw.pop("end", None if start is None else start + timedelta(seconds=elapsed))
    row = {
        "source": "t",
        "job_id": "1",
        "submission_id": ":1",
        "user": "u",
        "state": "COMPLETED",
        "submit": kw.pop("submit", T0),
        "start": start,
        "end": end,
        "elapsed_s": elapsed,
        "cpus": 1,
        "gpus": 0,
    }
    row.update(kw)
    return row


def dataset(rows: list[dict[str, Any]]) -> Dataset:
    return Dataset(jobs=conform(pl.DataFrame(rows, schema=JOB_SCHEMA), JOB_SCHEMA))


def test_core_hours_use_elapsed_raw_not_end_minus_start() -> None:
    # suspended for an hour: wall clock 3 h, ElapsedRaw 2 h
    rows = [job(cpus=8, elapsed_s=7200, end=T0 + timedelta(hours=3))]
    r = metrics.build(dataset(rows))
    assert r["headline"]["core_hours"]["total"] == pytest.approx(16.0)


def test_gpu_hours_and_submissions_per_array_and_het() -> None:
    rows = [
        job(job_id="5_1", submission_id=":5", cpus=2, gpus=1),
        job(job_id="5_2", submission_id=":5", cpus=2, gpus=1),
        job(job_id="5_[3-4]", submission_id=":5", start=None, elapsed_s=0, state="PENDING"),
        job(job_id="6+0", submission_id=":6", cpus=1),
        job(job_id="6+1", submission_id=":6", cpus=3),
        job(job_id="7", submission_id=":7", start=None, elapsed_s=0, state="CANCELLED"),
    ]
    r = metrics.build(dataset(rows))
    h = r["headline"]
    assert h["submissions"]["total"] == 3  # array, het, and the never-started job
    assert h["core_hours"]["total"] == pytest.approx(8.0)
    assert h["gpu_hours"]["total"] == pytest.approx(2.0)


def test_requeued_runs_add_usage_but_not_submissions() -> None:
    rows = [
        job(state="REQUEUED", elapsed_s=600, cpus=4),
        job(start=T0 + timedelta(hours=1), elapsed_s=3600, cpus=4),
    ]
    r = metrics.build(dataset(rows))
    assert r["headline"]["submissions"]["total"] == 1
    assert r["headline"]["core_hours"]["total"] == pytest.approx(4 * 4200 / 3600, abs=1e-3)


def test_window_clips_usage_proportionally_and_counts_submissions_inside() -> None:
    since, until = T0 + timedelta(hours=1), T0 + timedelta(hours=3)
    rows = [
        job(job_id="1", submission_id=":1", elapsed_s=4 * 3600, cpus=1),  # 10:00-14:00
        *(
            job(job_id=n, submission_id=f":{n}", submit=at, start=at, elapsed_s=600)
            for n, at in (("2", T0 + timedelta(hours=2)), ("3", T0 + timedelta(hours=5)))
        ),
    ]
    jobs, w = window.apply(dataset(rows).jobs, since, until)
    assert w.since == since and w.until == until
    used = dict(zip(jobs["job_id"], jobs["used_s"], strict=True))
    assert used == {"1": pytest.approx(7200.0), "2": pytest.approx(600.0)}
    assert jobs.filter(pl.col("counted"))["job_id"].to_list() == ["2"]


def test_running_job_at_window_end_is_clipped() -> None:
    # still running at dump time: no End, ElapsedRaw so far = 5 h
    rows = [job(end=None, state="RUNNING", elapsed_s=5 * 3600, cpus=2)]
    r = metrics.build(dataset(rows), T0, T0 + timedelta(hours=2))
    assert r["headline"]["core_hours"]["total"] == pytest.approx(4.0)


def test_unknown_class_and_bounds() -> None:
    assert metrics.shares({"agent": 20.0, "human": 70.0, "unknown": 10.0}) == {
        "total": 100.0,
        "by_class": {"agent": 20.0, "human": 70.0, "unknown": 10.0},
        "share_pct": {"agent": 20.0, "human": 70.0, "unknown": 10.0},
        "agent_bounds_pct": [20.0, 30.0],
    }


def test_command_rate_is_commands_per_active_hour() -> None:
    tag = "tenantry:v1;agent=codex;session=s"
    rows = []
    # agent: 30 submissions in one hour; human: 2 submissions in each of 2 hours
    for i in range(30):
        rows.append(
            job(
                job_id=f"a{i}",
                submission_id=f":a{i}",
                user="ag",
                comment=tag,
                submit=T0 + timedelta(seconds=60 * i),
            )
        )
    for i, hour in enumerate((0, 0, 3, 3)):
        rows.append(
            job(
                job_id=f"h{i}",
                submission_id=f":h{i}",
                user="hu",
                submit=T0 + timedelta(hours=hour, minutes=i),
            )
        )
    r = metrics.build(dataset(rows))
    cr = r["command_rate"]
    assert cr["by_class"]["agent"] == {
        "commands": 30,
        "active_hours": 1,
        "rate_per_hour": 30.0,
        "median_user_rate": 30.0,
    }
    assert cr["by_class"]["human"]["rate_per_hour"] == 2.0
    assert cr["ratio_pooled"] == 15.0


def test_trial_and_error_loops_and_waste() -> None:
    tag = "tenantry:v1;agent=claude-code;session=s"
    rows = [
        job(
            job_id=str(i),
            submission_id=f":{i}",
            user="ag",
            comment=tag,
            name="pytest",
            state="FAILED",
            elapsed_s=30,
            cpus=2,
            submit=T0 + timedelta(minutes=5 * i),
            start=T0 + timedelta(minutes=5 * i),
        )
        for i in range(4)
    ]
    rows.append(
        job(
            job_id="9",
            submission_id=":9",
            user="ag",
            comment=tag,
            name="pytest",
            submit=T0 + timedelta(minutes=30),
        )
    )
    r = metrics.build(dataset(rows))
    assert r["trial_error"]["agent"]["loops"] == 1
    assert r["trial_error"]["agent"]["submissions_in_loops"] == 4
    assert r["waste"]["agent"]["wasted_core_hours"] == pytest.approx(4 * 2 * 30 / 3600, abs=0.01)


def test_gini_and_top_share() -> None:
    assert metrics.gini([1, 1, 1, 1]) == pytest.approx(0.0)
    assert metrics.gini([0, 0, 0, 10]) == pytest.approx(0.75)
    assert metrics.top_share([10, 0, 0, 0, 0, 0, 0, 0, 0, 0]) == 100.0


def test_hour_of_week_is_monday_first_utc() -> None:
    rows = [job(submit=datetime(2026, 1, 11, 23, 30, tzinfo=UTC))]  # a Sunday
    r = metrics.build(dataset(rows))
    m = r["hour_of_week"]["human"]
    assert m[6][23] == 1 and sum(map(sum, m)) == 1
    assert r["off_hours"]["human"]["weekend_pct"] == 100.0


def test_telemetry_commands_count_outside_the_jobs_span_unless_windowed() -> None:
    from tenantry.report.schema import COMMAND_SCHEMA

    d = dataset([job(user="ag", comment="tenantry:v1;agent=codex")])
    later = [T0 + timedelta(days=2, minutes=i) for i in range(5)]
    d.commands = conform(
        pl.DataFrame({"source": "db", "user": "ag", "agent": "codex", "session": "s", "ts": later}),
        COMMAND_SCHEMA,
    )
    r = metrics.build(d)
    assert r["command_rate"]["by_class"]["agent"] == {
        "commands": 6,
        "active_hours": 2,
        "rate_per_hour": 3.0,
        "median_user_rate": 3.0,
    }
    r = metrics.build(d, T0, T0 + timedelta(days=1))
    assert r["command_rate"]["by_class"]["agent"]["commands"] == 1


def test_class_comes_from_all_data_not_only_the_window() -> None:
    tag = "tenantry:v1;agent=claude-code;session=s"
    rows = [
        job(
            job_id="1",
            submission_id=":1",
            user="ag",
            comment=tag,
            submit=T0 - timedelta(days=3),
            start=T0 - timedelta(days=3),
        ),
        job(job_id="2", submission_id=":2", user="ag"),  # untagged, inside the window
        job(job_id="3", submission_id=":3", user="hu"),
    ]
    r = metrics.build(dataset(rows), T0 - timedelta(hours=1), T0 + timedelta(days=1))
    assert r["headline"]["users"]["by_class"] == {"agent": 1.0, "human": 1.0, "unknown": 0.0}
    assert r["headline"]["submissions"]["by_class"]["agent"] == 1.0
