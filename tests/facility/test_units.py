"""Fast tests of facility mode's parts (no root, no Slurm): identity, routing, views."""

from __future__ import annotations

import asyncio
import os
import pwd
import time
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import FacilityUnavailable, NotFound, PermissionDenied, UsageError
from tenantry.core.events import Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.facility import routing
from tenantry.facility.executor import RemoteGate
from tenantry.facility.identity import FacilityIdentity, PeerCredAuthenticator, staff_members
from tenantry.facility.install import Layout, plan, start_script, unit_text
from tenantry.facility.jobview import EventJobView
from tenantry.facility.link import FacilityLink
from tenantry.facility.seams import FacilityRequest, Peer, Viewer
from tenantry.facility.service import _event_of

ME = pwd.getpwuid(os.getuid()).pw_name


class FixedPeer:
    def __init__(self, peer: Peer | None) -> None:
        self.peer = peer

    async def authenticate(self, scope: Any) -> Peer | None:
        return self.peer


async def test_the_uid_comes_from_the_connection_never_the_claims() -> None:
    ident = FacilityIdentity([PeerCredAuthenticator()], frozenset({ME}))
    scope: dict[str, Any] = {"tenantry.peer": (123, os.getuid(), os.getgid())}
    p = await ident.principal(scope, '{"agent": "codex", "session": "s1", "origin": "sandboxed"}')
    assert (p.uid, p.user, p.agent, p.origin) == (os.getuid(), ME, AgentProduct.CODEX, "sandboxed")
    # an agent claiming to be a human's origin is still an agent (claimed)
    p2 = await ident.principal(scope, '{"agent": "codex", "origin": "user"}')
    assert p2.origin == "claimed"
    with pytest.raises(PermissionDenied):
        await ident.principal({}, "{}")  # TCP without an authenticator that applies
    with pytest.raises(UsageError):
        await ident.principal(scope, '{"session": "a\\nb"}')


async def test_authenticators_are_tried_in_order() -> None:
    munge_like = FixedPeer(Peer(uid=os.getuid(), gid=0, host="login2", via="munge"))
    ident = FacilityIdentity([PeerCredAuthenticator(), munge_like], frozenset())
    p = await ident.principal({}, "{}")
    assert p.host == "login2"
    assert await ident.peer({}) == munge_like.peer


def test_staff_are_a_group_and_only_as_humans() -> None:
    assert staff_members("") == frozenset()
    assert staff_members("no-such-group-tt") == frozenset()
    ident = FacilityIdentity([], frozenset({"carol"}))
    human = Principal(uid=1, user="carol")
    agent = Principal(uid=1, user="carol", agent=AgentProduct.CLAUDE_CODE)
    assert ident.viewer(human).is_staff and not ident.viewer(agent).is_staff


def test_routing_keeps_user_work_in_the_users_daemon() -> None:
    for name in ("memory.recall", "memory.approve", "admin.stop_user", "approvals.decide",
                 "budgets.show", "facility.jobs"):  # fmt: skip
        assert routing.forwarded(name) and routing.served(name)
    for name in ("jobs.submit", "commands.run", "index.grep", "leases.list", "sandbox.register"):
        assert not routing.forwarded(name) and not routing.served(name)
    assert routing.served("facility.decide") and not routing.forwarded("facility.decide")


def _ev(kind: EventType, principal: str, job: str, outcome: str = "ok") -> Event:
    return Event(kind, principal, job, outcome, None, {"backend_id": "7"})


async def test_job_view_per_user_visibility_and_wait() -> None:
    view = EventJobView()
    await view.on_event(_ev(EventType.JOB_SUBMITTED, "alice/human/-", "t1"))
    await view.on_event(_ev(EventType.JOB_SUBMITTED, "bob/claude-code/s", "t1"))
    alice, bob, staff = Viewer(1, "alice"), Viewer(2, "bob"), Viewer(3, "carol", is_staff=True)
    assert [j["user"] for j in await view.jobs_of(alice)] == ["alice"]
    assert {j["key"] for j in await view.jobs_of(staff)} == {"alice:t1", "bob:t1"}
    with pytest.raises(NotFound):
        await view.status_of("alice:t1", bob)
    assert (await view.status_of("t1", staff, owner="bob"))["user"] == "bob"

    async def later() -> None:
        await asyncio.sleep(0.05)
        await view.on_event(_ev(EventType.JOB_STATE, "alice/human/-", "t1", "RUNNING"))

    task = asyncio.create_task(later())
    got = await view.wait_change("t1", alice, "PENDING", 5.0)
    await task
    assert got["state"] == "RUNNING"
    assert [j["id"] for j in await view.jobs_of(alice, active=True)] == ["t1"]


