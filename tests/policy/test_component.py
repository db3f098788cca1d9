"""PolicyService: authorize raises PolicyDenied with the rule, emits events, finds owners."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import PolicyDenied, UsageError
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.safety.policy import ops as policy_ops
from tenantry.safety.policy.component import PolicyService, create
from tenantry.service.ops import OpContext
from tenantry.service.runtime import Runtime
from tenantry.store.journal import Journal


def runtime(state: Path, **env: str) -> tuple[Runtime, list[Event]]:
    settings = load(env={"TENANTRY_STATE_DIR": str(state), **env})
    bus = Bus()
    seen: list[Event] = []

    async def grab(e: Event) -> None:
        seen.append(e)

    bus.subscribe(grab)
    rt = Runtime(settings, None, bus, None)  # type: ignore[arg-type]
    return rt, seen


AGENT = Principal(0, "root", AgentProduct.CODEX, "th-1")


async def started(rt: Runtime) -> PolicyService:
    svc = create(rt)
    rt.components["policy"] = svc
    await svc.start()
    return svc


async def test_authorize_denies_with_rule_and_emits(tmp_path: Path) -> None:
    rt, seen = runtime(tmp_path, TENANTRY_POLICY_FILE=str(tmp_path / "none.cedar"))
    svc = await started(rt)
    with pytest.raises(PolicyDenied) as info:
        await svc.authorize(AGENT, "run_command", {"argv": ["bash", "-c", "sudo id"]})
    err = info.value
    assert err.details["rule"] == "agent-no-privilege-escalation"
    assert err.to_dict()["code"] == "policy_denied" and "sudo" in err.message
    ok = await svc.authorize(AGENT, "run_command", {"argv": ["true"], "cwd": str(tmp_path)})
    assert ok.allowed and ok.rule == "agent-run-command"
    assert all(len(e.data["input_sha256"]) == 64 for e in seen)
    assert seen[0].data["input_sha256"] != seen[1].data["input_sha256"]
    kinds = [(e.type, e.outcome, e.data["rule"]) for e in seen]
    assert kinds == [
        (EventType.POLICY_DECISION, "deny", "agent-no-privilege-escalation"),
        (EventType.POLICY_DECISION, "allow", "agent-run-command"),
    ]
    assert await svc.gate(AGENT, "facility.info", None, {}) == []
    with pytest.raises(UsageError):
        await svc.gate(AGENT, "commands.run", "run_command", {"argv": "ls"})
    await svc.aclose()


async def test_broken_facility_policy_denies_everything(tmp_path: Path) -> None:
    bad = tmp_path / "policy.cedar"
    bad.write_text("permit (principal, action, resource")
    rt, _ = runtime(tmp_path, TENANTRY_POLICY_FILE=str(bad))
    svc = await started(rt)
    human = Principal(0, "root")
    d = svc.check(human, "run_command", {"argv": ["true"]})
    assert (d.allowed, d.rule) == (False, "policy-invalid")
    bad.write_text("")
    svc.reload()
    assert svc.check(human, "run_command", {"argv": ["true"]}).allowed


async def test_user_policy_in_state_dir_narrows(tmp_path: Path) -> None:
    (tmp_path / "policy.cedar").write_text(
        '@id("me-no-make")\n@message("no make please")\n'
        'forbid (principal is Agent, action == Action::"run_command", resource is Command)\n'
        'when { resource.program == "make" };\n'
    )
    rt, _ = runtime(tmp_path, TENANTRY_POLICY_FILE="")
    svc = await started(rt)
    d = svc.check(AGENT, "run_command", {"command": "make -j4", "cwd": str(tmp_path)})
    assert (d.allowed, d.rule, d.source) == (False, "me-no-make", "user")


async def test_job_owners_come_from_the_store(tmp_path: Path) -> None:
    rt, _ = runtime(tmp_path, TENANTRY_POLICY_FILE="")
    journal = Journal(rt.settings.db_path)
    await journal.start()
    for job_id, backend_id, key in [
        ("t1", "501", AGENT.key),
        ("t2", "502", "root/human/-"),
        ("t3", "503", "bob/codex/x"),
    ]:
        await journal.db.execute(
            "INSERT INTO jobs (id, backend, backend_id, phase, state, principal, uid, spec_json,"
            " spec_hash, submitted_at, updated_at) VALUES (?, 'fake', ?, 'handed', 'RUNNING',"
            " ?, 0, '{}', '', 0, ?)",
            (job_id, backend_id, key, time.time()),
        )
    rt.journal = journal
    svc = await started(rt)
    assert svc.check(AGENT, "cancel_job", {"id": "t1"}).allowed
    assert svc.check(AGENT, "run_command", {"command": "scancel 501_2"}).allowed
    d = svc.check(AGENT, "run_command", {"command": "scancel 502"})
    assert (d.allowed, d.rule) == (False, "default-deny")
    assert svc.check(AGENT, "cancel_job", {"id": "503"}).rule == "agent-not-others-jobs"
    assert svc.check(AGENT, "read_job_output", {"id": "t2"}).allowed
    await svc.aclose()
    await journal.aclose()


async def test_policy_check_op(tmp_path: Path) -> None:
    rt, _ = runtime(tmp_path, TENANTRY_POLICY_FILE="")
    await started(rt)
    human = Principal(0, "root")
    ctx = OpContext(human, rt)
    out: dict[str, Any] = await policy_ops.check(
        ctx, {"action": "run_command", "params": {"command": "sudo id"}, "agent": "codex"}
    )
    assert out["decision"] == "deny" and out["rule"] == "agent-no-privilege-escalation"
    out = await policy_ops.check(ctx, {"action": "run_command", "params": {"command": "sudo id"}})
    assert out["decision"] == "allow"  # as the human caller
    with pytest.raises(UsageError):
        await policy_ops.check(ctx, {"action": "run_command", "agent": "robot"})


class _InfoBackend:
    async def info(self) -> dict[str, Any]:
        return {
            "backend": "slurm",
            "partitions": [
                {"name": "debug", "default": True, "max_time_s": 1800, "default_time_s": 600,
                 "total_nodes": 2},
                {"name": "long", "max_time_s": float("inf"), "default_time_s": None},
            ],
        }  # fmt: skip


async def test_partitions_come_from_the_backend(tmp_path: Path) -> None:
    rt, _ = runtime(tmp_path, TENANTRY_POLICY_FILE="", TENANTRY_BACKEND="slurm")
    rt.backend = _InfoBackend()  # type: ignore[assignment]
    svc = await started(rt)
    assert svc.judge is not None
    parts = svc.judge.facts.partitions
    assert (parts["debug"].max_time_s, parts["debug"].default, parts["long"].max_time_s) == (
        1800,
        True,
        0,
    )
    d = svc.check(AGENT, "submit_job", {"argv": ["sbatch", "-t", "2:00:00", "x.sh"]})
    assert (d.allowed, d.rule) == (False, "job-over-partition-time")
    d = svc.check(AGENT, "submit_job", {"argv": ["sbatch", "-p", "nope", "-t", "10", "x.sh"]})
    assert d.rule == "job-unknown-partition" and "debug, long" in d.message
    assert svc.check(AGENT, "submit_job", {"argv": ["sbatch", "-p", "long", "x.sh"]}).allowed


def test_decision_digest_is_the_canonical_json_of_the_params_with_its_env() -> None:
    import hashlib
    import json

    from tenantry.safety.policy.component import _digest

    def plain(params: dict[str, Any]) -> str:
        raw = json.dumps(params, sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()

    env = {"PATH": "/usr/bin", "LANG": "é", "A": "1"}
    params: dict[str, Any] = {"where": "lease", "argv": ["true"], "cwd": "/w", "env": env}
    assert _digest(params) == plain(params)
    assert _digest(params) == plain(params)  # the environment's text, kept
    env["A"] = "2"  # the same object, changed: its text is made again
    assert _digest(params) == plain(params)
    assert _digest({"argv": ["x"], "timeout_s": None}) == plain({"argv": ["x"], "timeout_s": None})
