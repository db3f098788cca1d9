"""Running a Slurm client tool (squeue, sacct, sacctmgr, ...) from the facility service."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tenantry.core import errors, proc


async def run_slurm_tool(
    argv: Sequence[str],
    *,
    binaries: Mapping[str, str],
    timeout_s: float,
    no_answer: str,
) -> tuple[int, str, str]:
    """``(returncode, stdout, stderr)`` of ``argv`` (``argv[0]`` looked up in ``binaries``).

    BackendUnavailable when the tool is missing or has not answered within ``timeout_s``
    (``no_answer`` is the hint then)."""
    cmd = argv[0]
    try:
        rc, out, err = await proc.run(binaries.get(cmd, cmd), argv[1:], timeout_s=timeout_s)
    except FileNotFoundError as exc:
        raise errors.BackendUnavailable(
            f"{cmd} is not installed on this host",
            hint="install the Slurm client tools on the facility service's host",
        ) from exc
    except TimeoutError as exc:
        raise errors.BackendUnavailable(
            f"{cmd} got no answer from Slurm within {timeout_s:g} s", hint=no_answer
        ) from exc
    return rc, out.decode(errors="replace"), err.decode(errors="replace")
