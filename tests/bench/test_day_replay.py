"""The facility day's replay generator and its ground-truth accounting (pure)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import day_replay as dr
from day_replay import Action, DayConfig, Executed, SlurmJob

HOUR = 3600.0
T0 = 1_796_000_400.0  # a whole UTC hour


def test_same_seed_same_day_other_seed_another() -> None:
    cfg = DayConfig.short()
    assert dr.generate(cfg) == dr.generate(cfg)
    assert dr.generate(cfg) != dr.generate(replace(cfg, seed=2))


def test_actors_users_and_workspaces() -> None:
    cfg = DayConfig(agents=12, humans=3, sessions_per_user=5, day_s=120)
    day = dr.generate(cfg)
    agents, humans = day.by_kind("agent"), day.by_kind("human")
    assert len(agents) == 12 and len(humans) == 3
    assert cfg.agent_users == 3
    assert {a.user for a in agents} == {"a00", "a01", "a02"}
    assert sorted({a.session for a in agents}) == [f"s{i:03d}" for i in range(12)]
    assert all(a.workspace == int(a.user[1:]) for a in agents)
    assert all(0 <= h.workspace < cfg.agent_users for h in humans)


def test_actions_are_on_the_clock_and_of_known_classes() -> None:
    cfg = DayConfig(agents=20, humans=5, day_s=300)
    for actor in dr.generate(cfg).actors:
        times = [a.t for a in actor.actions]
        assert times == sorted(times)
        assert all(0 <= t < cfg.day_s * 1.2 for t in times)
        assert {a.cls for a in actor.actions} <= set(dr.CLASSES)


def test_agent_loops_explore_modify_execute_and_poll_their_batch_jobs() -> None:
    cfg = DayConfig(agents=30, humans=0, day_s=600, batch_p=0.5)
    day = dr.generate(cfg)
    counts = day.counts()["agent"]
    for cls in ("ls", "grep", "find", "read", "edit", "test", "sbatch", "squeue", "sacct"):
        assert counts.get(cls, 0) > 0, cls
    for actor in day.by_kind("agent"):
        seq = [a.cls for a in actor.actions]
        for i, cls in enumerate(seq):
            if cls != "sbatch":
                continue
            run = float(actor.actions[i].arg)
            assert cfg.job_s[0] <= run <= cfg.job_s[1]
            j = i + 1
            while seq[j] == "squeue":
                j += 1
            assert j > i + 1, "a submission is followed by squeue polling"
            assert seq[j] == "sacct", "and a sacct once the job is done"
            # polling spans the job's run time
            assert actor.actions[j - 1].t - actor.actions[i].t >= run


def test_idle_gaps_make_bursts() -> None:
    day = dr.generate(DayConfig(agents=10, humans=0, day_s=600))
    gaps = [
        b.t - a.t
        for actor in day.actors
        for a, b in zip(actor.actions, actor.actions[1:], strict=False)
    ]
    inside = [g for g in gaps if g <= DayConfig().think_s[1]]
    assert len(inside) > 0.7 * len(gaps)  # most commands come in bursts
    assert max(gaps) > 5 * DayConfig().think_s[1]  # separated by long idle gaps


def test_humans_issue_commands_at_one_ratio_th_of_the_agent_rate() -> None:
    cfg = DayConfig(agents=40, humans=400, day_s=3000)
    day = dr.generate(cfg)
    agent_rate = dr.agent_active_rate(day.by_kind("agent"), cfg.day_s)
    lo, hi = (f * cfg.day_s for f in cfg.human_window)
    human_cmds = sum(len(h.actions) for h in day.by_kind("human"))
    human_rate = human_cmds / (len(day.by_kind("human")) * (hi - lo))
    assert agent_rate / human_rate == pytest.approx(dr.PAPER_RATIO, rel=0.1)
    assert all(lo <= a.t < hi for h in day.by_kind("human") for a in h.actions)


def test_short_mode_is_small() -> None:
    cfg = DayConfig.short()
    assert (cfg.agents, cfg.humans) == (5, 2)
    n = sum(len(a.actions) for a in dr.generate(cfg).actors)
    assert 20 < n < 400


# --- ground truth ---


def _ex(user: str, cls: str, ts: float, via: bool = False) -> Executed:
    return Executed(user, cls, ts, 0.01, 0, via_tenantry=via)


def test_ground_truth_shares_follow_the_labels_and_the_jobs() -> None:
    labels = {"ag1": "agent", "ag2": "agent", "hu1": "human", "hu2": "human"}
    jobs = [
        SlurmJob("ag1", T0 + 10, cpus=2, elapsed_s=HOUR),  # 2 core-hours
        SlurmJob("ag1", T0 + 20, cpus=1, elapsed_s=0),
        SlurmJob("ag2", T0 + 30, cpus=1, elapsed_s=HOUR),  # 1
        SlurmJob("hu1", T0 + 40, cpus=4, elapsed_s=HOUR / 2),  # 2
        SlurmJob("stranger", T0, cpus=64, elapsed_s=HOUR),  # not this day's: ignored
    ]
    executed = [
        _ex("ag1", "test", T0 + 1, via=True),
        _ex("ag2", "find", T0 + 2),
        _ex("hu2", "ls", T0 + 3),  # issues commands, but no submission: invisible to a report
    ]
    truth = dr.ground_truth(labels, executed, jobs)
    assert truth.users["users"] == pytest.approx(2 / 3)
    assert truth.users["submissions"] == pytest.approx(3 / 4)
    assert truth.users["core_hours"] == pytest.approx(3 / 5)
    assert truth.detail["users_issuing_commands"] == 3
    assert truth.detail["agent_share_of_issuing_users"] == pytest.approx(2 / 3)


def test_ground_truth_command_rate_counts_submissions_and_tenantry_runs_per_clock_hour() -> None:
    labels = {"ag": "agent", "hu": "human"}
    jobs = [SlurmJob("ag", T0 + 5, 1, 1), SlurmJob("hu", T0 + 5, 1, 1)]
    executed = [_ex("ag", "test", T0 + i, via=True) for i in range(9)]  # 9 + 1 job in hour 0
    executed += [_ex("ag", "test", T0 + HOUR + 1, via=True)]  # 1 in hour 1
    executed += [_ex("ag", "grep", T0 + 7)]  # not a report "command"
    executed += [_ex("hu", "ls", T0 + 2 * HOUR)]  # nor this
    truth = dr.ground_truth(labels, executed, jobs)
    rate = truth.detail["command_rate"]
    assert isinstance(rate, dict)
    assert rate["agent_rate"] == pytest.approx(11 / 2)  # 11 commands, 2 active hours
    assert rate["human_rate"] == pytest.approx(1.0)
    assert rate["ratio"] == pytest.approx(5.5)
    # over every command issued (jobs aside): agent 10 runs + 1 grep in 2 h, human 1 ls in 1 h
    assert truth.detail["all_commands_ratio"] == pytest.approx((11 / 2) / 1)


def test_ground_truth_without_humans_has_no_ratio() -> None:
    truth = dr.ground_truth({"ag": "agent"}, [_ex("ag", "test", T0, via=True)], [])
    rate = truth.detail["command_rate"]
    assert isinstance(rate, dict) and rate["ratio"] is None
    assert truth.users["users"] == 1.0
    assert truth.users["submissions"] == 0.0  # no jobs: share of nothing


def test_active_hours_are_utc_clock_hours() -> None:
    # two commands 2 minutes apart across an hour boundary are two active hours
    labels = {"ag": "agent", "hu": "human"}
    executed = [_ex("ag", "test", T0 - 60, via=True), _ex("ag", "test", T0 + 60, via=True)]
    jobs = [SlurmJob("hu", T0 + 1, 1, 1)]
    rate = dr.ground_truth(labels, executed, jobs).detail["command_rate"]
    assert isinstance(rate, dict)
    assert rate["agent_rate"] == pytest.approx(1.0)
    assert math.floor((T0 - 60) / HOUR) != math.floor((T0 + 60) / HOUR)


def test_action_defaults() -> None:
    assert Action(1.0, "edit").arg == ""
