"""Each dashboard page in headless Chromium, against a daemon with real activity.

Activity is made through the real surfaces: `tenantry run`, `tenantry submit`,
`tenantry jobs`, and `tenantry hook` fed recorded agent payloads. Screenshots
go to tests/artifacts/ (not committed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import Daemon, _wait

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (apt-get install chromium)",
)


CLAUDE_SESSION = "8f0c2b9e-4d1a-4c55-9a57-2f1e0d7c3b11"  # as in the recorded payloads


def make_activity(d: Daemon) -> None:
    """A Claude Code session going through Tenantry, and two other agents."""
    cc = {"agent": "claude-code", "session": CLAUDE_SESSION}

    def hook(agent: str, name: str) -> str:
        r = d.cli(
            "hook", "--agent", agent, stdin=(FIXTURES / agent / name).read_text(), agent=agent
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    hook("claude-code", "sessionstart.json")
    # the agent tries to poll the scheduler: the hook denies it and names the equivalent
    assert "tenantry jobs" in hook("claude-code", "pretooluse-bash.json")
    for argv in (["echo", "hello from an agent"], ["python3", "-c", "print(6*7)"], ["false"]):
        r = d.cli("run", "--", *argv, **cc)
        assert r.returncode in (0, 1), r.stderr
    script = d.state / "sim.sh"
    script.write_text("#!/bin/bash\necho simulating\n")
    r = d.cli("submit", "--json", str(script), **cc)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    job_id = (out.get("job") or out)["id"]
    r = d.cli("wait", job_id, "--timeout", "60", **cc)
    assert r.returncode in (0, 1), r.stderr
    for _ in range(4):
        assert d.cli("jobs", "--json", **cc).returncode == 0
    hook("codex", "sessionstart.json")
    hook("gemini-cli", "sessionstart.json")
    assert json.loads(hook("gemini-cli", "beforetool-shell.json"))["decision"] == "deny"
    assert d.cli("run", "--", "uname", "-s", agent="codex").returncode == 0


def get(d: Daemon, path: str) -> str:
    req = urllib.request.Request(d.url + path, headers={"Authorization": f"Bearer {d.token}"})
    with urllib.request.urlopen(req, timeout=10) as resp:  # loopback only
        body: bytes = resp.read()
        return body.decode()


def test_dashboard_in_chromium(daemon: Daemon) -> None:
    from playwright.sync_api import expect, sync_playwright

    make_activity(daemon)
    _wait(lambda: "hello from an agent" in get(daemon, "/activity"), 20, "the command to show")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(daemon.url + "/")
        expect(page.get_by_role("heading", name="Tenantry dashboard")).to_be_visible()
        page.get_by_label("Token").fill("wrong")
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_text("That token is not right.")).to_be_visible()
        page.get_by_label("Token").fill(daemon.token)
        page.get_by_role("button", name="Log in").click()
        expect(page.get_by_role("heading", name="Overview", level=1)).to_be_visible()

        checks = {
            "Overview": ["live agent sessions", "claude-code", "status answered from cache"],
            "Sessions": ["claude-code", "codex", "gemini-cli"],
            "Commands & jobs": ["hello from an agent", "sim.sh"],
            "Scheduler": [
                "status queries answered from the cache",
                "calls passed to the scheduler",
            ],
            "Leases": ["leases held now", "idle core-hours"],
            "Policy & budgets": [
                "redirect.squeue",
                "redirect.grep",
                "squeue -u alice",
                "Budgets in force",
            ],
            "Memory & index": ["memory hit rate", "index hit rate"],
            "Report": ["Characterization of this daemon", "No report yet"],
        }
        for name, texts in checks.items():
            page.get_by_role("navigation").get_by_role("link", name=name, exact=True).click()
            expect(page.get_by_role("heading", name=name, exact=True, level=1)).to_be_visible()
            body = page.locator("main")
            for t in texts:
                expect(body).to_contain_text(t)
            # charts are inline SVG drawn on the server
            if name in {"Overview", "Commands & jobs", "Scheduler", "Policy & budgets"}:
                assert page.locator("main svg.chart").count() >= 1
            slug = name.lower().replace(" & ", "-").replace(" ", "-")
            page.screenshot(path=str(ARTIFACTS / f"dashboard-{slug}.png"), full_page=True)
        # the window selector changes the range and keeps the page
        # one Claude Code session, end to end: the docs screenshot
        page.get_by_role("navigation").get_by_role("link", name="Sessions", exact=True).click()
        page.get_by_role("link", name=CLAUDE_SESSION[:12]).click()
        expect(page.get_by_role("heading", name="Session", exact=True, level=1)).to_be_visible()
        main = page.locator("main")
        for t in (
            "claude-code",
            "session.seen",
            "hook.decision",
            "redirect.squeue",
            "squeue -u alice",
            "echo hello from an agent",
            "job.submitted",
            "status.query",
        ):
            expect(main).to_contain_text(t)
        page.screenshot(path=str(ARTIFACTS / "dashboard-session.png"), full_page=True)
        if os.environ.get("TENANTRY_UPDATE_DOCS_IMG") == "1":
            DOCS_IMG.mkdir(exist_ok=True)
            page.set_viewport_size({"width": 1280, "height": 800})
            page.screenshot(path=str(DOCS_IMG / "claude-code-session.png"), full_page=True)
        page.get_by_label("time window").select_option("1")
        page.get_by_role("button", name="show").click()
        expect(page).to_have_url(re.compile(r"/session\?key=.*hours=1$"))
        expect(page.locator("main")).to_contain_text("squeue -u alice")
        page.goto(daemon.url + "/logout")
        expect(page.get_by_role("heading", name="Tenantry dashboard")).to_be_visible()
        browser.close()
    assert time.time()  # screenshots written above
    assert (ARTIFACTS / "dashboard-overview.png").stat().st_size > 10_000
