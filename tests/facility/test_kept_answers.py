"""An executor keeps the facility's reusable policy answers, and only while they hold.

The service runs in-process (fake backend, no root, no Slurm); the executor's
channel hands each request to it as a proven peer (``FacilityService.call``),
counting what reaches the service.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import pytest

from tenantry.core.errors import SessionStopped
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.facility.answers import KeptAnswers
from tenantry.facility.executor import Executor, Forwarder, RemoteGate
from tenantry.facility.link import claims_of
from tenantry.facility.seams import FacilityChannel, FacilityRequest, Peer
from tenantry.facility.service import FacilityService
from tenantry.safety.policy.component import PolicyService
from tenantry.service.runtime import Runtime

ME = os.environ.get("USER") or "root"


class ServiceChannel(FacilityChannel):
    """The executor's channel to an in-process service; counts each op it carries."""

    def __init__(self, svc: FacilityService) -> None:
        super().__init__("loop://service", 5.0)
        self.svc = svc
        self.sent: list[str] = []

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        self.sent.append(req.op)
        peer = Peer(uid=os.getuid(), gid=os.getgid(), host="login1", via="test")
        out = await self.svc.call(peer, claims_of(req.principal), req.op, dict(req.params))
        return out["result"], list(out["warnings"])

    async def aclose(self) -> None:
        return None

    def checks(self) -> int:
        return self.sent.count("policy.check")