def test_ingested_events_must_be_the_callers() -> None:
    ev = _event_of({"type": "command.started", "principal": "alice/codex/s"}, "alice")
    assert ev.principal == "alice/codex/s"
    assert _event_of({"type": "daemon.started"}, "alice").principal == "alice/daemon/-"
    with pytest.raises(PermissionDenied):
        _event_of({"type": "command.started", "principal": "bob/codex/s"}, "alice")
    with pytest.raises(UsageError):
        _event_of({"type": "no.such"}, "alice")
    far = _event_of({"type": "daemon.started", "ts": 4e9}, "alice")
    assert far.ts < 4e9


async def test_unreachable_facility_refuses_agents_and_warns_humans(tmp_path: Path) -> None:
    gate = RemoteGate(FacilityLink(str(tmp_path / "none.sock"), 1.0))
    agent = Principal(uid=1, user="alice", agent=AgentProduct.CODEX, origin="claimed")
    with pytest.raises(FacilityUnavailable) as info:
        await gate.gate(agent, "commands.run", "run_command", {})
    assert info.value.retryable and info.value.code == "facility_unavailable"
    warnings = await gate.gate(Principal(uid=1, user="alice"), "commands.run", "run_command", {})
    assert warnings and "cannot be reached" in warnings[0]
    await gate.link.aclose()


def test_install_plan_modes_and_files() -> None:
    lay = Layout(account="svc", state_dir="/srv/t", socket="/run/t/f.sock", tenantry="/opt/t")
    steps = plan(lay, root="/pkg", accounts=False)
    dirs = {s.path: (s.mode, s.owner) for s in steps if s.kind == "dir"}
    assert dirs["/pkg/srv/t"] == (0o700, "svc") and dirs["/pkg/run/t"] == (0o755, "svc")
    assert "ExecStart=/opt/t --state-dir /srv/t facility serve" in unit_text(lay)
    assert "setpriv --reuid=svc" in start_script(lay)


def test_install_without_groupadd_on_path_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tenantry.facility.install import Step, apply

    monkeypatch.setenv("PATH", str(tmp_path))  # no groupadd, no useradd
    group = Step("group", name="tt-no-such-group-i13", argv=["groupadd", "tt-no-such-group-i13"])
    with pytest.raises(UsageError) as err:
        apply([group])
    assert "cannot run groupadd" in err.value.message and "--no-accounts" in (err.value.hint or "")


class CannedLink(FacilityLink):
    """A link whose service answers ``facility.scheduler_status`` from a dict (or is down)."""

    def __init__(self, jobs: dict[str, Any] | None) -> None:
        super().__init__("/nonexistent/facility.sock", 1.0)
        self.jobs = jobs
        self.calls = 0

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        self.calls += 1
        if self.jobs is None:
            raise FacilityUnavailable("down")
        return {"source": "poller", "jobs": self.jobs}, []


async def test_executor_takes_job_states_from_the_facility_and_asks_its_own_for_the_rest() -> None:
    from tenantry.backends.base import JobUpdate, Recoverable
    from tenantry.backends.fake import FakeBackend
    from tenantry.core.models import JobSpec, JobState
    from tenantry.facility.status import RecoverableFacilityStatusBackend, update_to_wire

    inner = FakeBackend()
    me = Principal(uid=1, user="alice")
    a = await inner.submit(JobSpec(script="/a", script_text="#!/bin/sh\n"), me, "t1")
    b = await inner.submit(JobSpec(script="/b", script_text="#!/bin/sh\n"), me, "t2")
    polled = {a.backend_id: update_to_wire(JobUpdate(a.backend_id, JobState.RUNNING))}
    link = CannedLink(polled)
    backend = RecoverableFacilityStatusBackend(inner, link)
    assert isinstance(backend, Recoverable)
    got = await backend.query([a.backend_id, b.backend_id])
    assert got[a.backend_id].state is JobState.RUNNING  # from the facility's poller
    assert got[b.backend_id].state is JobState.PENDING  # unknown there: asked of its own
    assert inner.calls["query"] == 1 and backend.from_facility == 1
    link.jobs = None  # the facility is down: status still answers, from the own backend
    again = await backend.query([a.backend_id])
    assert again[a.backend_id].state is JobState.PENDING and inner.calls["query"] == 2


