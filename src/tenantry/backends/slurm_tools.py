"""Running a Slurm client tool (sbatch, squeue, sacct, ...) for the backend and the facility."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from tenantry.core import errors, proc


async def run_slurm_tool(
    argv: Sequence[str],
    *,
    binaries: Mapping[str, str],
    timeout_s: float,
    missing: str,
    no_answer: str = "the Slurm controller may be down or overloaded; this is retryable",
    stdin: bytes | None = None,
    env: Mapping[str, str] | None = None,
    live: set[asyncio.subprocess.Process] | None = None,
) -> tuple[int, str, str]:
    """``(returncode, stdout, stderr)`` of ``argv`` (``argv[0]`` looked up in ``binaries``).

    BackendUnavailable when the tool is missing (``missing`` is the hint) or has not
    answered within ``timeout_s`` (``no_answer``). ``live``: see ``proc.run``."""
    cmd = argv[0]
    exe = binaries.get(cmd) or cmd
    try:
        rc, out, err = await proc.run(
            exe, argv[1:], timeout_s=timeout_s, stdin=stdin, env=env, live=live
        )
    except FileNotFoundError as exc:
        raise errors.BackendUnavailable(
            f"{cmd} is not installed on this host", hint=missing, command=cmd
        ) from exc
    except TimeoutError as exc:
        raise errors.BackendUnavailable(
            f"{cmd} got no answer from Slurm within {timeout_s:g} s", hint=no_answer, command=cmd
        ) from exc
    return rc, out.decode(errors="replace"), err.decode(errors="replace")
