"""Contract tests of the lease manager and real pilots on the local backend."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import LeaseCapReached
from tenantry.core.models import CommandResult, CommandSpec, Principal, Resources
from tenantry.leases.manager import LeaseManager
from tenantry.leases.pilot import protocol as p
from tenantry.leases.pilot.worker import Pilot, PilotConfig

from ..path_tools import path_tools
from .conftest import Collect, Stack, Until

PY = sys.executable


def py(code: str, **kw: object) -> CommandSpec:
    return CommandSpec(argv=(PY, "-c", code), **kw)  # type: ignore[arg-type]


async def _busy_lease(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until, seconds: int
) -> tuple[LeaseManager, asyncio.Task[CommandResult], dict[str, Any]]:
    """A manager with one lease busy running a command that sleeps ``seconds``."""
    mgr = await stack.manager()
    code = f"import time; time.sleep({seconds})"
    task = asyncio.create_task(mgr.run(py(code), alice, collect()))
    lease = await wait(lambda: next((x for x in mgr.leases() if x["in_use"]), None))
    return mgr, task, lease


def jobs_of(be: object) -> list[str]:
    return list(be._jobs)  # type: ignore[attr-defined]


async def test_lease_acquired_as_job_and_reused(
    stack: Stack, alice: Principal, collect: type[Collect]
) -> None:
    mgr = await stack.manager()
    sink = collect()
    first = await mgr.run(py("print('hello')"), alice, sink)
    assert first.state == "completed" and first.exit_code == 0
    assert first.where == "lease"
    assert first.stdout_tail == "hello\n" and sink.text() == "hello\n"
    (lease,) = mgr.leases()
    assert lease["state"] == "ready" and lease["backend_id"]
    for i in range(20):
        r = await mgr.run(py(f"print({i})"), alice, collect())
        assert r.stdout_tail == f"{i}\n"
    pair = await asyncio.gather(*(mgr.run(py("print(7)"), alice, collect()) for _ in range(2)))
    assert [r.state for r in pair] == ["completed", "completed"]
    assert len(jobs_of(mgr.backend)) == 1, "one pilot job served every command"
    (lease,) = mgr.leases()
    assert lease["served"] == 23 and lease["slots"] == 2
    assert stack.kinds().count("lease.requested") == 1
    assert stack.kinds().count("lease.ready") == 1


async def test_command_cwd_env_exit_codes_and_usage(
    stack: Stack, alice: Principal, collect: type[Collect], tmp_path: Path
) -> None:
    mgr = await stack.manager()
    env = {"PATH": os.environ["PATH"], "FOO": "bar"}
    r = await mgr.run(
        py(
            "import os; e = os.environ;print(os.getcwd(), e['FOO'], 'TENANTRY_LEASE_SECRET' in e)",
            cwd=str(tmp_path),
            env=env,
        ),
        alice,
        collect(),
    )
    assert r.stdout_tail.split() == [str(tmp_path), "bar", "False"]
    r = await mgr.run(py("import sys; sys.stderr.write('boom'); sys.exit(3)"), alice, collect())
    assert (r.state, r.exit_code, r.stderr_tail) == ("failed", 3, "boom")
    r = await mgr.run(CommandSpec(argv=("/no/such/program",)), alice, collect())
    assert (r.state, r.exit_code) == ("failed", 127) and "/no/such/program" in r.reason
    r = await mgr.run(py("x = bytearray(50_000_000); sum(range(2_000_000))"), alice, collect())
    assert r.cpu_s > 0.01 and r.max_rss_kb > 40_000
    r = await mgr.run(py("import time; time.sleep(30)", timeout_s=0.5), alice, collect())
    assert r.state == "timeout" and r.duration_s < 10


async def test_cancel_kills_the_command_tree(
    stack: Stack, alice: Principal, collect: type[Collect], tmp_path: Path, wait: Until
) -> None:
    mgr = await stack.manager()
    pidfile = tmp_path / "pid"
    code = (
        "import os, subprocess, sys, time;"
        "c = subprocess.Popen(['sleep', '60']);"
        f"open({str(pidfile)!r}, 'w').write(str(c.pid)); time.sleep(60)"
    )
    task = asyncio.create_task(mgr.run(py(code, env=dict(os.environ)), alice, collect()))
    await wait(lambda: pidfile.exists() and pidfile.read_text(), what="grandchild pid")
    grandchild = int(pidfile.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait(lambda: not _alive(grandchild), what="the command tree to die")
    await wait(lambda: mgr.leases()[0]["in_use"] == 0, what="slot freed")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.split(")")[-1].split()[0] != "Z"


async def test_idle_lease_is_released_and_idle_core_seconds_counted(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager(idle_s=0.4)
    await mgr.run(py("pass"), alice, collect())
    lid = mgr.leases()[0]["id"]
    await wait(lambda: not mgr.leases(), what="idle release")
    (ended,) = mgr.leases(include_ended=True)
    assert ended["id"] == lid and ended["state"] == "released" and ended["reason"] == "idle"
    assert ended["idle_core_s"] >= 0.4
    be = mgr.backend
    (jid,) = jobs_of(be)
    await wait(lambda: be._jobs[jid].state.terminal, what="pilot job to end")  # type: ignore[attr-defined]
    rel = [e for e in stack.events if e.type.value == "lease.released"]
    assert rel and rel[0].data["served"] == 1


async def test_pilot_killed_mid_command_is_lease_lost(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr, task, lease = await _busy_lease(stack, alice, collect, wait, 3)
    pid = mgr._live[lease["id"]].lease.pid
    os.kill(pid, signal.SIGKILL)
    result = await asyncio.wait_for(task, 10)
    assert (result.state, result.reason, result.exit_code) == ("lost", "lease lost", None)
    (gone,) = mgr.leases(include_ended=True)
    assert gone["state"] == "lost"
    assert "lease.lost" in stack.kinds()
    again = await mgr.run(py("print('fresh')"), alice, collect())
    assert again.stdout_tail == "fresh\n" and len(jobs_of(mgr.backend)) == 2


async def test_idempotent_command_is_retried_once_on_a_new_lease(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager()
    spec = py("import time; time.sleep(1); print('ok')", idempotent=True)
    task = asyncio.create_task(mgr.run(spec, alice, collect()))
    lease = await wait(lambda: next((x for x in mgr.leases() if x["in_use"]), None))
    os.kill(mgr._live[lease["id"]].lease.pid, signal.SIGKILL)
    result = await asyncio.wait_for(task, 20)
    assert (result.state, result.stdout_tail) == ("completed", "ok\n")
    assert len(jobs_of(mgr.backend)) == 2


async def test_backend_cancel_of_the_lease_job_is_lease_lost(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr, task, lease = await _busy_lease(stack, alice, collect, wait, 5)
    await mgr.backend.cancel(lease["backend_id"])
    result = await asyncio.wait_for(task, 10)
    assert (result.state, result.reason) == ("lost", "lease lost")


async def test_walltime_drain_moves_new_work_to_another_lease(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager(time_s=4, drain_s=2.5, slots=1)
    sink = collect()
    long = asyncio.create_task(mgr.run(py("import time; time.sleep(3); print('x')"), alice, sink))
    first = await wait(lambda: next((x for x in mgr.leases() if x["in_use"]), None))
    await wait(lambda: mgr.leases()[0]["state"] == "draining", what=mgr.leases)
    later = await mgr.run(py("print('elsewhere')"), alice, collect())
    assert later.stdout_tail == "elsewhere\n"
    done = await asyncio.wait_for(long, 10)
    assert done.state == "completed", "a draining lease finishes what it runs"
    await wait(
        lambda: any(
            x["id"] == first["id"] and x["state"] == "ended" for x in mgr.leases(include_ended=True)
        ),
        what="drained lease to end",
    )
    assert len(jobs_of(mgr.backend)) == 2


async def test_daemon_restart_pilot_reconnects_and_results_are_kept(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    be = await stack.backend()
    mgr1 = await stack.manager(be)
    port = mgr1.address[1]
    sink = collect()
    code = "import time; print('start', flush=True); time.sleep(1); print('done')"
    task = asyncio.create_task(mgr1.run(py(code), alice, sink, cid="c-restart"))
    await wait(lambda: "start" in sink.text(), what="command to start")
    lid = mgr1.leases()[0]["id"]
    await mgr1.aclose()  # the daemon goes away while the command runs
    with pytest.raises(Exception, match="daemon stopped"):
        await task
    mgr2 = await stack.manager(be)
    assert mgr2.address[1] == port, "the new daemon listens where pilots redial"
    result = await wait(lambda: mgr2.result("c-restart"), what="replayed result")
    assert result["exit_code"] == 0 and "done" in result["stdout_tail"]
    assert mgr2.leases()[0]["id"] == lid and mgr2.leases()[0]["state"] == "ready"
    r = await mgr2.run(py("print('after')"), alice, collect())
    assert r.stdout_tail == "after\n"
    assert len(jobs_of(be)) == 1, "the same pilot serves the new daemon"


@pytest.mark.parametrize("tick_s", [0.1, 0.002])
async def test_caps_free_idle_leases_or_refuse(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until, tick_s: float
) -> None:
    # with a fast housekeeping tick, passes run while the idle lease is released (draining,
    # still counted against the cap): the command waits for the room, it is not refused
    mgr = await stack.manager(max_per_user=1, tick_s=tick_s)
    await mgr.run(py("pass"), alice, collect())
    two = CommandSpec(argv=(PY, "-c", "print(2)"), resources=Resources(cpus=2))
    r = await mgr.run(two, alice, collect())
    assert r.stdout_tail == "2\n", "an idle lease of another pool made room"
    assert [x["pool"] for x in mgr.leases()] == ["2c"]
    busy = asyncio.create_task(
        mgr.run(
            CommandSpec(argv=(PY, "-c", "import time; time.sleep(3)"), resources=Resources(cpus=2)),
            alice,
            collect(),
        )
    )
    await wait(lambda: mgr.leases()[0]["in_use"] == 1)
    with pytest.raises(LeaseCapReached):
        await mgr.run(py("pass"), alice, collect())
    assert (await busy).state == "completed"


async def test_a_pilot_without_the_key_is_rejected(
    stack: Stack, alice: Principal, collect: type[Collect]
) -> None:
    mgr = await stack.manager()
    await mgr.run(py("pass"), alice, collect())
    lid = mgr.leases()[0]["id"]
    reader, writer = await asyncio.open_connection(*mgr.address)
    hello = p.Hello(lease=lid, nonce="n", slots=1, walltime_end=0, host="h", pid=1)
    writer.write(p.encode(hello))
    welcome = await p.recv(reader)
    assert isinstance(welcome, p.Welcome)
    writer.write(p.encode(p.Auth(proof="0" * 64)))
    assert await p.recv(reader) == p.Reject(reason="authentication failed")
    writer.close()
    assert mgr.leases()[0]["state"] == "ready", "the real pilot is unaffected"

    proc = await asyncio.create_subprocess_exec(
        PY,
        "-m",
        "tenantry",
        "pilot",
        "--connect",
        f"127.0.0.1:{mgr.address[1]}",
        "--lease",
        lid,
        "--orphan",
        "1",
        env={**os.environ, "TENANTRY_LEASE_SECRET": "guess"},
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 15)
    assert proc.returncode == 4, err
    assert b"did not prove the lease key" in err and b"guess" not in err


async def test_a_pilot_never_runs_work_from_an_impostor_daemon(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    async def impostor(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello = await p.recv(reader)
        writer.write(p.encode(p.Welcome(heartbeat_s=0.2, nonce="x", proof="f" * 64)))
        writer.write(p.encode(p.Run(id="c", argv=("touch", str(marker)), cwd="/")))
        await writer.drain()
        assert isinstance(hello, p.Hello)
        await reader.read()

    server = await asyncio.start_server(impostor, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    cfg = PilotConfig(host="127.0.0.1", port=port, lease="l-x", secret="real", orphan_s=1.0)
    code = await asyncio.wait_for(Pilot(cfg).serve(), 15)
    server.close()
    assert code == 4 and not marker.exists()


async def test_kill_switch_stops_commands_and_releases_owned_leases(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager()
    task = asyncio.create_task(mgr.run(py("import time; time.sleep(30)"), alice, collect()))
    await wait(lambda: mgr.leases() and mgr.leases()[0]["in_use"] == 1)
    out = await mgr.drain_principal(alice.key)
    assert out == 1, "one lease released"
    result = await asyncio.wait_for(task, 10)
    assert result.state == "error" and result.reason == "cancelled"
    await wait(lambda: not mgr.leases(), what="owned lease released")


async def test_commands_sent_ahead_run_as_slots_free_and_can_be_cancelled(
    stack: Stack, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    mgr = await stack.manager(max_per_session=1, prefetch=2)
    slow = [
        asyncio.create_task(mgr.run(py("import time; time.sleep(1)"), alice, collect()))
        for _ in range(2)
    ]
    await wait(lambda: mgr.leases() and mgr.leases()[0]["in_use"] == 2, what="both slots busy")
    ahead = asyncio.create_task(mgr.run(py("print('ahead')"), alice, collect()))
    doomed = asyncio.create_task(mgr.run(py("print('never')"), alice, collect()))
    await wait(lambda: mgr.leases()[0]["sent_ahead"] == 2, what="two sent ahead")
    doomed.cancel()
    assert (await ahead).stdout_tail == "ahead\n"
    assert [r.state for r in await asyncio.gather(*slow)] == ["completed", "completed"]
    assert len(jobs_of(mgr.backend)) == 1
    await wait(lambda: mgr.leases()[0]["in_use"] == 0, what="all slots free")


async def test_a_wildcard_listener_is_advertised_by_host_name(stack: Stack) -> None:
    import socket

    mgr = await stack.manager(listen_host="0.0.0.0")
    assert mgr.address[0] == socket.getfqdn() and mgr.address[1] > 0


async def test_lease_secret_is_in_no_environment_argv_or_readable_file(
    stack: Stack, alice: Principal, collect: type[Collect]
) -> None:
    mgr = await stack.manager()
    first = await mgr.run(py("print('hi')"), alice, collect())
    assert first.state == "completed"
    (lease,) = mgr.leases()
    live = mgr._live[lease["id"]]
    secret_file = mgr.dir / f"{lease['id']}.secret"
    secret = secret_file.read_text().strip()
    assert secret and secret_file.stat().st_mode & 0o077 == 0
    pid = live.lease.pid
    with open(f"/proc/{pid}/environ", "rb") as fh:
        assert secret.encode() not in fh.read(), "secret in the pilot's initial environment"
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        assert secret.encode() not in fh.read(), "secret on the pilot's command line"
    script = (mgr.dir / f"{lease['id']}.sh").read_text()
    assert secret not in script


async def test_an_environment_crosses_the_link_once(
    stack: Stack, alice: Principal, collect: type[Collect]
) -> None:
    """The measured cost: every run carried, MAC'd and checked the caller's whole
    environment; now the first run of each sends it, the next ones name it."""
    mgr = await stack.manager()
    show = "import os; print(os.environ['TNT_E'])"
    env_a = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TNT_E": "a"}
    env_b = {**env_a, "TNT_E": "b"}
    outs = []
    for env in (env_a, env_a, env_b, env_a):
        r = await mgr.run(py(show, env=env), alice, collect())
        outs.append(r.stdout_tail)
    assert outs == ["a\n", "a\n", "b\n", "a\n"]
    (live,) = mgr._live.values()
    assert len(live.envs) == 2  # two environments sent, each once


async def test_a_lease_command_starts_clean_on_its_own_path(
    stack: Stack, alice: Principal, collect: type[Collect], tmp_path: Path
) -> None:
    """The pilot starts commands by posix_spawn (no Popen work per start): they still
    get the default signal dispositions, no descriptor beyond 0-2 but the one ``ls``
    opens, and their program looked up on their own PATH (127 missing, 126 not
    executable) rather than the pilot's."""
    mgr = await stack.manager()
    r = await mgr.run(CommandSpec(argv=("cat", "/proc/self/status")), alice, collect())
    line = next(x for x in r.stdout_tail.splitlines() if x.startswith("SigIgn:"))
    ignored = {n + 1 for n in range(64) if int(line.split()[1], 16) >> n & 1}
    assert not ignored & {int(s) for s in signal.valid_signals()}, ignored
    r = await mgr.run(CommandSpec(argv=("ls", "/proc/self/fd")), alice, collect())
    assert set(r.stdout_tail.split()) <= {"0", "1", "2", "3"}, r.stdout_tail
    env = path_tools(tmp_path)
    found = await mgr.run(
        CommandSpec(argv=("tnt-only-here",), cwd=str(tmp_path), env=env), alice, collect()
    )
    assert (found.exit_code, found.stdout_tail) == (0, f"found\n{tmp_path}\n")
    plain = await mgr.run(CommandSpec(argv=("plain",), env=env), alice, collect())
    assert plain.exit_code == 126
    missing = await mgr.run(CommandSpec(argv=("tnt-nowhere",), env=env), alice, collect())
    assert missing.exit_code == 127 and "tnt-nowhere" in missing.reason
    gone = await mgr.run(CommandSpec(argv=("true",), cwd=str(tmp_path / "no")), alice, collect())
    assert gone.exit_code == 127 and str(tmp_path / "no") in gone.reason


