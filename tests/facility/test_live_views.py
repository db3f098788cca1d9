"""The facility's live views: ``tenantry report --live`` and the dashboard, per viewer.

One service as its system account, three users' executors (``tt-alice``,
``tt-bob``, staff ``tt-carol``), real Slurm jobs and real commands. The test
makes an exact number of agent and human commands and jobs for alice and bob;
staff's live report counts each of them, alice's holds alice's rows only, and
the facility dashboard shows the same split to the same people. Needs root and
Slurm; see conftest.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.cookiejar import CookieJar
from typing import Any

import pytest

from .conftest import Facility, User, running_facility, wait_until

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

# what the test makes: (agent commands, human commands, agent jobs, human jobs)
MADE = {"tt-alice": (2, 1, 1, 1), "tt-bob": (1, 2, 1, 0)}
PROJECT = "tt-proj-live"


@pytest.fixture(scope="module")
def facility(slurm: None) -> Iterator[Facility]:
    with running_facility() as fac:
        _make(fac)
        yield fac


def _script(user: User, name: str) -> str:
    path = user.work / name
    path.write_text("#!/bin/sh\necho live\n")
    os.chown(path, user.uid, user.gid)
    path.chmod(0o755)
    return name


def _agent_with_project(user: User, *args: str) -> None:
    """One agent command of a second session, which claims ``PROJECT``."""
    env = user.env(True) | {"CLAUDE_CODE_SESSION_ID": f"p-{user.name}", "TENANTRY_PROJECT": PROJECT}
    proc = subprocess.run(
        user.argv(*args), env=env, cwd=user.work, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr


def _make(fac: Facility) -> None:
    for name, (agent_cmds, human_cmds, agent_jobs, human_jobs) in MADE.items():
        u = fac.users[name]
        for i in range(agent_cmds):
            if name == "tt-alice" and i == 0:
                _agent_with_project(u, "run", "--", "true")
            else:
                assert u.call("run", "--", "true", agent=True, json_flag=False).rc == 0
        for _ in range(human_cmds):
            assert u.call("run", "--", "true", json_flag=False).rc == 0
        ids = []
        for agent, n in ((True, agent_jobs), (False, human_jobs)):
            for _ in range(n):
                sub = u.ok("submit", "-t", "2", _script(u, "live.sh"), agent=agent)
                ids.append(sub["job"]["id"])
        for job in ids:
            assert u.ok("wait", job, "--timeout", "150")["job"]["state"] == "COMPLETED"


def _counts(row: dict[str, Any]) -> tuple[int, int, int, int]:
    return (row["agent_commands"], row["human_commands"], row["agent_jobs"], row["human_jobs"])


def _live(u: User) -> dict[str, Any]:
    data: dict[str, Any] = u.ok("report", "--live")
    return data


def _by_user(report: dict[str, Any]) -> dict[str, tuple[int, int, int, int]]:
    return {r["user"]: _counts(r) for r in report["facility"]["by_user"]}


def test_staff_live_report_counts_every_users_agent_and_human_work(facility: Facility) -> None:
    carol = facility.users["tt-carol"]
    report = wait_until(
        lambda: (r := _live(carol)) and _by_user(r) == MADE and r,
        60,
        "the executors' events at the service",
    )
    assert report["scope"] == {"viewer": "tt-carol", "staff": True, "users": "all"}
    fac = report["facility"]
    by_agent = {r["agent"]: r for r in fac["by_agent_product"]}
    assert by_agent["claude-code"]["commands"] == 3 and by_agent["claude-code"]["jobs"] == 2
    assert by_agent["claude-code"]["users"] == 2
    assert by_agent["human"]["commands"] == 3 and by_agent["human"]["jobs"] == 1
    projects = {r["project"]: _counts(r) for r in fac["by_project"]}
    assert projects[PROJECT] == (1, 0, 0, 0)
    week = fac["hour_of_week"]
    assert sum(map(sum, week["agent"])) == 5 and sum(map(sum, week["human"])) == 4
    # the same report as from files: job submissions by class, from the jobs' own tags
    subs = report["headline"]["submissions"]
    assert subs["total"] == 3
    telemetry = report["telemetry"]
    assert telemetry["agent"]["commands"] == 3 and telemetry["human"]["commands"] == 3


def test_a_normal_users_live_report_holds_only_their_rows(facility: Facility) -> None:
    alice, bob = facility.users["tt-alice"], facility.users["tt-bob"]
    res = alice.call("report", "--live")
    assert res.rc == 0, res.stderr
    assert _by_user(res.data) == {"tt-alice": MADE["tt-alice"]}
    assert res.data["scope"]["staff"] is False and res.data["scope"]["users"] == ["tt-alice"]
    assert "only your own rows" in res.stderr
    assert "tt-bob" not in json.dumps(res.data)
    assert res.data["headline"]["submissions"]["total"] == 2
    assert _by_user(_live(bob)) == {"tt-bob": MADE["tt-bob"]}
    # an agent reads no report at all (the facility's baseline policy), not even its user's
    refused = alice.call("report", "--live", agent=True)
    assert refused.rc != 0 and refused.data["error"]["code"] == "policy_denied"


def test_live_report_renders_as_the_file_report_does(facility: Facility) -> None:
    carol = facility.users["tt-carol"]
    table = carol.call("report", "--live", json_flag=False)
    assert table.rc == 0, table.stderr
    assert "Agent share" in table.data and "Per user" in table.data and "tt-bob" in table.data
    md = carol.call("report", "--live", "--format", "md", "--out", "-", json_flag=False)
    assert md.rc == 0 and md.data.startswith("#"), md.stderr
    mixed = carol.call("report", "--live", "jobs.txt", json_flag=False)
    assert mixed.rc != 0 and "--live reads the facility service" in mixed.stderr


def test_live_report_help_teaches_it(facility: Facility) -> None:
    res = facility.users["tt-alice"].call("report", "--help", json_flag=False)
    assert res.rc == 0
    assert "--live" in res.data and "staff" in res.data and "--days" in res.data


# -- the dashboard -------------------------------------------------------------------------
class Browser:
    """Real HTTP to the facility's dashboard with a cookie jar, as a browser keeps one."""

    def __init__(self, fac: Facility) -> None:
        self.base = f"http://127.0.0.1:{fac.http_port}"
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def login(self, token: str) -> int:
        body = urllib.parse.urlencode({"token": token, "next": "/"}).encode()
        return self.get("/login", body)[0]

    def get(self, path: str, body: bytes | None = None) -> tuple[int, str, str]:
        """(status, final path, body) after redirects."""
        try:
            with self.opener.open(self.base + path, data=body, timeout=60) as resp:
                url = urllib.parse.urlparse(resp.geturl()).path
                return resp.status, url, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, path, err.read().decode()


