"""The live report's pure parts: jobs from events, the facility breakdown, who may see what."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tenantry.core.errors import UsageError
from tenantry.core.models import JobState
from tenantry.report import live
from tenantry.store.live_rows import LiveRows

MONDAY_9 = datetime(2026, 1, 5, 9, 30, tzinfo=UTC).timestamp()


def _ev(kind: str, principal: str, job: str, ts: float, outcome: str = "", **data: Any) -> Any:
    return {"type": kind, "principal": principal, "subject": job, "outcome": outcome,
            "ts": ts, "data": data}  # fmt: skip


def test_jobs_of_keeps_each_users_job_apart_and_its_last_state() -> None:
    events = [
        _ev("job.submitted", "ann/codex/s1", "t1", 10.0, name="a", resources={"cpus": 4}),
        _ev("job.submitted", "bob/human/-", "t1", 11.0, name="b"),
        _ev("job.state", "ann/codex/s1", "t1", 20.0, "RUNNING"),
        _ev("job.state", "ann/codex/s1", "t1", 80.0, "COMPLETED", elapsed_s=60.0),
    ]
    ann, bob = live.jobs_of(events)
    assert (ann.id, ann.state, ann.resources.cpus, ann.started_at, ann.ended_at) == (
        "ann:t1",
        JobState.COMPLETED,
        4,
        20.0,
        80.0,
    )
    assert (bob.id, bob.state, bob.name) == ("bob:t1", JobState.PENDING, "b")


def test_breakdown_counts_agent_and_human_per_user_project_product_and_hour() -> None:
    rows = LiveRows(
        sessions=[
            {
                "principal": "ann/codex/s1",
                "user": "ann",
                "agent": "codex",
                "session": "s1",
                "project": "p1",
            },
            {
                "principal": "ann/human/-",
                "user": "ann",
                "agent": "human",
                "session": "",
                "project": "",
            },
        ],
        commands=[
            {"principal": "ann/codex/s1", "started_at": MONDAY_9},
            {"principal": "ann/codex/s1", "started_at": MONDAY_9 + 60},
            {"principal": "ann/human/-", "started_at": MONDAY_9 + 3600},
        ],
        job_events=[_ev("job.submitted", "ann/codex/s1", "t1", MONDAY_9)],
    )
    jobs = live.jobs_of(rows.job_events)
    fac = live.breakdown(live.rows_of(rows, jobs), rows.sessions, "UTC")
    (ann,) = fac["by_user"]
    assert (ann["agent_commands"], ann["human_commands"], ann["agent_jobs"]) == (2, 1, 1)
    assert ann["agent_products"] == ["codex"] and ann["projects"] == ["p1"]
    assert {r["project"]: r["agent_commands"] for r in fac["by_project"]} == {"": 0, "p1": 2}
    week = fac["hour_of_week"]
    assert week["agent"][0][9] == 3 and week["human"][0][10] == 1  # Monday 09h and 10h
    # in another zone the same instants fall in other hours
    berlin = live.breakdown(live.rows_of(rows, jobs), rows.sessions, "Europe/Berlin")
    assert berlin["hour_of_week"]["agent"][0][10] == 3


def test_a_state_this_version_does_not_know_is_unknown_and_not_an_end() -> None:
    (job,) = live.jobs_of([_ev("job.state", "ann/codex/s1", "t9", 5.0, "WEIRD")])
    assert job.state is JobState.UNKNOWN and job.ended_at is None  # not an end


def test_zone_must_exist() -> None:
    assert live.zone_of("Europe/Berlin") == "Europe/Berlin"
    with pytest.raises(UsageError):
        live.zone_of("Mars/Olympus")
