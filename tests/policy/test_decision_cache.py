"""The decision cache: consulted on the raw request, before normalization.

The measured cost: every request was normalized before the outcome cache was
asked (269-307 us p50). A repeated request now skips normalization, and one
whose symlinks, scripts or facts changed is judged afresh.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.models import Principal
from tenantry.safety.policy import judge as judge_mod
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge


@pytest.fixture
def fresh(facts: Facts) -> Judge:
    return Judge(Engine(), facts, read_files=True, hour=12)


def _count_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = judge_mod.build  # type: ignore[attr-defined]

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(judge_mod, "build", counting)
    return calls


def test_repeated_request_is_not_normalized_again(
    fresh: Judge, agent: Principal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_builds(monkeypatch)
    params = {"argv": ["true"], "cwd": str(tmp_path), "env": {"PATH": "/usr/bin:/bin"}}
    first = fresh.evaluate(agent, "run_command", params)
    again = fresh.evaluate(agent, "run_command", dict(params))
    assert first.allowed and again.allowed
    assert calls[0] == 1 and fresh.cache_hits == 1
    assert again.rule == first.rule and again.checks == first.checks
    # a hit is a copy: what a caller appends does not leak into the next hit
    again.warnings.append("mine")
    assert "mine" not in fresh.evaluate(agent, "run_command", params).warnings
    # another principal, action or params is its own entry
    fresh.evaluate(dataclasses.replace(agent, session="s2"), "run_command", params)
    fresh.evaluate(agent, "run_command", {**params, "argv": ["false"]})
    assert calls[0] == 3


def test_a_changed_symlink_is_judged_again(fresh: Judge, agent: Principal, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hi\n")
    link = tmp_path / "lnk"
    link.symlink_to(tmp_path / "notes.txt")
    params = {"argv": ["cat", str(link)], "cwd": str(tmp_path)}
    assert fresh.evaluate(agent, "run_command", params).allowed
    link.unlink()
    link.symlink_to("/home/alice/.ssh/id_rsa")
    d = fresh.evaluate(agent, "run_command", params)
    assert not d.allowed, d.message
    assert fresh.cache_hits == 0


def test_a_changed_script_is_judged_again(fresh: Judge, agent: Principal, tmp_path: Path) -> None:
    script = tmp_path / "s.sh"
    script.write_text("echo hello\n")
    params = {"argv": ["bash", "s.sh"], "cwd": str(tmp_path)}
    assert fresh.evaluate(agent, "run_command", params).allowed
    assert fresh.evaluate(agent, "run_command", params).allowed
    assert fresh.cache_hits == 1
    script.write_text("cat /home/alice/.ssh/id_rsa\n")
    d = fresh.evaluate(agent, "run_command", params)
    assert not d.allowed, d.message
    assert fresh.cache_hits == 1


def test_new_facts_empty_the_cache(
    fresh: Judge, agent: Principal, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _count_builds(monkeypatch)
    params = {"argv": ["true"], "cwd": str(tmp_path)}
    fresh.evaluate(agent, "run_command", params)
    fresh.set_facts(fresh.facts)
    fresh.evaluate(agent, "run_command", params)
    assert calls[0] == 2 and fresh.cache_hits == 0


@pytest.mark.parametrize("form", ["argv", "command"])
def test_a_bare_relative_symlink_is_resolved_from_the_commands_cwd(
    fresh: Judge, agent: Principal, tmp_path: Path, form: str
) -> None:
    """``cat lnk`` with ``lnk -> ~/.ssh/id_rsa``: a plain word that names a link is a path."""
    link = tmp_path / "lnk"
    link.symlink_to("/home/alice/.ssh/id_rsa")
    spec: dict[str, Any] = {"argv": ["cat", "lnk"]} if form == "argv" else {"command": "cat lnk"}
    d = fresh.evaluate(agent, "run_command", {**spec, "cwd": str(tmp_path)})
    assert not d.allowed, d.message
    # the same word where it names a plain file stays an ordinary argument
    other = tmp_path / "sub"
    other.mkdir()
    (other / "lnk").write_text("notes\n")
    assert fresh.evaluate(agent, "run_command", {**spec, "cwd": str(other)}).allowed
    # and a link that changes into a key is judged again, not served from the cache
    (other / "lnk").unlink()
    (other / "lnk").symlink_to("/home/alice/.ssh/id_rsa")
    assert not fresh.evaluate(agent, "run_command", {**spec, "cwd": str(other)}).allowed