async def test_a_job_just_submitted_is_pending_from_sbatchs_word_while_push_is_live() -> None:
    # the facility day: each new job cost a squeue of the user's own (the service did not
    # know it yet) and a hurried poll of the service's; its start is pushed anyway
    from tenantry.backends.base import JobUpdate
    from tenantry.backends.fake import FakeBackend
    from tenantry.core.models import JobSpec, JobState
    from tenantry.facility import status as fstatus

    inner = FakeBackend()
    link = CannedLink({})
    backend = fstatus.FacilityStatusBackend(inner, link, push=True)
    assert backend.push is not None
    me = Principal(uid=1, user="alice")
    sub = await backend.submit(JobSpec(script="/a", script_text="#!/bin/sh\n"), me, "t1")
    bid = sub.backend_id
    backend.push.live = True
    got = await backend.query([bid])
    assert got[bid].state is JobState.PENDING and got[bid].reason == fstatus.FRESH_REASON
    assert (link.calls, inner.calls["query"], backend.fresh_answers) == (0, 0, 1)
    backend.push.states[bid] = JobUpdate(bid, JobState.RUNNING)  # its start, pushed
    assert (await backend.query([bid]))[bid].state is JobState.RUNNING
    del backend.push.states[bid]  # forgotten by the push: no longer fresh, asked again
    await backend.query([bid])
    assert link.calls == 1 and inner.calls["query"] == 1
    other = await backend.submit(JobSpec(script="/b", script_text="#!/bin/sh\n"), me, "t2")
    backend.push.live = False  # no push: the facility and the own backend are asked
    await backend.query([other.backend_id])
    assert link.calls == 2 and inner.calls["query"] == 2


class InfoLink(CannedLink):
    """Answers ``facility.info`` with the service's scheduler facts (or is down)."""

    def __init__(self, scheduler: dict[str, Any] | None) -> None:
        super().__init__({})
        self.scheduler = scheduler

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        if req.op != "facility.info":
            return await super().send(req)
        self.calls += 1
        if self.scheduler is None:
            raise FacilityUnavailable("down")
        return {"scheduler": self.scheduler}, []


async def test_executor_takes_partitions_from_the_facility_once_not_from_slurm() -> None:
    # the facility day: every executor ran sinfo and scontrol at its start and again
    # before each lease's pilot job, two controller RPCs each time
    from tenantry.backends.fake import FakeBackend
    from tenantry.core.settings import Settings
    from tenantry.facility.status import FacilityStatusBackend

    class Counting(FakeBackend):
        infos = 0

        async def info(self) -> dict[str, Any]:
            self.infos += 1
            return await super().info()

    parts = [{"name": "debug", "default": True, "max_time_s": 3600},
             {"name": "gpu", "max_time_s": 1800}]  # fmt: skip
    inner = Counting()
    link = InfoLink({"partitions": parts, "nodes": [], "defaults": {"account": "svc"}})
    mine = Settings(slurm_account="lab")
    backend = FacilityStatusBackend(inner, link, settings=mine)
    info = await backend.info()
    assert info["partitions"] == parts and info["source"] == "facility"
    assert info["defaults"] == {"partition": "debug", "account": "lab"}  # the user's own
    await backend.info()
    assert link.calls == 1 and inner.infos == 0  # asked once, for INFO_TTL_S
    down = FacilityStatusBackend(inner, InfoLink(None), settings=mine)
    assert (await down.info())["backend"] == inner.name and inner.infos == 1


