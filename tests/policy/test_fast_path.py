"""The engine's fast path decides exactly like the plain one, on the corpus and generated requests.

``Engine.decide_all`` batches a decision's requests into one Cedar call
against the policies of their actions, parses the principal's entities once
and leaves out attributes and context keys no policy names. The reference
asks Cedar about each request alone, with every policy, every attribute and
the whole context. The glob credential check walks a trie of the patterns;
its reference is the pattern-by-pattern check.

``TENANTRY_POLICY_EXAMPLES`` sets how many requests hypothesis generates per
property (default 150; the full run uses more).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tenantry.core.models import AgentProduct, Principal
from tenantry.core.secrets import HOME_SECRETS
from tenantry.safety.policy.cases import case_params, case_principal, load_cases
from tenantry.safety.policy.engine import Engine, Outcome, Request
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Decision, Judge
from tenantry.safety.policy.paths import (
    PathContext,
    _compiled,
    _glob_covers,
    _glob_covers_any,
    _probes,
    classify,
    credential,
)

from .conftest import CASES, CWD

EXAMPLES = int(os.environ.get("TENANTRY_POLICY_EXAMPLES", "150"))

# a facility policy that reads what the baseline does not: context keys (``hour``,
# ``where``) and a resource attribute named only by ``has`` (``via``)
FACILITY = """
@id("facility-night-gpu")
@message("no GPU jobs at night")
forbid (principal is Agent, action == Action::"submit_job", resource is Job)
when { resource.gpus > 0 && (context.hour < 6 || context.hour > 22) };

@id("facility-lease-only-make")
@message("make runs on a lease here")
forbid (principal is Agent, action == Action::"run_command", resource is Command)
when { resource.program == "make" && context.where == "login" };

@id("facility-has-via")
@message("no programs run through a variable")
forbid (principal is Agent, action == Action::"run_command", resource is Command)
when { resource has via && context.uncertain_kind == "variable" };
"""


class Reference(Engine):
    """Every request alone through ``decide_reference``: no batch, subset, pruning or cache."""

    def decide_all(
        self, principal: dict[str, Any], entities_json: str, reqs: list[Request]
    ) -> list[Outcome]:
        entities = json.loads(f"[{entities_json}]")
        return [self.decide_reference(principal, entities, r) for r in reqs]


def _judges(facts: Facts, facility: str | None, hour: int = 12) -> tuple[Judge, Judge]:
    where = ("facility.cedar", facility) if facility else None
    fast = Judge(Engine(facility=where), facts, read_files=False, hour=hour)
    slow = Judge(Reference(facility=where), facts, read_files=False, hour=hour)
    return fast, slow


def _same(fast: Judge, slow: Judge, p: Principal, action: str, params: dict[str, Any]) -> None:
    fast.clear_cache()
    fast.engine.clear_cache()
    cold = fast.evaluate(p, action, params)
    warm = fast.evaluate(p, action, params)  # answered from the caches
    fast.clear_cache()
    engine_only = fast.evaluate(p, action, params)  # normalized again, Cedar outcomes cached
    ref = slow.evaluate(p, action, params)
    for got in (cold, warm, engine_only):
        assert _view(got) == _view(ref), (action, params)


def _view(d: Decision) -> tuple[Any, ...]:
    return (d.allowed, d.rule, d.message, d.source, d.warnings, d.checks)


@pytest.mark.parametrize("facility", [None, FACILITY], ids=["baseline", "facility"])
def test_fast_path_decides_like_the_reference_on_the_whole_corpus(
    facts: Facts, facility: str | None
) -> None:
    fast, slow = _judges(facts, facility)
    cases = load_cases(CASES)
    assert len(cases) > 500
    for case in cases:
        params = case_params(case["action"], case["args"], case.get("context"))
        _same(fast, slow, case_principal(case), case["action"], params)


def test_unread_keys_are_not_sent_but_has_still_sees_its_attribute(facts: Facts) -> None:
    engine = Engine(facility=("facility.cedar", FACILITY))
    # named only by ``has``: kept, or ``resource has line`` would turn false
    assert {"via", "hour", "where"} <= engine.used_attrs
    assert "via" not in Engine().used_attrs
    assert not {"raw", "args", "reason"} & engine.used_attrs
    fast, slow = _judges(facts, FACILITY, hour=3)
    p = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1", project="chem")
    night = {"argv": ["sbatch", "-G", "1", "-t", "10", "job.sh"], "cwd": CWD}
    d = fast.evaluate(p, "submit_job", night)
    assert (d.allowed, d.rule) == (False, "facility-night-gpu")
    assert _view(d) == _view(slow.evaluate(p, "submit_job", night))


def test_a_policy_reading_the_whole_context_gets_all_of_it(facts: Facts) -> None:
    whole = """
