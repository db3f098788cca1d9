"""Child processes: the one way the daemon starts a short-lived tool."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence


async def spawn(
    exe: str,
    args: Sequence[str],
    *,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """Start ``exe args...`` in a session of its own (a timeout can end it and its
    children), stdout and stderr piped, stdin piped only when there is ``stdin`` to send
    (else /dev/null); ``env`` None: this process's environment."""
    return await asyncio.create_subprocess_exec(
        exe,
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else None,
        start_new_session=True,
    )


async def run(
    exe: str,
    args: Sequence[str],
    *,
    timeout_s: float,
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    live: set[asyncio.subprocess.Process] | None = None,
) -> tuple[int, bytes, bytes]:
    """Run ``exe args...`` (as :func:`spawn`) to its end: ``(returncode, stdout, stderr)``.

    OSError when it cannot start; TimeoutError (an OSError too: catch it first) when it
    has not ended within ``timeout_s``. Whenever it is left early (timeout, cancellation)
    its process group is killed and it is reaped. ``live`` holds it while it runs (for an
    owner that ends what is still running when it closes)."""
    proc = await spawn(exe, args, stdin=stdin, env=env)
    if live is not None:
        live.add(proc)
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await proc.communicate(stdin)
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                await proc.wait()
        if live is not None:
            live.discard(proc)
    assert proc.returncode is not None
    return proc.returncode, out, err
