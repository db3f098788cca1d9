"""Outputs: self-contained HTML, Markdown, JSON, CSV; terminal summary; exports."""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

import tenantry.report as report_pkg
from tenantry.cli.main import main
from tenantry.report import metrics, render_data, render_html, render_markdown, sources


@pytest.fixture(scope="module")
def report(paper_trace: Path) -> dict[str, Any]:
    return metrics.build(sources.load([paper_trace]))


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href") and v:
                self.urls.append(v)


def test_html_is_self_contained_with_figures(report: dict[str, Any]) -> None:
    html = render_html.render(report)
    p = _Tags()
    p.feed(html)
    assert "script" not in p.tags and p.urls == []
    assert p.tags.count("svg") >= 5  # share bars, heatmaps, histograms
    # the only URL is the SVG namespace identifier
    assert set(re.findall(r"https?://[^\"' ]+", html)) == {"http://www.w3.org/2000/svg"}
    assert "55.8 %" in html


def test_markdown_has_the_paper_table(report: dict[str, Any]) -> None:
    md = render_markdown.render(report)
    row = next(line for line in md.splitlines() if line.startswith("| Job submissions"))
    assert "55.8 %" in row
    assert "commands per active hour" in md


def test_json_and_csv_carry_the_same_numbers(report: dict[str, Any]) -> None:
    doc = json.loads(render_data.to_json(report))
    assert (
        doc["headline"]["core_hours"]["share_pct"]["agent"]
        == report["headline"]["core_hours"]["share_pct"]["agent"]
    )
    rows = list(csv.DictReader(io.StringIO(render_data.to_csv(report))))
    got = {(r["metric"], r["class"]): r["value"] for r in rows}
    assert (
        float(got[("gpu_hours_share_pct", "agent")])
        == report["headline"]["gpu_hours"]["share_pct"]["agent"]
    )
    assert ("ratio_pooled", "agent/human") in got


def test_cli_writes_each_format(
    paper_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for ext in ("html", "md", "json", "csv"):
        out = tmp_path / f"r.{ext}"
        assert main(["report", str(paper_trace), "--out", str(out)]) == 0
        assert out.stat().st_size > 500
    text = capsys.readouterr().out
    assert "Agent share of the facility" in text and "wrote" in text


def test_cli_window_and_users_csv(
    paper_trace: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    users = tmp_path / "users.csv"
    rc = main(
        [
            "report",
            str(paper_trace),
            "--since",
            "2026-01-06",
            "--until",
            "2026-01-08",
            "--users-csv",
            str(users),
            "--json",
        ]
    )
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["window"]["since"].startswith("2026-01-06T00:00:00")
    assert "class" in users.read_text().splitlines()[0]


def test_cli_errors_are_rendered_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path / "missing.txt"), "--json"]) == 65
    err = json.loads(capsys.readouterr().out)
    assert err["error"]["code"] == "ingest_error"
    assert main(["report", str(tmp_path), "--since", "nope"]) == 2


def test_help_teaches_with_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for cmd in ("report", "simulate"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        assert "examples:" in capsys.readouterr().out


def test_exports_are_the_modules() -> None:
    for name in report_pkg.__all__:
        __import__(f"tenantry.report.{name}")
    mods = {p.stem for p in Path(report_pkg.__file__).parent.glob("*.py")} - {
        "__init__",
        "cli",
        "ops",
    }
    assert mods == set(report_pkg.__all__)


def test_progress_bar_on_large_inputs(
    paper_trace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tenantry.report import cli as report_cli

    monkeypatch.setattr(report_cli, "LARGE", 0)
    seen: list[int] = []
    real = report_cli._console

    def console(stderr: bool = False) -> object:
        c = real(stderr)
        if stderr:
            seen.append(1)
        return c

    monkeypatch.setattr(report_cli, "_console", console)
    assert main(["report", str(paper_trace)]) == 0
    assert seen and "Agent share" in capsys.readouterr().out


def test_job_evidence_and_sessions(report: dict[str, Any]) -> None:
    ev = report["job_evidence"]["agent"]
    assert 0 < ev["direct_agent"] < ev["submissions"]  # most, not all, agent jobs are tagged
    assert report["job_evidence"]["human"]["direct_agent"] == 0
    assert report["sessions"]["agent_sessions"] > 0


def test_every_svg_is_well_formed_xml(report: dict[str, Any]) -> None:
    import xml.etree.ElementTree as ET

    html = render_html.render(report)
    svgs = re.findall(r"<svg .*?</svg>", html, flags=re.S)
    assert len(svgs) >= 5
    for svg in svgs:
        root = ET.fromstring(svg)
        assert (
            root.tag.endswith("svg") and root.find("{http://www.w3.org/2000/svg}title") is not None
        )


def test_html_headline_says_what_each_share_rests_on_and_the_zone(tmp_path: Path) -> None:
    from tenantry.report import metrics, simulate_humans, simulate_write, sources

    out = tmp_path / "h.txt"
    simulate_write.write(simulate_humans.generate(users=10, days=7, seed=2), out, "sacct")
    report = metrics.build(sources.load([out]), tz="America/Chicago")
    html = render_html.render(report)
    head = html.split("<table>", 1)[0]
    assert "Agent share rests on evidence only (agent users: none)" in head
    assert "agent-like behaviour but no evidence only raise the upper bound" in head
    assert "America/Chicago (setting (--tz))" in head
    assert "agent-like (no evidence)" in html
