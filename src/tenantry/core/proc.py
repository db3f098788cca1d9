"""Child processes: the one way the daemon starts a short-lived tool."""

from __future__ import annotations

import asyncio
import contextlib
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
) -> tuple[int, bytes, bytes]:
    """Run ``exe args...`` (as :func:`spawn`) to its end: ``(returncode, stdout, stderr)``.

    OSError when it cannot start; TimeoutError when it has not ended within ``timeout_s``
    (it is killed and reaped first)."""
    proc = await spawn(exe, args, stdin=stdin)
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout_s)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out, err