class RecordingLink(FacilityLink):
    """Accepts ingest batches (records their sizes) or refuses the first one."""

    def __init__(self, refuse_first: bool = False) -> None:
        super().__init__("/nonexistent/facility.sock", 1.0)
        self.batches: list[int] = []
        self.refuse_first = refuse_first

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        if self.refuse_first:
            self.refuse_first = False
            raise UsageError("request body over 8388608 bytes")
        self.batches.append(len(req.params["events"]))
        return {"accepted": len(req.params["events"])}, []


def _executor(link: FacilityLink) -> Any:
    from typing import cast

    from tenantry.backends.fake import FakeBackend
    from tenantry.core.events import Bus
    from tenantry.core.settings import Settings
    from tenantry.facility.executor import Executor
    from tenantry.service.runtime import Runtime
    from tenantry.store.journal import Journal

    rt = Runtime(Settings(facility_address="/x"), cast(Journal, None), Bus(), FakeBackend())
    ex = Executor(rt)
    ex.link = link
    return ex


async def test_events_go_in_bounded_batches_and_a_refused_batch_is_dropped_not_looped() -> None:
    link = RecordingLink(refuse_first=True)
    ex = _executor(link)
    big = "x" * 400_000
    for i in range(5):
        await ex._on_event(
            Event(EventType.JOB_SUBMITTED, "alice/human/-", f"t{i}", data={"s": big})
        )
    await ex._send_batch()  # refused: those events are dropped and counted
    assert ex.dropped == 2 and len(ex._queue) == 3
    while ex._queue:
        await ex._send_batch()
    assert link.batches == [2, 1] and ex.sent == 3  # at most ~1 MB of JSON per batch


async def test_another_transport_calls_ops_with_the_same_identity_and_gates(
    tmp_path: Path,
) -> None:
    """What a MUNGE-authenticated TCP listener hands to the service: a proven peer."""
    from tenantry.backends.fake import FakeBackend
    from tenantry.core.settings import Settings
    from tenantry.facility.service import FacilityService
    from tenantry.gateway.app import open_runtime
    from tenantry.gateway.facility import FACILITY_COMPONENTS, service_settings

    settings = service_settings(
        Settings(
            state_dir=str(tmp_path),
            policy_file=str(tmp_path / "none.cedar"),
            memory_verify_interval_s=0.0,
            facility_staff_group="",
        )
    )
    async with open_runtime(settings, FakeBackend(), FACILITY_COMPONENTS) as rt:
        svc = rt.components["facility_service"]
        assert isinstance(svc, FacilityService)
        peer = Peer(uid=os.getuid(), gid=os.getgid(), host="login2", via="munge")
        who = await svc.call(peer, {"agent": "codex", "session": "s9"}, "facility.whoami", {})
        p = who["result"]["principal"]
        assert (p["user"], p["host"], p["agent"], p["origin"]) == (ME, "login2", "codex", "claimed")
        with pytest.raises(PermissionDenied, match="runs as the user"):
            await svc.call(peer, {}, "jobs.submit", {"script": "/x"})
        ok = await svc.call(peer, {}, "facility.decide", {"op": "jobs.list", "params": {}})
        assert ok["result"] == {"warnings": []}


def test_channels_by_address_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    from tenantry.facility import link

    assert isinstance(link.open_channel("/run/tenantry/facility.sock", 1.0), FacilityLink)
    assert link.open_channel("unix:///run/t.sock", 1.0).address == "/run/t.sock"
    with pytest.raises(UsageError, match="no channel for tcp"):
        link.open_channel("tcp://login1:7070", 1.0)
    assert type(link.open_channel("munge://login1:7070", 1.0)).__name__ == "MungeChannel"
    made: list[str] = []

    def factory(address: str, timeout_s: float) -> FacilityLink:
        made.append(address)
        return FacilityLink("/dev/null", timeout_s)

    monkeypatch.setitem(link.CHANNELS, "munge", factory)
    link.open_channel("munge://login1:7070", 1.0)
    assert made == ["munge://login1:7070"]