def _login_link(u: User) -> dict[str, Any]:
    link: dict[str, Any] = u.ok("facility", "dashboard")
    assert link["user"] == u.name and link["url"].endswith(link["token"])
    return link


def _facility_rows(page: str) -> set[str]:
    return {name for name in ("tt-alice", "tt-bob", "tt-carol") if f"<td>{name}</td>" in page}


def test_dashboard_staff_see_every_user_and_a_user_only_their_own(facility: Facility) -> None:
    alice, carol = facility.users["tt-alice"], facility.users["tt-carol"]
    staff = Browser(facility)
    link = _login_link(carol)
    assert link["staff"] is True
    assert staff.login(link["token"]) == 200
    status, _, page = staff.get("/facility")
    assert status == 200 and _facility_rows(page) == {"tt-alice", "tt-bob"}
    assert "every user" in page and PROJECT in page and "claude-code" in page
    assert 'href="/sessions?' in page and 'href="/facility?' in page  # the whole menu
    assert "sqlite://" in page  # staff see where the service keeps its data
    assert staff.get("/sessions")[0] == 200  # staff open the whole facility's pages

    own = Browser(facility)
    mine = _login_link(alice)
    assert mine["staff"] is False
    assert own.login(mine["token"]) == 200
    status, where, page = own.get("/")
    assert (status, where) == (200, "/facility")  # a user lands on their own view
    assert _facility_rows(page) == {"tt-alice"} and "tt-bob" not in page
    assert "your own rows (tt-alice)" in page
    assert "sqlite://" not in page and str(facility.state) not in page  # nor where its store is
    assert 'href="/sessions?' not in page and 'href="/facility?' in page  # her menu: this page
    for path in ("/sessions", "/activity", "/policy", "/report"):
        status, _, page = own.get(path)
        assert status == 403 and "tt-bob" not in page, path
    assert own.get("/metrics")[0] == 401 and own.get("/report/raw")[0] == 401

    # the token names its user: alice cannot turn hers into bob's, nor her agent get one
    forged = mine["token"].replace("tt-alice", "tt-bob", 1)
    assert Browser(facility).login(forged) == 401
    assert alice.call("facility", "dashboard", agent=True).rc != 0


@pytest.mark.skipif(shutil.which("/usr/bin/chromium") is None, reason="no Debian chromium")
def test_dashboard_own_view_in_a_real_browser(facility: Facility) -> None:
    from playwright.sync_api import sync_playwright

    link = _login_link(facility.users["tt-bob"])
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"],
        )
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{facility.http_port}/")
        page.get_by_label("Token").fill(link["token"])
        page.get_by_role("button", name="Log in").click()
        page.wait_for_url("**/facility")
        text = page.locator("main").inner_text()
        assert "tt-bob" in text and "tt-alice" not in text
        page.goto(f"http://127.0.0.1:{facility.http_port}/sessions")
        assert "you see your own data only" in page.content()
        browser.close()
