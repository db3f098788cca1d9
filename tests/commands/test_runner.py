"""The local runner: each command's own rusage; a slow sink slows the command."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tenantry.commands.runner import LocalRunner
from tenantry.core.models import CommandSpec, Principal

ME = Principal(1000, "alice")
BURN = "import time\nt=time.process_time()\nwhile time.process_time()-t<{s}: pass\n"
BIG = "b=bytearray({mb}*1024*1024)\nfor i in range(0,len(b),4096): b[i]=1\n"


def _own_peak_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/self/status")


def _spec(tmp: Path, code: str) -> CommandSpec:
    return CommandSpec(argv=(sys.executable, "-c", code), cwd=str(tmp))


async def _drop(stream: str, data: bytes) -> None:
    return None


@pytest.fixture(params=["spawner", "in-daemon"])
async def runner(request: pytest.FixtureRequest) -> AsyncIterator[LocalRunner]:
    """Both ways of spawning: the spawner process, and the daemon itself (its fallback)."""
    r = LocalRunner(spawner=request.param == "spawner")
    await r.start()
    assert r.spawner.alive is (request.param == "spawner")
    yield r
    await r.aclose()


async def test_concurrent_commands_are_billed_their_own_usage(
    tmp_path: Path, runner: LocalRunner
) -> None:
    sleeper = runner.run(_spec(tmp_path, "import time; time.sleep(1.5)"), ME, _drop)
    burner = runner.run(_spec(tmp_path, BURN.format(s=0.8) + BIG.format(mb=200)), ME, _drop)
    quiet, busy = await asyncio.gather(sleeper, burner)
    assert busy.cpu_s >= 0.7 and busy.max_rss_kb >= 200 * 1024, busy
    # the sleeper was not charged the burner's CPU or memory (RUSAGE_CHILDREN
    # did); bounds relative to the burner, so a loaded machine cannot flip them
    assert quiet.cpu_s < busy.cpu_s / 2, (quiet, busy)
    # Linux folds the spawning process's peak RSS into a child's ru_maxrss at
    # execve, so the sleeper's figure is at least this process's own peak; it
    # must not include the burner's 200 MB on top of that
    assert quiet.max_rss_kb < _own_peak_kb() + 100 * 1024, (quiet, busy)


async def test_a_slow_sink_applies_backpressure(tmp_path: Path, runner: LocalRunner) -> None:
    """The runner stops reading while the sink blocks, so the command waits on its pipe."""
    gate = asyncio.Event()
    got = 0

    async def slow(stream: str, data: bytes) -> None:
        nonlocal got
        got += len(data)
        if got > 1_000_000:
            await gate.wait()

    done = tmp_path / "wrote-all"
    code = f"import sys\nsys.stdout.buffer.write(b'x'*50_000_000)\nopen({str(done)!r},'w')"
    task = asyncio.create_task(runner.run(_spec(tmp_path, code), ME, slow))
    async with asyncio.timeout(20):
        while got <= 1_000_000:
            await asyncio.sleep(0.01)
    await asyncio.sleep(0.3)  # give a command that ignores backpressure time to finish
    assert not done.exists() and got < 5_000_000, got
    gate.set()
    result = await asyncio.wait_for(task, 60)
    assert result.exit_code == 0 and done.exists()


async def test_output_streams_and_no_descriptor_is_left_open(
    tmp_path: Path, runner: LocalRunner
) -> None:
    chunks: list[tuple[str, bytes]] = []

    async def keep(stream: str, data: bytes) -> None:
        chunks.append((stream, data))

    def fds() -> set[str]:
        """What this process holds open that a command could leak: pipes, pidfds,
        /dev/null (each pipe's inode is new, so a leaked one shows even when another
        test's garbage closes some other descriptor meanwhile)."""
        held = set()
        for fd in Path("/proc/self/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:  # closed while we looked
                continue
            if target.startswith(("pipe:", "anon_inode:[pidfd]", "/dev/null")):
                held.add(f"{fd.name} {target}")
        return held

    code = "import sys; print('out'); print('err', file=sys.stderr); print(sys.stdin.read()=='')"
    first = await runner.run(_spec(tmp_path, code), ME, keep)
    assert first.exit_code == 0 and first.stdout_tail == "out\nTrue\n"
    assert first.stderr_tail == "err\n" and b"".join(d for s, d in chunks if s == "stderr")
    before = fds()
    for _ in range(20):
        done = await runner.run(CommandSpec(argv=("true",), cwd=str(tmp_path)), ME, _drop)
        assert done.exit_code == 0
    missing = await runner.run(CommandSpec(argv=("no-such-tnt-cmd",), cwd=str(tmp_path)), ME, _drop)
    assert missing.exit_code == 127
    assert fds() - before == set()  # pipes, pidfds and stdin are all closed again


async def test_a_command_starts_with_default_signals_and_its_own_path(
    tmp_path: Path, runner: LocalRunner
) -> None:
    """Python (and the spawner) ignore SIGPIPE, SIGXFSZ and SIGINT; a command must not
    inherit that. Its program is found on its own PATH, not the daemon's."""
    out: list[bytes] = []

    async def keep(stream: str, data: bytes) -> None:
        out.append(data)

    r = await runner.run(
        CommandSpec(argv=("cat", "/proc/self/status"), cwd=str(tmp_path)), ME, keep
    )
    assert r.exit_code == 0
    line = next(x for x in b"".join(out).decode().splitlines() if x.startswith("SigIgn:"))
    ignored = {n + 1 for n in range(64) if int(line.split()[1], 16) >> n & 1}
    assert not ignored & {int(s) for s in signal.valid_signals()}, ignored
    tool = tmp_path / "bin" / "tnt-only-here"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho found\n")
    tool.chmod(0o755)
    env = {"PATH": f"{tool.parent}:/usr/bin:/bin"}
    found = await runner.run(
        CommandSpec(argv=("tnt-only-here",), cwd=str(tmp_path), env=env), ME, _drop
    )
    assert found.stdout_tail == "found\n"
    (tmp_path / "bin" / "plain").write_text("not a program\n")
    denied = await runner.run(CommandSpec(argv=("plain",), cwd=str(tmp_path), env=env), ME, _drop)
    assert denied.exit_code == 126