async def test_a_command_is_reported_at_its_exit_whatever_it_leaves_holding_its_pipes(
    stack: Stack, alice: Principal, collect: type[Collect], tmp_path: Path, wait: Until
) -> None:
    """What a command leaves in its group is killed at its exit; what escaped the
    group and keeps its pipes open delays the report by the pilot's grace only."""
    mgr = await stack.manager()
    kept, escaped = tmp_path / "kept", tmp_path / "escaped"
    code = (
        "import subprocess, sys;"
        f"c = subprocess.Popen(['sleep', '60'], stdout=sys.stdout);"
        f"open({str(kept)!r}, 'w').write(str(c.pid)); print('left')"
    )
    r = await mgr.run(py(code), alice, collect())
    assert (r.state, r.exit_code, r.stdout_tail) == ("completed", 0, "left\n")
    assert r.duration_s < 5
    await wait(lambda: not _alive(int(kept.read_text())), what="the leftover in its group to end")
    code = (
        "import subprocess, sys;"
        "c = subprocess.Popen(['sleep', '60'], stdout=sys.stdout, start_new_session=True);"
        f"open({str(escaped)!r}, 'w').write(str(c.pid)); print('escaped'); sys.exit(4)"
    )
    r = await mgr.run(py(code), alice, collect())
    try:
        assert (r.state, r.exit_code, r.stdout_tail) == ("failed", 4, "escaped\n")
        assert 1.5 < r.duration_s < 10  # the pilot's grace for pipes held open (2 s)
        again = await mgr.run(py("print('next')"), alice, collect())
        assert again.stdout_tail == "next\n"
    finally:
        os.kill(int(escaped.read_text()), signal.SIGKILL)
