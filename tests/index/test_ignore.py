"""Ignore rules judged like git judges them (``git check-ignore`` is the oracle)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tenantry.index.crawl import load_rules
from tenantry.index.ignore import GlobFilter, Rules, is_ignored

from .conftest import git_ignored

RULES = {
    "": "*.log\n!important.log\nbuild/\n/rootonly\ndocs/**/draft*\n#comment\n\\#hash\n",
    "a": "!*.log\nlocal\n*.tmp\n",
    "a/b": "*.log\n!keep.tmp\n",
}
PATHS = [
    ("x.log", False),
    ("important.log", False),
    ("a/x.log", False),
    ("a/b/x.log", False),
    ("a/b/c/x.log", False),
    ("build", True),
    ("a/build", True),
    ("build.txt", False),
    ("rootonly", False),
    ("a/rootonly", False),
    ("docs/draft1", False),
    ("docs/x/y/draft2.md", False),
    ("docs/final", False),
    ("a/local", False),
    ("a/b/local", True),
    ("a/f.tmp", False),
    ("a/b/keep.tmp", False),
    ("a/b/other.tmp", False),
    ("#hash", False),
    ("a/#hash", False),
    ("plain.txt", False),
]


def test_is_ignored_agrees_with_git(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for base, text in RULES.items():
        (tmp_path / base).mkdir(parents=True, exist_ok=True)
        (tmp_path / base / ".gitignore").write_text(text)
    chain_of: dict[str, list[Rules]] = {}

    def chain(rel: str) -> list[Rules]:
        parts = rel.split("/")[:-1]
        out = []
        for i in range(len(parts) + 1):
            anc = "/".join(parts[:i])
            if anc not in chain_of:
                rules = load_rules(str(tmp_path), anc)
                chain_of[anc] = [rules] if rules else []
            out += chain_of[anc]
        return out

    queries = [p + ("/" if is_dir else "") for p, is_dir in PATHS]
    want = {p.rstrip("/") for p in git_ignored(tmp_path, queries)}
    got = {p for p, is_dir in PATHS if is_ignored(chain(p), p, is_dir)}
    assert got == want
    assert len(want) >= 8  # the table exercises both verdicts
    assert ".git" not in want and is_ignored([], ".git", True)


def test_glob_filter_follows_rg_rules() -> None:
    only_py = GlobFilter(["*.py"])
    assert only_py("a/b/c.py") and not only_py("a/b/c.txt")
    no_tests = GlobFilter(["!tests/"])
    assert no_tests("src/a.py") and not no_tests("tests/a.py") and not no_tests("x/tests/a.py")
    later_wins = GlobFilter(["*.py", "!gen_*"])
    assert later_wins("a.py") and not later_wins("gen_a.py")
    pruned = GlobFilter(["!vendor", "*.go"])
    assert not pruned("vendor/x.go") and pruned("cmd/x.go")
    assert GlobFilter([])("anything")