async def test_the_cluster_pollers_cache_answers_executors_by_slurm_id_per_user() -> None:
    from tenantry.core.models import JobState
    from tenantry.facility.polled_status import PolledScheduler
    from tenantry.facility.poller import JobStatus, StatusCache

    cache = StatusCache(clock=lambda: 2.0)  # polled a second ago: fresh enough to answer
    cache.absorb(
        [
            JobStatus("101", "alice", JobState.RUNNING, seq=1, observed_at=1.0),
            JobStatus("102", "bob", JobState.COMPLETED, exit_code=0, seq=2, observed_at=1.0),
        ]
    )
    cache.mark_polled(1.0)
    sched = PolledScheduler(cache)
    alice = await sched.query(["101", "102", "999"], Viewer(1, "alice"))
    assert set(alice) == {"101"} and alice["101"].state is JobState.RUNNING
    staff = await sched.query(["101", "102"], Viewer(3, "carol", is_staff=True))
    assert staff["102"].state is JobState.COMPLETED and staff["102"].exit_code == 0


def test_the_cluster_poller_polls_every_second_unless_a_backoff_is_set(tmp_path: Path) -> None:
    """Answers stay at most about a poll old by default (facility_rpc's staleness p99 <= 2 s);
    a facility may trade that for fewer controller RPCs with ``facility_poll_slow_s``."""
    from tenantry.core.settings import load
    from tenantry.facility.service import CLUSTER_POLL_S, slow_poll_s

    default = load(env={}, overrides={"state_dir": str(tmp_path)})
    assert slow_poll_s(default.facility_poll_slow_s) is None
    slow = load(env={"TENANTRY_STATE_DIR": str(tmp_path), "TENANTRY_FACILITY_POLL_SLOW_S": "5"})
    assert slow_poll_s(slow.facility_poll_slow_s) == 5.0
    assert slow_poll_s(CLUSTER_POLL_S) is None  # a ceiling at the interval is no backoff


async def test_the_executor_answers_a_starting_command_from_the_facilitys_stops() -> None:
    """A command the service let through just before a stop asks the executor again as it
    starts (``rt.stops``): the stops the executor's long poll last saw decide."""

    class StopsLink:
        timeout_s = 5.0

        def __init__(self) -> None:
            self.calls = 0

        async def call(self, p: Principal, op: str, params: Any, **kw: Any) -> Any:
            self.calls += 1
            if self.calls > 1:
                await asyncio.sleep(3600)
            return {"version": 1, "stopped": [{"id": 7, "kind": "user", "target": "alice"}]}, []

    class NoPrincipals:
        async def principals_seen(self) -> list[tuple[str, int]]:
            return []

    ex = _executor(StopsLink())  # type: ignore[arg-type]
    ex.runtime.journal = NoPrincipals()
    ex.wire()
    assert ex.runtime.stops is ex
    agent = Principal(uid=1000, user="alice", agent=AgentProduct.CODEX, session="s1")
    assert ex.stopped(agent) is None  # no stop seen yet
    watch = asyncio.create_task(ex._watch_stops())
    try:
        for _ in range(100):
            if ex.link.calls > 1:
                break
            await asyncio.sleep(0.01)
        assert ex.stopped(agent) is not None
        assert ex.stopped(Principal(uid=1000, user="alice")) is None  # never the human
        bob = Principal(uid=1001, user="bob", agent=AgentProduct.CODEX, session="s1")
        assert ex.stopped(bob) is None
    finally:
        watch.cancel()
        with pytest.raises(asyncio.CancelledError):
            await watch


def test_a_callers_name_is_looked_up_once_a_minute_not_per_request(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tenantry.facility import identity

    asked: list[int] = []
    real = pwd.getpwuid

    def counting(uid: int) -> Any:
        asked.append(uid)
        return real(uid)

    clock = [1000.0]
    monkeypatch.setattr(pwd, "getpwuid", counting)
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(identity, "_names", {})
    me = os.getuid()
    assert identity.user_name(me) == identity.user_name(me) == ME
    assert asked == [me]
    clock[0] += identity.NAME_TTL_S + 1  # renamed or removed users are seen within a minute
    assert identity.user_name(me) == ME and asked == [me, me]
    ghost = 2_000_000_001  # no such uid: answered by number, and asked again each time
    assert identity.user_name(ghost) == identity.user_name(ghost) == str(ghost)
    assert asked.count(ghost) == 2
