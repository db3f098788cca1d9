"""The environment's JSON is made once per environment, and again when it changes.

Measured: the judge serialized (and hashed) the whole forwarded environment for
every request's cache key, the largest part of a warm decision.
"""

from __future__ import annotations

import json

from tenantry.core.models import AgentProduct, Principal
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.envmemo import EnvJson
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.judge import Judge


def test_text_is_reused_while_the_environment_is_unchanged() -> None:
    memo = EnvJson(separators=(",", ":"))
    env = {"PATH": "/usr/bin", "HOME": "/home/alice"}
    first = memo(env)
    assert first == json.dumps(env, separators=(",", ":"))
    assert memo(env) is first  # the same string: its hash is computed once
    env["PATH"] = "/tmp/evil:/usr/bin"  # changed in place: serialized again
    assert json.loads(memo(env))["PATH"] == "/tmp/evil:/usr/bin"
    nested = {"X": ["a"]}  # not plain strings: never reused
    assert memo(nested) == '{"X":["a"]}'
    nested["X"].append("b")
    assert memo(nested) == '{"X":["a","b"]}'


def test_a_changed_environment_is_judged_again(facts: Facts) -> None:
    judge = Judge(Engine(), facts, read_files=False, hour=12)
    p = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1", project="chem")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/home/alice"}
    params = {"argv": ["ls"], "cwd": "/home/alice/proj", "env": env}
    assert judge.evaluate(p, "run_command", params).allowed
    hits = judge.cache_hits
    assert judge.evaluate(p, "run_command", params).allowed
    assert judge.cache_hits == hits + 1
    env["LD_PRELOAD"] = "/tmp/x.so"  # the same dict, now with a planted library
    d = judge.evaluate(p, "run_command", params)
    assert judge.cache_hits == hits + 1  # not answered from the cache
    assert (d.allowed, d.rule) == (False, "agent-no-env-hijack"), d.message
