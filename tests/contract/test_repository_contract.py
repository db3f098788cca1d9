"""The repositories facility mode uses, run on every store engine.

Journal (sessions, jobs, commands, events), lessons, budgets and the kill
switch's stops: each case opens a fresh store of the engine, migrates the
repository into it and exercises its SQL, so a statement that only one
dialect understands fails here.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tenantry.core.events import Event, EventType
from tenantry.core.models import AgentProduct, CommandResult, Job, JobSpec, JobState, Principal
from tenantry.leases.model import Lease, PoolKey
from tenantry.leases.store import LeaseStore
from tenantry.memory.models import Kind, Lesson, Scope, Source, Status, Trust
from tenantry.memory.store import LessonStore, new_id
from tenantry.safety.budgets.store import BudgetStore, UsageRow
from tenantry.safety.kill.store import StopStore
from tenantry.store import Store, open_store
from tenantry.store.engine import Conn
from tenantry.store.journal import Journal

AGENT = Principal(1000, "ann", AgentProduct.CODEX, "s1")
HUMAN = Principal(1000, "ann")


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/t.sqlite3"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def store(url: str) -> AsyncIterator[Store]:
    async with open_store(url) as db:
        yield db


@pytest.fixture
async def journal(store: Store) -> AsyncIterator[Journal]:
    j = Journal(store)
    await j.start()
    yield j
    await j.aclose()


def _job(p: Principal, name: str = "") -> tuple[Job, JobSpec]:
    now = time.time()
    job = Job(
        id="",
        backend="fake",
        backend_id="",
        state=JobState.PENDING,
        principal=p.key,
        uid=p.uid,
        name=name,
        submitted_at=now,
        updated_at=now,
        cwd="/w",
    )
    return job, JobSpec(script="/w/a.sh", script_text="echo", cwd="/w", name=name)


# -- journal -------------------------------------------------------------------------
async def test_jobs_are_journaled_handed_found_and_forgotten(journal: Journal) -> None:
    a = await journal.journal_job(*_job(AGENT, "a"), "h1", request_id="r1", intent="i1")
    b = await journal.journal_job(*_job(AGENT, "b"), "h2")
    assert (a.id, b.id) == ("t1", "t2")
    assert [j.id for j in await journal.unhanded_jobs()] == ["t1", "t2"]
    await journal.mark_handed("t1", "501", "/w/o", "")
    await journal.forget_job("t2")
    c = await journal.journal_job(*_job(HUMAN, "c"), "h3")
    assert c.id == "t3"  # a forgotten id is not handed out again
    got = await journal.get_job("501")
    assert got is not None and got.id == "t1" and got.output == "/w/o"
    assert (await journal.job_by_request(1000, "r1")) is not None
    assert await journal.job_intent("t1") == "i1"
    spec = await journal.job_spec("t1")
    assert spec is not None and spec[1] == "handed" and spec[0].name == "a"
    assert await journal.find_duplicate(AGENT.key, "h1", 0.0) is not None
    got.state = JobState.RUNNING
    got.nodes = "n1"
    await journal.update_job(got)
    assert [j.id for j in await journal.list_jobs(uid=1000, active_only=True)] == ["t3", "t1"]
    assert [j.id for j in await journal.list_jobs(principal=AGENT.key)] == ["t1"]
    active = await journal.active_jobs_of([AGENT.key])
    assert active == [("t1", "501", AGENT.key, 1000)]
    assert ("t1", "501", AGENT.key) in await journal.job_owners(0.0)


async def test_two_writers_on_one_store_never_share_a_job_id(url: str) -> None:
    """Facility replicas: each process has its own writer on the same database."""
    async with open_store(url) as one, open_store(url) as two:
        j1, j2 = Journal(one), Journal(two)
        await j1.start()
        await j2.start()
        jobs = await asyncio.gather(
            *(j.journal_job(*_job(AGENT), f"h{i}") for i in range(15) for j in (j1, j2))
        )
        ids = [job.id for job in jobs]
        assert len(set(ids)) == 30 and {int(i[1:]) for i in ids} == set(range(1, 31))
        await j1.aclose()
        await j2.aclose()


async def test_sessions_commands_and_events(journal: Journal) -> None:
    assert await journal.touch_session(AGENT, now=100.0)
    assert not await journal.touch_session(AGENT, now=200.0)
    await journal.flush()
    assert not await journal.touch_session(AGENT, now=300.0)
    (row,) = await journal.sessions(uid=1000)
    assert (row["last_seen"], row["requests"], row["user"]) == (300.0, 3, "ann")
    await journal.flush()
    assert not await journal.touch_session(AGENT, now=250.0)  # a late arrival
    (row,) = await journal.sessions(uid=1000)
    assert (row["last_seen"], row["requests"]) == (300.0, 4)  # last_seen never goes back
    # a command's one row: written once it runs (with its pid), upserted at its end
    await journal.command_started("c1", AGENT, ["make", "-j4"], "/w", "local", pid=4242,
                                  pid_start=2**40)  # fmt: skip
    assert await journal.running_commands() == [("c1", 4242, 2**40)]
    await journal.command_started("c2", AGENT, ["true"], "/w", "local")
    await journal.command_finished(
        "c2", AGENT, ["true"], "/w",
        exit_code=0, state="done", reason="", cpu_s=0.5, max_rss_kb=10, where="local",
    )  # fmt: skip
    # one that never ran (not found) gets its row with its end
    await journal.command_finished(
        "c3", AGENT, ["nope"], "/w",
        exit_code=127, state="error", reason="not found", cpu_s=0.0, max_rss_kb=0, where="local",
    )  # fmt: skip
    assert await journal.abandon_running_commands() == 1
    assert await journal.running_commands() == []
    await journal.add_event(Event(EventType.JOB_SUBMITTED, AGENT.key, "t1\x00x", "ok", None, {}))
    await journal.add_event(Event(EventType.JOB_SUBMITTED, "bob/codex/s", "t2", "ok"))
    mine = await journal.events(principal="ann/")  # a prefix
    assert [e["subject"] for e in mine] == ["t1\ufffdx"]  # a NUL is stored as U+FFFD
    assert len(await journal.events(types=["job.submitted"])) == 2
    assert await journal.events(principal="ann/codex", exact=True) == []
    assert sorted(await journal.principals_seen()) == [(AGENT.key, 1000)]
    # replicas follow the journal by id: after an id, of some types, in id order
    first = await journal.last_event_id()
    await journal.add_event(Event(EventType.SESSION_STOPPED, "", "ann", "user"))
    await journal.add_event(Event(EventType.BACKEND_POLL, "", "", "ok"))
    later = await journal.events_after(first, types=["session.stopped", "job.submitted"])
    assert [(e["type"], e["subject"]) for e in later] == [("session.stopped", "ann")]
    assert await journal.last_event_id() > later[0]["id"] > first
    assert len(await journal.events_after(0, types=["job.submitted"], limit=1)) == 1


# -- memory --------------------------------------------------------------------------
def _lesson(title: str, trust: Trust = Trust.AGENT_OBSERVED) -> Lesson:
    return Lesson(
        id=new_id(),
        kind=Kind.FACT,
        scope=Scope.FACILITY,
        title=title,
        body=f"{title} body words",
        owner_user="ann",
        owner_key=AGENT.key,
        subject={"module": "gcc"},
        sources=[Source.AGENT],
        trust=trust,
        status=Status.ACTIVE,
    )


async def test_lessons_live_their_lifecycle(store: Store) -> None:
    lessons = LessonStore(store)
    await lessons.start()
    a = await lessons.add(_lesson("cuda module"), "ann/codex/s1")
    await lessons.add_many([_lesson("gcc flags"), _lesson("mpi hang")], "ops")
    assert lessons.n_docs == 3
    newest = await lessons.query("kind = ?", ("fact",), limit=1)
    assert newest[0].title == "mpi hang"
    trusted = await lessons.transition(a.id, "staff", "approve", trust=Trust.STAFF_APPROVED)
    assert trusted.trust is Trust.STAFF_APPROVED
    n = await store.fetchone("SELECT count(*) FROM trusted_fts")
    assert n is not None and n[0] == 1
    assert await lessons.endorse(a.id, "bob/codex/x", "bob", "p1") == 1
    assert await lessons.endorse(a.id, "bob/codex/x", "bob", "p1") == 1  # once per principal
    assert await lessons.endorse(a.id, "cy/codex/y", "cy", "p2") == 2
    assert await lessons.endorsers(a.id) == (2, 2)
    assert sorted(await lessons.endorsement_projects(a.id)) == ["p1", "p2"]
    new = await lessons.supersede(a.id, _lesson("cuda module v2"), "staff")
    old = await lessons.require(a.id)
    assert (old.status, old.superseded_by) == (Status.SUPERSEDED, new.id)
    actions = [h["action"] for h in await lessons.history(a.id)]
    assert actions == ["created", "approve", "endorsed", "endorsed", "endorsed", "superseded"]
    assert await lessons.due(time.time() + 365 * 86400) != []
    again = LessonStore(store)  # a restart reads the term frequencies back
    await again.start()
    assert again.n_docs == 4 and again.df.get("module", 0) >= 1
    assert again.df == lessons.df


# -- budgets -------------------------------------------------------------------------
async def test_budget_rows_add_up(store: Store) -> None:
    budgets = BudgetStore(store)
    await budgets.start()
    await budgets.record(UsageRow(10.0, "ann", AGENT.key, "commands", 1.0))
    await budgets.record(UsageRow(20.0, "ann", "ann/codex/s2", "commands", 2.0, "run", "c1"))
    await budgets.job_inflight("t1", "ann", AGENT.key, 4, 1, 2.0, 10.0)
    await budgets.job_inflight("t1", "ann", AGENT.key, 99, 9, 9.0, 10.0)  # once
    await budgets.job_started("t1", 11.0)
    await budgets.lease_held("L1", "ann", AGENT.key, 10.0)
    await budgets.lease_held("L1", "ann", AGENT.key, 12.0)
    await budgets.lease_held("L2", "bob", "bob/codex/x", 12.0)

    def read(conn: Conn) -> tuple[float, ...]:
        budgets.lock(conn, "ann")
        return (
            budgets.used(conn, "user", "ann", "commands", 0.0),
            budgets.used(conn, "session", AGENT.key, "commands", 15.0),
            budgets.committed(conn, "user", "ann", "cpus"),
            budgets.committed(conn, "session", AGENT.key, "gpus"),
            budgets.leases_held(conn, "user", "ann"),
        )

    assert await store.write(read) == (3.0, 0.0, 8.0, 2.0, 1.0)
    row = await store.write(lambda c: budgets.take_inflight(c, "t1"))
    assert row is not None and row["started_at"] == 11.0 and row["user"] == "ann"
    assert await store.write(lambda c: budgets.take_inflight(c, "t1")) is None
    await budgets.lease_gone("L1")
    assert await store.read(lambda c: budgets.leases_held(c, "user", "ann")) == 0.0


# -- kill switch ---------------------------------------------------------------------
async def test_stops_are_kept_until_resumed(store: Store) -> None:
    stops = StopStore(store)
    await stops.start()
    first = await stops.add("session", "s1", "ann", "ann/human/-", "runaway", 5.0)
    second = await stops.add("user", "bob", "*", "ops/human/-", "", 6.0)
    assert second > first
    await stops.set_summary("session", "s1", {"jobs_cancelled": ["t1"]})
    assert [s[0] for s in await stops.active()] == [first, second]
    await stops.resume([first], "ann/human/-", 7.0)
    assert await stops.active() == [(second, "user", "bob", "*", "ops/human/-", "", 6.0)]
    row = await store.fetchone("SELECT summary_json, resumed_by FROM stops WHERE id = ?", (first,))
    assert row is not None and "t1" in row[0] and row[1] == "ann/human/-"


# -- leases --------------------------------------------------------------------------
async def test_leases_and_their_results_are_upserted(store: Store) -> None:
    leases = LeaseStore(store)
    await leases.start()
    key = PoolKey("ann", "proj", "cpu", 2, 1024, 0)
    lease = Lease("L1", key, 1000, AGENT.key, "h", "fake", state="ready", host="n1")
    await leases.save(lease)
    lease.served = 3
    await leases.save(lease)  # the same row, updated
    await leases.save(Lease("L2", key, 1000, AGENT.key, "h", "fake", state="released"))
    active = await leases.active()
    assert [(x.id, x.served, x.key) for x in active] == [("L1", 3, key)]
    assert {x.id for x in await leases.recent()} == {"L1", "L2"}
    await leases.put_result("L1", CommandResult("c1", 0, "completed", 0.1))
    await leases.put_result("L1", CommandResult("c1", 1, "failed", 0.2))
    got = await leases.result("c1")
    assert got is not None and got["state"] == "failed"
    await leases.set_meta("port", "4000")
    await leases.set_meta("port", "4001")
    assert await leases.get_meta("port") == "4001"


# -- telemetry (the dashboard's and /metrics' reads) ---------------------------------
async def test_telemetry_reads_the_same_on_every_engine(journal: Journal) -> None:
    from tenantry.store import telemetry

    now = 1_000_000.0
    w = telemetry.Window(now - 3600, now, 4)  # four 15-minute buckets
    await journal.touch_session(AGENT, now=now - 60)
    for i, served in enumerate(["cache", "cache", "", "squeue"]):
        data = {"served_from": served} if served else {}
        ts = now - 3600 + 800 + i * 900  # one per bucket, late in it (a rounding would move it)
        await journal.add_event(
            Event(EventType.STATUS_QUERY, AGENT.key, "t1", "ok", None, data, ts)
        )
    await journal.add_event(
        Event(EventType.BACKEND_POLL, "", "", "ok", 0.2, {"calls": 3}, now - 10)
    )
    await journal.add_event(Event(EventType.BACKEND_POLL, "", "", "ok", 0.4, {}, now - 5))
    await journal.flush()
    s = await telemetry.scheduler(journal.db, w)
    assert (s["cached"], s["backend"], s["poll_max"]) == (3.0, 4.0, 0.4)
    series = dict(s["series"])
    assert series["answered from cache"] == [1.0, 1.0, 1.0, 0.0]  # the bucket of each event
    assert series["passed to the scheduler"] == [0.0, 0.0, 0.0, 4.0]
    assert (await telemetry.overview(journal.db, w)) is not None
    assert (await telemetry.session_timeline(journal.db, AGENT.key, w))["events"]
    for fn in (telemetry.activity, telemetry.policy, telemetry.burn, telemetry.hit_rates):
        await fn(journal.db, w)
    assert await telemetry.active_job_counts(journal.db) == {}


async def test_live_rows_read_every_user_or_one_on_every_engine(journal: Journal) -> None:
    from tenantry.report import live
    from tenantry.store import live_rows

    now = 1_000_000.0
    bob = Principal(1001, "bob", AgentProduct.CLAUDE_CODE, "b1", project="proj-b")
    for p in (AGENT, HUMAN, bob):
        await journal.touch_session(p, now=now - 100)
    for cid, p in (("ann:c1", AGENT), ("ann:c2", HUMAN), ("bob:c1", bob), ("bob:c2", bob)):
        await journal.command_started(cid, p, ["true"], "/w", "local", started_at=now - 50)
    res = {"cpus": 2, "account": "acct-a"}
    for p, job in ((AGENT, "t1"), (bob, "t1")):
        await journal.add_event(
            Event(EventType.JOB_SUBMITTED, p.key, job, "ok", None, {"resources": res}, now - 40)
        )
        await journal.add_event(
            Event(EventType.JOB_STATE, p.key, job, "RUNNING", None, {}, now - 30)
        )
    await journal.flush()
    every = await live_rows.read(journal.db, now - 3600, now, None)
    assert (len(every.sessions), len(every.commands), len(every.job_events)) == (3, 4, 4)
    ann = await live_rows.read(journal.db, now - 3600, now, "ann")
    assert {s["user"] for s in ann.sessions} == {"ann"}
    assert {c["id"] for c in ann.commands} == {"ann:c1", "ann:c2"}
    assert {e["principal"] for e in ann.job_events} == {AGENT.key}
    assert ann.job_events[0]["data"]["resources"]["cpus"] == 2
    report = live.build(every, now - 3600, now, "UTC")
    by_user = {r["user"]: r for r in report["facility"]["by_user"]}
    assert (by_user["ann"]["agent_commands"], by_user["ann"]["human_commands"]) == (1, 1)
    assert (by_user["bob"]["agent_commands"], by_user["bob"]["agent_jobs"]) == (2, 1)
    projects = {r["project"]: r for r in report["facility"]["by_project"]}
    assert projects["proj-b"]["agent_jobs"] == 1 and projects["acct-a"]["agent_jobs"] == 1
    assert report["headline"]["submissions"]["total"] == 2