@dataclasses.dataclass
class Setup:
    rt: Runtime
    svc: FacilityService
    link: ServiceChannel
    executor: Executor
    forwarder: Forwarder
    events: list[Event]
    ws: Path


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    from tenantry.backends.fake import FakeBackend
    from tenantry.core.settings import Settings
    from tenantry.gateway.app import open_runtime
    from tenantry.gateway.facility import FACILITY_COMPONENTS, service_settings
    from tenantry.store.journal import Journal

    settings = service_settings(
        Settings(
            state_dir=str(tmp_path / "svc"),
            policy_file=str(tmp_path / "none.cedar"),
            memory_verify_interval_s=0.0,
            facility_staff_group="",
        )
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    async with open_runtime(settings, FakeBackend(), FACILITY_COMPONENTS) as rt:
        svc = rt.components["facility_service"]
        assert isinstance(svc, FacilityService)
        link = ServiceChannel(svc)
        ex_rt = Runtime(Settings(facility_address="/x"), cast(Journal, None), Bus(), FakeBackend())
        executor = Executor(ex_rt)
        executor.link = link
        events: list[Event] = []

        async def seen(ev: Event) -> None:
            events.append(ev)

        ex_rt.bus.subscribe(seen)
        watcher = asyncio.create_task(executor._watch_stops())
        try:
            # the service learns of the user at its first decision (new facts): before it
            await link.call(AGENT, "policy.check", _ask("true", ws))
            await _until(lambda: executor.answers.version == svc.policy_version())
            link.sent.clear()
            forwarder = Forwarder(link, executor.answers, ex_rt.bus)
            yield Setup(rt, svc, link, executor, forwarder, events, ws)
        finally:
            watcher.cancel()
            await asyncio.gather(watcher, return_exceptions=True)


AGENT = Principal(
    uid=os.getuid(), user=ME, agent=AgentProduct.CLAUDE_CODE, session="s1", host="login1"
)


async def _until(cond: Any, timeout_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not cond():
        assert loop.time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def _ask(command: str, cwd: Path) -> dict[str, Any]:
    return {"action": "run_command", "command": command,
            "params": {"command": command, "cwd": str(cwd)}}  # fmt: skip


async def _check(s: Setup, command: str, who: Principal = AGENT) -> dict[str, Any]:
    result, _ = await s.forwarder.forward(who, "policy.check", _ask(command, s.ws), "")
    assert isinstance(result, dict)
    return result


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return {**a, "duration_us": 0} == {**b, "duration_us": 0}


async def test_an_allow_is_kept_and_answered_again_as_the_service_answers_it(s: Setup) -> None:
    first = await _check(s, "head a.txt")
    assert first["decision"] == "allow" and "reuse" not in first
    again = await _check(s, "head a.txt")
    assert s.link.checks() == 1  # the second answer did not go to the service
    assert _same(again, first)
    fresh, _ = await s.link.call(AGENT, "policy.check", _ask("head a.txt", s.ws))
    assert _same(again, fresh)
    kept = [e for e in s.events if e.type is EventType.POLICY_DECISION]
    assert [(e.principal, e.outcome, e.data.get("kept")) for e in kept] == [
        (AGENT.key, "allow", True)  # on the bus, which the executor sends to the service
    ]
    other = dataclasses.replace(AGENT, session="s2")
    await _check(s, "head a.txt", other)  # another principal: its own answer
    assert s.link.checks() == 3


async def test_a_denial_is_never_kept(s: Setup) -> None:
    for _ in range(2):
        assert (await _check(s, "sudo id"))["decision"] == "deny"
    assert s.link.checks() == 2 and len(s.executor.answers) == 0


async def test_a_changed_symlink_asks_the_service_again(s: Setup) -> None:
    assert (await _check(s, "head a.txt"))["decision"] == "allow"
    (s.ws / "a.txt").unlink()
    (s.ws / "a.txt").symlink_to("/etc/munge/munge.key")  # a credential
    now = await _check(s, "head a.txt")
    assert s.link.checks() == 2
    fresh, _ = await s.link.call(AGENT, "policy.check", _ask("head a.txt", s.ws))
    assert _same(now, fresh) and now["decision"] == "deny"


async def test_new_facts_at_the_service_drop_what_the_executor_kept(s: Setup) -> None:
    await _check(s, "head a.txt")
    before = s.executor.answers.version
    policy = s.rt.gates["policy"]
    assert isinstance(policy, PolicyService) and policy.judge is not None
    facts = policy.judge.facts
    policy.judge.set_facts(dataclasses.replace(facts, known_qos=facts.known_qos | {"new-qos"}))
    await _until(lambda: s.executor.answers.version not in (None, before))
    await _check(s, "head a.txt")
    assert s.link.checks() == 2
    await _check(s, "head a.txt")
    assert s.link.checks() == 2  # kept again, under the new version


async def test_a_stopped_session_is_refused_by_the_service_not_answered_from_kept(
    s: Setup,
) -> None:
    from tenantry.safety.kill.component import KillSwitch

    await _check(s, "head a.txt")
    kill = s.rt.gates["kill"]
    assert isinstance(kill, KillSwitch)
    human = Principal(uid=os.getuid(), user=ME)
    await kill.stop("session", AGENT.session, by=human, owner=ME)
    await _until(lambda: len(s.executor.answers) == 0)
    with pytest.raises(SessionStopped):
        await _check(s, "head a.txt")


async def test_a_broken_long_poll_keeps_nothing() -> None:
    answers = KeptAnswers()
    answers.announce("v1", 0)
    answers.put("k", {"decision": "allow", "reuse": {"version": "v1", "until": 4e9, "looks": []}})
    assert answers.get("k") == {"decision": "allow"}
    answers.forget()
    assert answers.get("k") is None
    answers.announce("v1", 0)
    assert answers.get("k") is None  # forgotten, not revived
    answers.put("k", {"decision": "allow", "reuse": {"version": "v0", "until": 4e9, "looks": []}})
    assert answers.get("k") is None  # given under another version: not kept


@pytest.fixture
def s(setup: Setup) -> Setup:
    return setup


def test_only_allows_resting_on_portable_or_fixed_looks_are_reusable() -> None:
    import os.path

    from tenantry.safety.policy import reuse
    from tenantry.safety.policy.judge import Decision

    def owner_of(job: str) -> None:
        return None

    def where_of(p: Any, params: Any) -> str:
        return "login"

    allow = Decision(True, "run_command", "r", "m")
    allow.looks = [(where_of, (AGENT, {}), "login"), (os.path.realpath, ("/a",), "/a")]
    got = reuse.describe(allow, "v", static=[where_of])
    assert got is not None and got["looks"] == [["realpath", "/a", "/a"]]
    assert reuse.describe(allow, "v") is None  # the placement, not declared fixed
    allow.looks = [(owner_of, ("12",), None)]
    assert reuse.describe(allow, "v") is None  # a job's owner changes with submissions
    deny = Decision(False, "run_command", "r", "m")
    assert reuse.describe(deny, "v") is None
    assert reuse.holds([["realpath", "/", "/"]])
    assert not reuse.holds([["realpath", "/", "/elsewhere"], ["unlink", "/", None]])


# --- kept decisions of an executor's own ops (routing.KEPT_DECISIONS) -----------------

LIST = {"all": True, "states": ["RUNNING", "PENDING"], "limit": 50}


def _gate(s: Setup) -> RemoteGate:
    return RemoteGate(s.link, s.executor.runtime, s.executor.answers)


async def test_a_job_listing_decision_is_kept_and_recorded_on_the_bus(s: Setup) -> None:
    gate = _gate(s)
    assert await gate.gate(AGENT, "jobs.list", "query_jobs", dict(LIST)) == []
    assert s.link.sent == ["facility.decide"]
    for _ in range(3):
        assert await gate.gate(AGENT, "jobs.list", "query_jobs", dict(LIST)) == []
    assert s.link.sent == ["facility.decide"]  # the next three did not go to the service
    kept = [e for e in s.events if e.type is EventType.POLICY_DECISION]
    assert [(e.subject, e.outcome, e.data.get("kept")) for e in kept] == [
        ("query_jobs", "allow", True)
    ] * 3
    other = dataclasses.replace(AGENT, session="s2")
    await gate.gate(other, "jobs.list", "query_jobs", dict(LIST))  # its own decision
    await gate.gate(AGENT, "jobs.list", "query_jobs", {**LIST, "limit": 10})  # other words
    assert s.link.sent == ["facility.decide"] * 3


async def test_an_op_that_acts_is_never_decided_from_kept(s: Setup) -> None:
    gate = _gate(s)
    run = {"argv": ["true"], "cwd": str(s.ws)}
    for _ in range(2):
        await gate.gate(AGENT, "commands.run", "run_command", dict(run))
    assert s.link.sent == ["facility.decide"] * 2 and len(s.executor.answers) == 0


async def test_a_counted_query_budget_makes_the_listing_decision_not_keepable(s: Setup) -> None:
    from tenantry.safety.budgets.config import Limit
    from tenantry.safety.budgets.service import BudgetService

    budgets = s.rt.gates["budgets"]
    assert isinstance(budgets, BudgetService)
    budgets.config = dataclasses.replace(
        budgets.cfg, limits=(*budgets.cfg.limits, Limit("session", "minute", "queries", 1000, 0.8))
    )
    gate = _gate(s)
    for _ in range(2):
        await gate.gate(AGENT, "jobs.list", "query_jobs", dict(LIST))
    assert s.link.sent == ["facility.decide"] * 2  # each one counted by the service


async def test_a_stopped_session_s_listing_is_refused_not_answered_from_kept(s: Setup) -> None:
    from tenantry.safety.kill.component import KillSwitch

    gate = _gate(s)
    await gate.gate(AGENT, "jobs.list", "query_jobs", dict(LIST))
    assert len(s.executor.answers) == 1
    kill = s.rt.gates["kill"]
    assert isinstance(kill, KillSwitch)
    await kill.stop("session", AGENT.session, by=Principal(uid=os.getuid(), user=ME), owner=ME)
    await _until(lambda: len(s.executor.answers) == 0)
    with pytest.raises(SessionStopped):
        await gate.gate(AGENT, "jobs.list", "query_jobs", dict(LIST))
