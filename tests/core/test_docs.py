"""Docs kept true by tests: README commands, settings page, CLI help."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tenantry.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    quick = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```sh\n(.+?)\n```", quick)


def test_readme_has_exactly_two_quick_start_commands() -> None:
    install, tests = _readme_commands()[:2]
    assert "pip install -e ." in install and install.endswith("tenantry serve")
    assert tests.endswith("scripts/check")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert _readme_commands()[1] in ci


def test_settings_page_is_current() -> None:
    import runpy

    ns = runpy.run_path(str(ROOT / "scripts" / "gen-settings-doc"), run_name="gen")
    assert (ROOT / "docs" / "settings.md").read_text() == ns["render"](), (  # type: ignore[operator]
        "docs/settings.md is stale: run scripts/gen-settings-doc"
    )


def _subcommands() -> list[str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return sorted(sub.choices)  # type: ignore[arg-type]


def test_every_command_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    helps = {a.dest: a.help for a in sub._choices_actions}  # type: ignore[attr-defined]
    for name in _subcommands():
        assert helps.get(name), f"`tenantry {name}` has no help line"


@pytest.mark.parametrize("name", ["run", "submit", "wait", "jobs", "mcp", "serve"])
def test_help_runs(name: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tenantry", name, "--help"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0 and "usage: tenantry" in r.stdout


def test_client_path_imports_only_the_standard_library() -> None:
    code = (
        "import sys; import tenantry.cli.main; tenantry.cli.main.build_parser()\n"
        "import tenantry.client.sync\n"
        "heavy = [m for m in ('starlette','uvicorn','mcp','polars','pydantic','rich','cedarpy',"
        "'tree_sitter','watchdog','httpx') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", f"client path imports {r.stdout.strip()}"


def test_command_table_matches_registrations() -> None:
    import argparse
    import importlib

    from tenantry.cli.main import COMMANDS, EXTENSIONS, command_of

    for module in EXTENSIONS:
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers(dest="command")
        importlib.import_module(module).register(sub)
        registered = set(sub.choices)
        listed = {c for c, m in COMMANDS.items() if m == module}
        assert registered == listed, f"{module}: registers {registered}, table says {listed}"
    assert command_of(["--socket", "x", "--state=y", "run", "--", "ls"]) == "run"
    assert command_of(["--help"]) is None
