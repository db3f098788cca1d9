"""Classifier: tags and markers as ground truth; precision/recall on labelled traces."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from tenantry.report import classify, metrics, simulate, simulate_write, sources
from tenantry.report.schema import JOB_SCHEMA, Dataset, conform

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def _jobs(rows: list[dict[str, object]]) -> Dataset:
    base = {"source": "t", "state": "COMPLETED", "elapsed_s": 60, "cpus": 1, "gpus": 0}
    full = [
        {
            **base,
            "job_id": str(i),
            "submission_id": f":{i}",
            "submit": T0 + timedelta(hours=i),
            "start": T0 + timedelta(hours=i),
            **r,
        }
        for i, r in enumerate(rows)
    ]
    return Dataset(jobs=conform(pl.DataFrame(full, schema=JOB_SCHEMA), JOB_SCHEMA))


def _users(d: Dataset) -> dict[str, tuple[str, str]]:
    t = metrics.users_table(d)
    return {u: (c, e) for u, c, e in t.select("user", "class", "evidence").iter_rows()}


def test_tag_is_ground_truth_and_evidence_is_kept() -> None:
    d = _jobs(
        [
            {"user": "a", "comment": "note tenantry:v1;agent=claude-code;session=s1 end"},
            {"user": "a"},
            {"user": "h", "comment": "tenantry:v1;agent=human;user=h"},
            {"user": "x"},
        ]
    )
    u = _users(d)
    assert u["a"][0] == "agent" and "tag" in u["a"][1]
    assert u["h"] == ("human", "evidence says human (tag): 1")
    assert u["x"][0] == "human" and u["x"][1].startswith("no evidence; behaviour score")


def test_env_marker_in_submit_line_or_environment() -> None:
    d = _jobs(
        [
            {"user": "c", "submit_line": "env CODEX_THREAD_ID=abc sbatch run.sh"},
            {"user": "g", "env": "PATH=/bin\nGEMINI_CLI=1\n"},
            {"user": "n", "submit_line": "sbatch MYCLAUDECODEX.sh"},
        ]
    )
    ev = classify.job_evidence(d.jobs)
    assert ev["env_agent"].to_list() == ["codex", "gemini-cli", None]
    u = _users(d)
    assert u["c"][0] == "agent" and u["g"][0] == "agent" and u["n"][0] == "human"


def _labels(path: Path) -> pl.DataFrame:
    return pl.read_csv(simulate_write.labels_path(path)).select("user", "class")


@pytest.mark.parametrize("fmt", ["xdmod", "swf"])
def test_untagged_agents_are_never_called_agent_but_bound_the_share(
    tmp_path: Path, fmt: str
) -> None:
    """No tags at all (XDMoD field set, SWF): behaviour widens the bound, never the share."""
    trace = simulate.generate(users=300, days=14, seed=3, profile=simulate.PAPER)
    out = tmp_path / f"t.{fmt}"
    simulate_write.write(trace, out, fmt)
    data = sources.load([out])
    table = metrics.users_table(data)
    assert table.filter(pl.col("class") == "agent").height == 0
    report = metrics.build(data)
    labels = _labels(out)
    true_pct = 100 * labels.filter(pl.col("class") == "agent").height / labels.height
    lo, hi = report["headline"]["users"]["agent_bounds_pct"]
    # no evidence: the share is 0; the behaviour bound reaches (about) the true share
    assert lo == 0.0 and hi >= 0.9 * true_pct, (lo, true_pct, hi)


def test_hidden_agents_are_agent_like_not_agent(tmp_path: Path) -> None:
    profile = simulate.profile_named("paper", hidden_agent_fraction=0.5)
    trace = simulate.generate(users=300, days=14, seed=5, profile=profile)
    out = tmp_path / "h.txt"
    simulate_write.write(trace, out, "sacct")
    table = metrics.users_table(sources.load([out]))
    labels = pl.read_csv(simulate_write.labels_path(out))
    hidden = labels.filter(pl.col("hidden") == 1).select("user", "class")
    assert hidden.height >= 20
    pr_hidden = classify.precision_recall(table.select("user", "class"), hidden)
    # hidden agents left no evidence: none is called agent
    assert pr_hidden["true_positive"] == 0
    pr_all = classify.precision_recall(
        table.select("user", "class"), labels.select("user", "class")
    )
    # what is called agent rests on evidence, so it is never wrong
    assert pr_all["precision"] == 1.0 and pr_all["false_positive"] == 0, pr_all
    basis = dict(table.filter(pl.col("class") == "agent").group_by("basis").len().iter_rows())
    assert set(basis) <= {"tag", "controller", "env"} and basis.get("tag", 0) > 0


def test_controller_tag_outranks_comment_text_and_labels_direct_jobs() -> None:
    d = _jobs(
        [
            # AdminComment from job_submit.lua: CLAUDECODE in the submitting environment
            {"user": "d", "admin_comment": "tenantry-ctld:v1;via=direct;markers=CLAUDECODE"},
            # no markers at the controller beats a marker-looking word in the comment
            {
                "user": "m",
                "admin_comment": "tenantry-ctld:v1;via=direct;markers=",
                "comment": "see CLAUDECODE docs",
            },
            # through Tenantry: the daemon's own tag names the agent
            {
                "user": "t",
                "admin_comment": "tenantry-ctld:v1;via=tenantry;markers=",
                "comment": "tenantry:v1;agent=codex;session=s9",
            },
        ]
    )
    ev = classify.job_evidence(d.jobs)
    assert ev["ctld_agent"].to_list() == ["claude-code", "human", "human"]
    assert ev["job_basis"].to_list() == ["controller", "controller", "tag"]
    u = _users(d)
    assert u["d"] == ("agent", "jobs with agent evidence (controller): 1")
    assert u["m"] == ("human", "evidence says human (controller): 1")
    assert u["t"][0] == "agent"


def test_precision_recall_counts_unknown_as_a_miss() -> None:
    pred = pl.DataFrame({"user": ["a", "b", "c"], "class": ["agent", "unknown", "agent"]})
    truth = pl.DataFrame({"user": ["a", "b", "c"], "class": ["agent", "agent", "human"]})
    pr = classify.precision_recall(pred, truth)
    assert (pr["precision"], pr["recall"], pr["unknown"]) == (0.5, 0.5, 1)


@pytest.mark.parametrize("fmt", ["sacct", "xdmod", "swf"])
def test_scripted_bursty_night_humans_are_not_agents(tmp_path: Path, fmt: str) -> None:
    """Cron pipelines, sweeps, workflow managers, night runners: no agent among them."""
    from tenantry.report import simulate_humans

    trace = simulate_humans.generate(users=40, days=21, seed=9, tz="America/Chicago")
    out = tmp_path / f"humans.{fmt}"
    simulate_write.write(trace, out, fmt)
    report = metrics.build(sources.load([out]), tz="America/Chicago")
    for key in ("users", "submissions", "core_hours"):
        share = report["headline"][key]
        assert share["share_pct"]["agent"] <= 2.0, (key, share)
        assert share["agent_bounds_pct"][0] == 0.0, (key, share)
    # the behaviour bound is reported, not hidden: these humans do look scripted
    assert report["headline"]["submissions"]["agent_bounds_pct"][1] > 0.0


def test_pre_2020_archive_shaped_log_reports_no_agents(tmp_path: Path) -> None:
    """A log shaped like the Parallel Workloads Archive's 1990s traces (header, zone,
    relative times, scripted and bursty users): years before coding agents existed."""
    from tenantry.report import simulate_humans

    trace = simulate_humans.generate(
        users=50, days=28, seed=4, tz="US/Pacific", start=datetime(1998, 4, 6, tzinfo=UTC)
    )
    swf = tmp_path / "sp2.swf"
    simulate_write.write(trace, swf, "swf")
    body = [x for x in swf.read_text().splitlines() if not x.startswith(";")]
    t0 = int(datetime(1998, 4, 6, tzinfo=UTC).timestamp())
    header = [
        "; Version: 2.2",
        "; Computer: IBM SP2 (shaped like a PWA log; generated)",
        "; Installation: example site",
        f"; UnixStartTime: {t0}",
        "; TimeZoneString: US/Pacific",
        "; MaxProcs: 128",
    ]
    swf.write_text("\n".join(header + body) + "\n")
    report = metrics.build(sources.load([swf]))
    assert report["time_zone"] == {"zone": "US/Pacific", "source": "trace header"}
    for key in ("users", "submissions", "core_hours"):
        assert report["headline"][key]["share_pct"]["agent"] == 0.0
        assert report["headline"][key]["agent_bounds_pct"][0] == 0.0