@id("facility-exact-context")
@message("never with exactly this context")
forbid (principal, action == Action::"read_path", resource is Path)
when { context == {"source": "direct", "uncertain": false, "uncertain_kind": "",
  "reason": "", "hour": 12, "where": "",
  "limits": {"agent_max_gpus": 8, "agent_max_nodes": 8, "agent_max_time_s": 172800,
             "agent_max_array": 1000, "agent_max_cpus": 1024}} };
"""
    fast, slow = _judges(facts, whole)
    p = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1", project="chem")
    params = {"path": "/home/alice/proj/a.txt", "cwd": CWD}
    d = fast.evaluate(p, "read_path", params)
    assert _view(d) == _view(slow.evaluate(p, "read_path", params))
    assert d.rule == "facility-exact-context", d.message


def test_an_engine_failure_in_the_batch_denies_every_request(
    facts: Facts, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cedarpy

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("engine down")

    monkeypatch.setattr(cedarpy, "is_authorized_batch", broken)
    fast, _ = _judges(facts, None)
    p = Principal(1000, "alice")
    d = fast.evaluate(p, "run_command", {"command": "ls; cat a", "cwd": CWD})
    assert (d.allowed, d.rule) == (False, "evaluation-error")
    assert d.checks and all(c["decision"] == "deny" for c in d.checks)


# --- generated requests ---------------------------------------------------------------

PROGRAMS = ["ls", "cat", "rm -rf", "sudo", "doas -u root", "env -i PATH=/tmp/evil", "xargs",
            "sbatch -t 10", "srun -n1", "salloc -N 1", "scancel", "scontrol hold",
            "scontrol update jobid=1002 timelimit=10", "git push", "git status", "make",
            "rsync -e ssh", "tar -cf x.tar", "find . -exec", "python3 -c 'print(1)'", "bash -c",
            "watch -n 1", "chmod +x", "echo", "printf '%s\\n'", "cp", "ln -s", "tee", "nohup",
            "squeue -u bob", "sacctmgr modify user bob", "systemctl restart slurmd"]  # fmt: skip
ARGS = ["~/.ssh/id_rsa", "/etc/shadow", "~/*", "~/.ss?/id_*", "/tmp/x.sh", "1001", "1002",
        "2001", "1002_3", "job.sh", "--wrap 'srun x'", "-p gpu", "--gres=gpu:2", "-N 2",
        "$HOME/.bashrc", "/home/bob/data", "'sudo id'", "./x.sh", "~/.bashrc", "-t UNLIMITED",
        "/proc/self/root/etc/passwd", "$(whoami)", "--reservation=maint", "..", "-A physics",
        "~bob/.netrc", "/home/*/.aws/*", "{}", "\\;", "--qos=debug", "-G 9", "--array=0-5000",
        "results/", "b:", "/etc/munge/*", "$X", "\"$(cat ~/.netrc)\"", "-o /home/alice/.ssh/x",
        "--export=ALL,LD_PRELOAD=/tmp/x.so", "> ~/.bashrc", "< /etc/shadow", "2>&1"]  # fmt: skip
SEPS = [" ; ", " && ", " | ", " || ", "\n"]
SCRIPT_LINES = ["#SBATCH -p gpu", "#SBATCH --gres=gpu:2", "#SBATCH -t 10", "#SBATCH -A physics",
                "#SBATCH --time=UNLIMITED", "#SBATCH -D /home/alice/.ssh", "srun x",
                "sudo id", "module load gcc", "scancel 1002", "cat ~/.ssh/id_rsa"]  # fmt: skip

simple = st.builds(
    lambda prog, args: " ".join([prog, *args]),
    st.sampled_from(PROGRAMS),
    st.lists(st.sampled_from(ARGS), max_size=4),
)
commands = st.builds(
    lambda parts, seps: "".join(p + s for p, s in zip(parts, seps, strict=False)) + parts[-1],
    st.lists(simple, min_size=1, max_size=3),
    st.lists(st.sampled_from(SEPS), min_size=2, max_size=2),
)
principals = st.sampled_from(
    [
        Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1", project="chem"),
        Principal(1000, "alice"),
        Principal(1001, "bob", AgentProduct.CODEX, "s2", project="physics"),
    ]
)
requests = st.one_of(
    st.builds(lambda c: ("run_command", {"command": c, "cwd": CWD}), commands),
    st.builds(
        lambda c, w: ("run_command", {"command": c, "cwd": CWD, "where": w}),
        commands,
        st.sampled_from(["local", "lease", "auto"]),
    ),
    st.builds(
        lambda opts, lines: (
            "submit_job",
            {
                "argv": ["sbatch", *" ".join(opts).split(), "job.sh"],
                "cwd": CWD,
                "script_text": "#!/bin/bash\n" + "\n".join(lines) + "\n",
            },
        ),
        st.lists(st.sampled_from(["-t 10", "-p gpu", "-G 2", "-N 9", "--qos=debug", "-A x"])),
        st.lists(st.sampled_from(SCRIPT_LINES), max_size=4),
    ),
    st.builds(
        lambda act, paths: (act, {"paths": paths, "cwd": CWD}),
        st.sampled_from(["read_path", "write_path"]),
        st.lists(st.sampled_from(ARGS), min_size=1, max_size=3),
    ),
    st.builds(
        lambda act, ids: (act, {"ids": ids}),
        st.sampled_from(["cancel_job", "modify_job", "read_job_output"]),
        st.lists(st.sampled_from(["1001", "1002", "1003", "2001", "99", "1002_3"]), min_size=1),
    ),
)


@pytest.fixture(scope="module")
def pairs(facts: Facts) -> dict[bool, tuple[Judge, Judge]]:
    """(fast, reference) judges at 3 a.m., without and with the facility policy."""
    return {False: _judges(facts, None, hour=3), True: _judges(facts, FACILITY, hour=3)}


@settings(max_examples=EXAMPLES, deadline=None, database=None)
@given(p=principals, request=requests, facility=st.booleans())
def test_fast_path_decides_like_the_reference_on_generated_requests(
    pairs: dict[bool, tuple[Judge, Judge]],
    p: Principal,
    request: tuple[str, dict[str, Any]],
    facility: bool,
) -> None:
    fast, slow = pairs[facility]
    action, params = request
    _same(fast, slow, p, action, params)


HOMES = ["/home/alice", "/home/bob", "/home", "/root", "/tmp", "/etc", "/home/alice/proj"]
PARTS = [*sorted({q for rel in HOME_SECRETS for q in rel.split("/")}),
         "*", "?", ".*", ".ss?", "[.]ssh", "id_*", ".s*", "x", "*.json", ".config", ""]  # fmt: skip
globs = st.builds(
    lambda home, parts: "/".join([home, *parts]),
    st.sampled_from(HOMES),
    st.lists(st.sampled_from(PARTS), min_size=0, max_size=4),
)


@settings(max_examples=EXAMPLES * 4, deadline=None, database=None)
@given(glob=globs, home=st.sampled_from(["/home/alice", "/root"]))
def test_the_trie_covers_exactly_what_the_patterns_cover(glob: str, home: str) -> None:
    pats = _compiled(home, "/home")[1]
    expected = any(_glob_covers(glob, pat.replace("*", "x")) for pat in pats)
    assert _glob_covers_any(glob, _probes(home, "/home")) == expected, glob


@settings(max_examples=EXAMPLES * 4, deadline=None, database=None)
@given(
    raw=st.one_of(globs, st.sampled_from(ARGS)), cwd=st.sampled_from([*HOMES, "/home/alice/.ssh"])
)
def test_the_credential_check_alone_agrees_with_classify(raw: str, cwd: str) -> None:
    ctx = PathContext(cwd=cwd, home="/home/alice", user="alice", homes_root="/home")
    assert credential(raw, ctx) == classify(raw, ctx).credential, raw
