"""A very long command stays in its cell at 1280 px: cut, with the whole text on demand."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from .conftest import Daemon, _wait

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]

pytestmark = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not os.environ.get("CI"),
    reason="Debian's chromium is not installed (apt-get install chromium)",
)


def test_long_command_keeps_the_other_columns_on_screen(daemon: Daemon, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    long_arg = "--input=" + "very-long-directory-name" * 60 + "input.dat"  # no break point
    r = daemon.cli("run", "--", "echo", long_arg, agent="claude-code")
    assert r.returncode == 0, r.stderr
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(daemon.url + "/")
        page.get_by_label("Token").fill(daemon.token)
        page.get_by_role("button", name="Log in").click()
        page.get_by_role("navigation").get_by_role("link", name="Commands & jobs").click()

        def shown() -> bool:
            page.reload()
            return "very-long-directory-name" in page.locator("main").inner_text()

        _wait(shown, 20, "the long command on the page")
        header = page.get_by_role("columnheader", name="took").first
        box = header.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 1280, box
        cell = page.locator("details.long").first
        assert cell.get_attribute("title") == f"echo {long_arg}"
        page.screenshot(path=str(tmp_path / "long-command.png"), full_page=True)
        cell.locator("summary").click()  # the expander shows the whole command
        expect(cell).to_contain_text("input.dat")
        browser.close()
