"""slurmctld's job events: parsed, trusted only from SlurmUser, fed to the poller's cache,
and the poller's fallback to its normal pace when the events miss something."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from tests.facility.cluster.test_poller import ALICE, Source, _until, job

from tenantry.core.models import JobState
from tenantry.facility.poller import (
    LocalPublisher,
    Poller,
    SlurmSnapshotSource,
    StatusCache,
    Viewer,
)
from tenantry.facility.slurm_events import EventFeed, EventLog, event_log, parse_line

RECORDED = Path(__file__).parents[2] / "fixtures" / "slurm_events" / "events.log"
SLURM_LOG = "/var/spool/tenantry-slurm/events"  # scripts/dev-slurm's event log
SCRIPT = Path(__file__).parents[3] / "src" / "tenantry" / "facility" / "slurm" / "slurm_event.sh"


def test_recorded_lines_parse() -> None:
    events = [parse_line(line) for line in RECORDED.read_text().splitlines()]
    assert all(ev is not None for ev in events)
    first, end, failed_end = events[0], events[1], events[3]
    assert first is not None and end is not None and failed_end is not None
    assert (first.phase, first.job_id, first.user, first.state) == (
        "start", "9", "root", JobState.RUNNING)  # fmt: skip
    assert first.nodes == "tnode1" and first.partition == "debug"
    # EpilogSlurmctld says the job ended, not how (a cancelled job exits 0:0 too)
    assert end.phase == "end" and end.state is None and end.exit_code == 0
    assert failed_end.exit_code == 3
    tasks = {ev.job_id for ev in events if ev is not None and ev.phase == "start"}
    assert {"14_0", "14_1"} <= tasks  # array tasks by the name squeue gives them


@pytest.mark.parametrize(
    "line",
    [
        "",
        "v2 1.0 start job=1 array= user=a state=RUNNING exit= nodes= partition= account=",
        "v1 x start job=1 array= user=a state=RUNNING exit= nodes= partition= account=",
        "v1 1.0 start job=1;rm array= user=a state=RUNNING exit= nodes= partition= account=",
        "v1 1.0 start job=1 array= user= state=RUNNING exit= nodes= partition= account=",
        "v1 1.0 end job=1 array= user=a state=RUNNING exit= nodes= partition= account=",
        "v1 1.0 stop job=1 array= user=a state=ENDED exit= nodes= partition= account=",
        "v1 1.0 start job=1 user=a array= state=RUNNING exit= nodes= partition= account=",
    ],
)
def test_lines_that_are_not_events_are_ignored(line: str) -> None:
    assert parse_line(line) is None


def test_a_jobcomp_end_carries_its_state() -> None:
    ev = parse_line(
        "v1 5.0 end job=7 array= user=a state=TIMEOUT exit=0 nodes=n1 partition=p account=x"
    )
    assert ev is not None and ev.state is JobState.TIMEOUT


def test_the_script_always_exits_0_and_appends_one_line(tmp_path: Path) -> None:
    logf = tmp_path / "events"
    env = {"TENANTRY_SLURM_EVENT_LOG": str(logf), "SLURM_SCRIPT_CONTEXT": "epilog_slurmctld",
           "SLURM_JOB_ID": "5", "SLURM_JOB_USER": "al", "SLURM_JOB_EXIT_CODE2": "1:0",
           "PATH": "/usr/bin:/bin"}  # fmt: skip
    assert subprocess.run(["/bin/sh", str(SCRIPT)], env=env, check=False).returncode == 0
    ev = parse_line(logf.read_text())
    assert ev is not None and (ev.phase, ev.job_id, ev.exit_code) == ("end", "5", 1)
    env["TENANTRY_SLURM_EVENT_LOG"] = str(tmp_path / "missing" / "events")
    run = subprocess.run(["/bin/sh", str(SCRIPT)], env=env, capture_output=True, check=False)
    assert (run.returncode, run.stderr) == (0, b"")  # an unwritable log never fails the job


def _log_of(tmp_path: Path, text: str = "") -> tuple[Path, EventLog]:
    d = tmp_path / "spool"
    d.mkdir(mode=0o755)
    d.chmod(0o755)
    f = d / "events"
    f.write_text(text)
    f.chmod(0o644)
    return f, EventLog(str(f), {os.getuid()})


def test_the_log_is_read_line_by_line_and_again_when_replaced(tmp_path: Path) -> None:
    f, events = _log_of(tmp_path)
    assert events.read_lines() == [] and events.trusted
    with f.open("a") as out:
        out.write("one\ntw")
    assert events.read_lines() == ["one"]
    with f.open("a") as out:
        out.write("o\n")
    assert events.read_lines() == ["two"]
    f.write_text("new\n")  # truncated (logrotate's copytruncate)
    assert events.read_lines() == ["new"]
    f.with_name("next").write_text("other\n")
    f.with_name("next").chmod(0o644)
    f.with_name("next").replace(f)  # replaced
    assert events.read_lines() == ["other"]
    with f.open("a") as out:
        out.write("later\n")
    events.read_lines(skip=True)
    assert events.read_lines() == []


FORGED = (
    "v1 1.0 end job=77 array= user=alice state=COMPLETED exit=0 nodes=n partition=p account=a\n"
)


def _nobody() -> int:
    return pwd.getpwnam("nobody").pw_uid


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
async def test_a_forged_event_from_a_user_who_is_not_slurmuser_is_refused(tmp_path: Path) -> None:
    f, _ = _log_of(tmp_path, FORGED)
    os.chown(f, _nobody(), -1)  # an agent's own file, not SlurmUser's
    events = EventLog(str(f), {pwd.getpwnam("root").pw_uid + 12345})  # SlurmUser: another uid
    src, cache = Source(), StatusCache()
    src.queue = [job("77", "alice", "RUNNING")]
    feed = EventFeed(events, cache, LocalPublisher(cache), src)
    poller = Poller(src, cache, LocalPublisher(cache), interval_s=0.01, events=feed)
    await poller.poll_once()
    await feed.step()
    assert cache.status_of("77", ALICE).status.state is JobState.RUNNING  # not COMPLETED
    assert not events.trusted and "owned by uid" in events.why
    assert not feed.healthy() and poller._paced(0.01) == 0.01  # an untrusted log: poll


@pytest.mark.parametrize("what", ["file", "dir", "symlink"])
async def test_a_log_others_may_write_is_not_trusted(tmp_path: Path, what: str) -> None:
    f, events = _log_of(tmp_path, FORGED)
    if what == "file":
        f.chmod(0o666)
    elif what == "dir":
        f.parent.chmod(0o777)
    else:
        link = f.with_name("link")
        link.symlink_to(f)
        events = EventLog(str(link), {os.getuid()})
    assert events.read_lines() == []
    assert not events.trusted and events.refused == 1


def test_the_configured_slurm_user_and_root_are_trusted() -> None:
    events = event_log("/x/events", "root")
    assert events is not None and events.trusted_uids == {0}
    assert event_log("", "slurm") is None  # not configured: the poller polls
    unknown = event_log("/x/events", "no-such-user-here")
    assert unknown is not None and unknown.trusted_uids == {0}


def _feed(tmp_path: Path) -> tuple[Path, Source, StatusCache, EventFeed, Poller]:
    f, events = _log_of(tmp_path)
    src, cache = Source(), StatusCache()
    feed = EventFeed(events, cache, LocalPublisher(cache), src, check_s=0.005)
    poller = Poller(src, cache, LocalPublisher(cache), interval_s=0.01, events=feed,
                    safety_s=30.0, miss_grace_s=1.0)  # fmt: skip
    return f, src, cache, feed, poller


TAIL = "nodes=n1 partition=p account=a"


def _append(f: Path, line: str) -> None:
    with f.open("a") as out:
        out.write(line + "\n")


async def test_starts_and_ends_reach_the_cache_without_a_poll(tmp_path: Path) -> None:
    f, src, cache, feed, poller = _feed(tmp_path)
    src.queue = [job("5", "alice", "PENDING", name="train")]
    await poller.poll_once()
    _append(
        f, "v1 2.0 start job=5 array= user=alice state=RUNNING exit= nodes=n1 partition=p account=a"
    )
    await feed.step()
    st = cache.status_of("5", ALICE).status
    assert (st.state, st.nodes, st.name) == (JobState.RUNNING, "n1", "train")
    src.accounting["5"] = job("5", "alice", "CANCELLED", exit_code=0)
    _append(
        f, "v1 3.0 end job=5 array= user=alice state=ENDED exit=0:0 nodes=n1 partition=p account=a"
    )
    await feed.step()
    assert cache.status_of("5", ALICE).status.state is JobState.CANCELLED  # accounting's word
    assert src.snapshots == 1 and src.resolved == [["5"]]
    _append(
        f, "v1 2.5 start job=5 array= user=alice state=RUNNING exit= nodes=n1 partition=p account=a"
    )
    await feed.step()
    assert cache.status_of("5", ALICE).status.state is JobState.CANCELLED  # an end is final
    assert feed.healthy() and poller._paced(0.01) == 30.0


async def test_an_end_accounting_cannot_answer_yet_is_left_to_one_poll(tmp_path: Path) -> None:
    f, src, cache, feed, poller = _feed(tmp_path)
    src.queue = [job("6", "alice", "RUNNING")]
    await poller.poll_once()
    async with _running(poller, feed):
        await _until(lambda: feed.log.trusted, "the feed read the log")
        polls = src.snapshots
        src.queue = [job("6", "alice", "COMPLETED", exit_code=0)]
        _append(
            f,
            f"v1 3.0 end job=6 array= user=alice state=ENDED exit=0:0 {TAIL}",
        )
        await _until(lambda: src.snapshots > polls, "the unresolved end asked for a poll")
        await _until(lambda: cache.status_of("6", ALICE).status.state is JobState.COMPLETED,
                     "the poll brought the end")  # fmt: skip
        assert feed.to_poll == 1


@contextlib.asynccontextmanager
async def _running(poller: Poller, feed: EventFeed) -> AsyncIterator[None]:
    tasks = [asyncio.create_task(poller.run()), asyncio.create_task(feed.run())]
    try:
        yield
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await t


async def test_a_start_the_events_missed_brings_back_the_normal_pace(tmp_path: Path) -> None:
    f, src, _cache, feed, poller = _feed(tmp_path)
    feed.since = time.time() - 100
    src.queue = [job("7", "alice", "PENDING")]
    await poller.poll_once()
    assert feed.healthy() or not feed.log.trusted
    await feed.step()
    assert feed.healthy() and poller._paced(0.01) == 30.0
    # started 5 s ago (beyond the 1 s grace) and no event said so: the log is not complete
    src.queue = [job("7", "alice", "RUNNING", start_time=time.time() - 5)]
    await poller.poll_once()
    assert feed.missed == 1 and not feed.healthy() and poller._paced(0.01) == 0.01
    # a start seen by a poll before its event could come (within the grace) is not a miss...
    src.queue.append(job("8", "alice", "RUNNING", start_time=time.time()))
    await poller.poll_once()
    assert feed.missed == 1
    _append(f, f"v1 9.0 start job=8 array= user=alice state=RUNNING exit= {TAIL}")
    await feed.step()
    assert feed.missed == 1 and feed.healthy()  # ...when it comes: the log delivers again
    # ...and is one when it does not come in time
    src.queue.append(job("10", "alice", "RUNNING", start_time=time.time()))
    await poller.poll_once()
    later = time.time() + 2
    feed.clock = lambda: later
    await feed.step()
    assert feed.missed == 2 and not feed.healthy()


# -- real Slurm -----------------------------------------------------------------------


def _slurm_log() -> EventLog:
    events = event_log(SLURM_LOG, "slurm")
    assert events is not None
    events.read_lines(skip=True)
    if not events.trusted:
        pytest.skip(
            f"no trusted job event log at {SLURM_LOG} ({events.why}); scripts/dev-slurm start"
        )
    return events


def _sbatch(wrap: str) -> str:
    argv = ["sbatch", "--parsable", "--output=/dev/null", "--chdir=/", f"--wrap={wrap}"]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return out.stdout.strip().split(";")[0]


ROOT = Viewer(0, "root", is_staff=True)


@pytest.mark.slurm
async def test_real_slurm_a_jobs_start_and_end_reach_the_service_as_events(slurm: None) -> None:
    events = _slurm_log()
    src = SlurmSnapshotSource(timeout_s=30)
    cache = StatusCache()
    feed = EventFeed(events, cache, LocalPublisher(cache), src, check_s=0.05)
    poller = Poller(src, cache, LocalPublisher(cache), interval_s=1.0, events=feed, safety_s=600)
    async with _running(poller, feed):
        await _until(lambda: cache.health.polls == 1, "the first poll", 30)
        jid = _sbatch("sleep 2")
        await _until(lambda: (s := cache.current(jid)) is not None and s.state is JobState.RUNNING,
                     "the start event", 30)  # fmt: skip
        assert cache.health.polls == 1  # the start came from slurmctld, not from a poll
        await _until(lambda: (s := cache.current(jid)) is not None and s.state.terminal,
                     "the end event", 30)  # fmt: skip
        assert cache.status_of(jid, ROOT).status.state is JobState.COMPLETED
        # accounting answers the end (no poll), or one poll asked for by the event does
        assert cache.health.polls <= 1 + feed.to_poll
        assert feed.events >= 2 and feed.missed == 0 and feed.healthy()


@pytest.mark.slurm
async def test_real_slurm_the_poller_falls_back_when_events_stop(
    slurm: None, tmp_path: Path
) -> None:
    _slurm_log()  # this Slurm reports events, but not to the log this service reads
    f, silent = _log_of(tmp_path)
    os.chown(f, 0, 0)
    silent.trusted_uids = frozenset({0})
    src = SlurmSnapshotSource(timeout_s=30)
    cache = StatusCache()
    feed = EventFeed(silent, cache, LocalPublisher(cache), src, check_s=0.05)
    poller = Poller(src, cache, LocalPublisher(cache), interval_s=0.5, events=feed,
                    safety_s=3.0, miss_grace_s=1.0)  # fmt: skip
    jid = ""
    try:
        async with _running(poller, feed):
            await _until(lambda: cache.health.polls >= 1 and feed.healthy(), "a healthy feed", 30)
            jid = _sbatch("sleep 30")

            def started() -> bool:
                st = cache.current(jid)
                return st is not None and st.state is JobState.RUNNING

            await _until(started, "the job started (a poll saw it)", 60)
            # the safety poll found it running for over a second with no event, or saw it
            # first and its event did not follow within the grace
            await _until(lambda: feed.missed >= 1, f"a miss: {feed.health()}", 10)
            assert not feed.healthy()
            polls = cache.health.polls
            await _until(lambda: cache.health.polls >= polls + 3, "the normal pace", 10)
    finally:
        if jid:
            subprocess.run(["scancel", jid], check=False)
