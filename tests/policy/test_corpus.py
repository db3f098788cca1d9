"""The evasion/allow corpus, judged through `tenantry policy test` itself."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from tenantry.cli.main import main
from tenantry.safety.policy.cases import load_cases

from .conftest import CASES, FACTS


def test_corpus_passes_through_policy_test(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["policy", "test", str(CASES), "--facts", str(FACTS)])
    out = capsys.readouterr().out
    n = len(load_cases(CASES))
    assert out.strip().splitlines()[-1] == f"{n} passed, 0 failed", out[-2000:]
    assert code == 0


def test_corpus_is_big_and_balanced() -> None:
    cases = load_cases(CASES)
    assert len(cases) >= 150
    by = Counter((c["group"], c["expected"]) for c in cases)
    for group in ("shell", "slurm", "paths", "ownership"):
        assert by[(group, "deny")] >= 10, group
    # allow cases an over-blocking gate would fail
    assert by[("allow", "allow")] + by[("ownership", "allow")] >= 60
    assert all(c.get("why") for c in cases)
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))


def test_failures_print_false_allows_first_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        {"id": "a-false-deny", "action": "run_command", "args": "sudo id", "expected": "allow"},
        {"id": "b-false-allow", "action": "run_command", "args": "ls", "expected": "deny"},
        {"id": "c-ok", "action": "run_command", "args": "ls", "expected": "allow"},
        {
            "id": "d-wrong-rule",
            "action": "run_command",
            "args": "sudo id",
            "expected": "deny",
            "rule": "agent-no-kill-all",
        },
    ]
    f = tmp_path / "c.jsonl"
    f.write_text("// comment\n\n" + "\n".join(json.dumps(x) for x in lines) + "\n")
    code = main(["policy", "test", str(f), "--facts", str(FACTS)])
    out = capsys.readouterr().out
    assert code == 1
    assert out.index("FALSE ALLOW b-false-allow") < out.index("FALSE DENY a-false-deny")
    assert "WRONG RULE d-wrong-rule" in out
    assert out.strip().splitlines()[-1] == "1 passed, 3 failed"


def test_json_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text(json.dumps({"id": "x", "action": "read_path", "args": "~/.netrc",
                             "expected": "allow"}) + "\n")  # fmt: skip
    assert main(["policy", "test", str(f), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["failed"] == 1 and data["failures"][0]["rule"] == "agent-no-credentials"


def test_bad_case_file_is_a_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "c.jsonl"
    f.write_text('{"id": "x", "action": "run_command"}\n')
    assert main(["policy", "test", str(f)]) == 2


@pytest.mark.parametrize("sub", ["check", "test"])
def test_help_teaches_with_examples(sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["policy", sub, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and f"tenantry policy {sub}" in out


def test_local_check(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["policy", "check", "--local", "--facts", str(FACTS), "--agent", "codex",
                 "--action", "run_command", "--command", "scancel -u bob", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 77 and out["rule"] == "agent-not-others-jobs"
    assert [c["action"] for c in out["checks"]] == ["run_command", "cancel_job"]
