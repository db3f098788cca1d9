"""The first thing a shim runs: decide agent or human, cheaply, before importing more.

A human's ``squeue`` must cost next to nothing on top of the real one, so this
module imports only ``os``, ``sys`` and ``tenantry.client.principal``; the agent path
(``tenantry.agents.shims.run``) loads only when an agent is detected.
"""

from __future__ import annotations

import os
import sys

from tenantry.client.principal import detect_agent

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

NAMES = ("squeue", "sacct", "sbatch", "scancel", "scontrol")
MARKER = "tenantry-shim:"  # in every wrapper's first lines; never exec one of those


def _is_shim(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return MARKER.encode() in f.read(400)
    except OSError:
        return False


def find_real(name: str, path_env: str, shim_dir: str = "") -> str | None:
    """The first ``name`` on ``path_env`` that is not in ``shim_dir`` and is not a shim."""
    skip = os.path.realpath(shim_dir) if shim_dir else ""
    for d in path_env.split(os.pathsep):
        if not d or (skip and os.path.realpath(d) == skip):
            continue
        cand = os.path.join(d, name)
        if os.path.isfile(cand) and os.access(cand, os.X_OK) and not _is_shim(cand):
            return cand
    return None


def exec_real(name: str, argv: Sequence[str], shim_dir: str, env: Mapping[str, str]) -> int:
    real = find_real(name, env.get("PATH", os.defpath), shim_dir)
    if real is None:
        sys.stderr.write(f"{name}: command not found (no real {name} on PATH besides the shim)\n")
        return 127
    os.execve(real, [name, *argv], dict(env))  # noqa: S606 - argv list, no shell
    return 0  # not reached


def is_show_job(argv: Sequence[str]) -> bool:
    words = [a for a in argv if not a.startswith("-")]
    return len(words) >= 2 and words[0] == "show" and words[1] in {"job", "jobs", "jobid"}


def main(name: str, argv: Sequence[str], *, shim_dir: str = "", **kw: object) -> int:
    """Entry point of every wrapper: agents -> ``run.dispatch``, humans -> the real binary."""
    env = kw.pop("env", None) or os.environ
    product, _session = detect_agent(env)  # type: ignore[arg-type]
    intercept = product != "human" and name in NAMES
    if name == "scontrol" and not is_show_job(argv):
        intercept = False
    if not intercept:
        return exec_real(name, argv, shim_dir, env)  # type: ignore[arg-type]
    from tenantry.agents.shims.run import dispatch

    return dispatch(name, argv, env=env, **kw)  # type: ignore[arg-type]
