"""``tenantry run`` read without argparse gives argparse's values, or leaves the line to it."""

from __future__ import annotations

import argparse
from collections.abc import Callable

import pytest

from tenantry.cli.fastrun import Parsed, RunArgs, SubmitArgs, parse, parse_submit
from tenantry.cli.main import build_parser

PLAIN = [
    ["run", "--", "true"],
    ["run", "true"],
    ["run", "make", "-j4", "--json"],  # options after the command are the command's
    ["run", "--json", "--", "sh", "-c", "echo hi"],
    ["run", "--", "--"],
    ["run", "--cpus", "4", "--mem", "8G", "--where", "lease", "--", "make", "-j4"],
    ["run", "--gpus", "1", "--time", "10", "--timeout", "2.5", "--idempotent", "--", "x"],
    ["run", "--cpus", "2", "--cpus", " 3 ", "--", "x"],  # the last one wins; int() strips
    ["run", "--mem", "", "--", "x"],
    ["run", "--timeout", "1e3", "--", "x"],
    ["--socket", "/tmp/s", "--state-dir", "/tmp/d", "run", "--", "ls", "-l"],
    ["--state-dir", "d", "--socket", "s", "--socket", "t", "run", "ls"],
]

LEFT_TO_ARGPARSE = [
    ["run"],
    ["run", "--"],
    ["run", "--help"],
    ["run", "-h"],
    ["run", "--json"],
    ["run", "--cpu", "2", "--", "x"],  # an abbreviation argparse accepts
    ["run", "--cpus=2", "--", "x"],
    ["run", "--cpus", "two", "--", "x"],
    ["run", "--cpus", "--", "x"],
    ["run", "--timeout", "-1", "--", "x"],
    ["run", "--where", "moon", "--", "x"],
    ["run", "--socket", "s", "--", "x"],  # a global option after the command
    ["--socket", "run", "--", "x"],
    ["--socket=s", "run", "--", "x"],
    ["--version"],
    ["jobs"],
    [],
]


SUBMIT_PLAIN = [
    ["submit", "job.sh"],
    ["submit", "job.sh", "--epochs", "3", "-J", "x"],  # after the script: the script's
    ["submit", "-J", "day-job", "-t", "2", "-c", "1", "--mem", "64M", "-o", "o-%j", "job.sh", "10"],
    ["submit", "--job-name", "n", "--cpus-per-task", "2", "--time", "1:00", "job.sh"],
    ["submit", "--cpus", " 3 ", "-G", "1", "--gpus", "2", "job.sh"],  # the last one wins
    ["submit", "-p", "debug", "--partition", "gpu", "-A", "proj", "--account", "p2", "j.sh"],
    ["submit", "-e", "err", "--error", "e2", "--output", "out", "-a", "1-3", "j.sh"],
    ["submit", "--array", "0-9%2", "--force", "--json", "j.sh"],
    ["submit", "--mem", "", "j.sh"],
    ["--socket", "/tmp/s", "--state-dir", "/tmp/d", "submit", "job.sh"],
]

SUBMIT_LEFT_TO_ARGPARSE = [
    ["submit"],
    ["submit", "--force"],
    ["submit", "--help"],
    ["submit", "-h"],
    ["submit", "--job", "n", "job.sh"],  # an abbreviation argparse accepts
    ["submit", "-Jn", "job.sh"],
    ["submit", "--time=2", "job.sh"],
    ["submit", "-c", "two", "job.sh"],
    ["submit", "-c", "-1", "job.sh"],
    ["submit", "--", "job.sh"],
    ["submit", "job.sh", "--", "x"],
    ["submit", "--nodes", "2", "job.sh"],
    ["run", "job.sh"],
]


def _argparse(command: str, argv: list[str]) -> dict[str, object]:
    ns = build_parser(command).parse_args(argv)
    out = vars(ns)
    del out["handler"], out["command"]
    return out


def _reader(command: str) -> Callable[[list[str]], Parsed | None]:
    return parse if command == "run" else parse_submit


@pytest.mark.parametrize(
    ("command", "argv"),
    [*(("run", a) for a in PLAIN), *(("submit", a) for a in SUBMIT_PLAIN)],
)
def test_plain_forms_match_argparse(command: str, argv: list[str]) -> None:
    fast = _reader(command)(argv)
    assert isinstance(fast, RunArgs if command == "run" else SubmitArgs)
    assert fast.fields() == _argparse(command, argv)


@pytest.mark.parametrize(
    ("command", "argv"),
    [*(("run", a) for a in LEFT_TO_ARGPARSE), *(("submit", a) for a in SUBMIT_LEFT_TO_ARGPARSE)],
)
def test_anything_else_is_left_to_argparse(command: str, argv: list[str]) -> None:
    assert _reader(command)(argv) is None


def test_argparse_still_explains(capsys: pytest.CaptureFixture[str]) -> None:
    from tenantry.cli.main import main

    with pytest.raises(SystemExit):
        main(["run", "--where", "moon", "--", "x"])
    assert "invalid choice: 'moon'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "examples:" in capsys.readouterr().out
    assert main(["run"]) == 2
    assert "no command given" in capsys.readouterr().err


def test_every_run_option_is_known_to_the_fast_reader() -> None:
    """A new ``run`` option must be taught to ``fastrun`` (or it silently falls back)."""
    from tenantry.cli import fastrun

    sub = build_parser("run")._subparsers
    assert sub is not None
    run = next(a for a in sub._group_actions if isinstance(a, argparse._SubParsersAction))
    options = {
        s for a in run.choices["run"]._actions for s in a.option_strings if s.startswith("--")
    }
    assert options - {"--help"} == set(fastrun.FLAGS) | set(fastrun.VALUES)


@pytest.mark.parametrize("command", [None, "run", "find", "submit", "index", "policy"])
@pytest.mark.parametrize("width", ["", "57", "200"])
def test_lean_parser_help_is_argparse_help(
    command: str | None, width: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parser that skips ``shutil`` prints the help argparse prints, at any width."""
    from tenantry.cli import parser as lean

    monkeypatch.setattr(lean, "_COLUMNS", [])
    if width:
        monkeypatch.setenv("COLUMNS", width)
    else:
        monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(lean, "Parser", argparse.ArgumentParser)
    plain = build_parser(command)
    monkeypatch.undo()
    monkeypatch.setattr(lean, "_COLUMNS", [])
    if width:
        monkeypatch.setenv("COLUMNS", width)
    else:
        monkeypatch.delenv("COLUMNS", raising=False)
    fast = build_parser(command)
    assert type(fast) is lean.Parser and type(plain) is argparse.ArgumentParser

    def helps(p: argparse.ArgumentParser) -> list[str]:
        out = [p.format_help()]
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += [h for sub in action.choices.values() for h in helps(sub)]
        return out

    assert helps(fast) == helps(plain)


def test_every_submit_option_is_known_to_the_fast_reader() -> None:
    """A new ``submit`` option must be taught to ``fastrun`` (or it silently falls back)."""
    from tenantry.cli import fastrun

    sub = build_parser("submit")._subparsers
    assert sub is not None
    group = next(a for a in sub._group_actions if isinstance(a, argparse._SubParsersAction))
    options = {s for a in group.choices["submit"]._actions for s in a.option_strings}
    assert options - {"--help", "-h"} == set(fastrun.SUBMIT_FLAGS) | set(fastrun.SUBMIT_VALUES)
