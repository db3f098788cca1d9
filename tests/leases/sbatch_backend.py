"""A minimal sbatch/squeue/sacct/scancel backend for lease tests and the bench.

Only a stand-in until the real ``tenantry.backends.slurm.SlurmBackend`` is on
main: argv lists, ``--parsable``, machine-readable ``-P`` output. Not product code.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from tenantry.backends.base import JobUpdate, Submitted
from tenantry.errors import BackendError, SubmissionRejected
from tenantry.models import JobSpec, JobState, Principal


async def _run(*argv: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 30)
    if proc.returncode != 0:
        raise BackendError(f"{argv[0]} failed: {err.decode().strip()}")
    return out.decode()


def _state(text: str) -> JobState:
    word = text.split()[0] if text.strip() else "UNKNOWN"
    try:
        return JobState(word)
    except ValueError:
        return JobState.UNKNOWN


class SbatchBackend:
    name = "slurm"

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.calls_by_verb: dict[str, int] = {}

    def _count(self, verb: str) -> None:
        self.calls_by_verb[verb] = self.calls_by_verb.get(verb, 0) + 1

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    async def submit(self, spec: JobSpec, principal: Principal, job_id: str) -> Submitted:
        res = spec.resources
        argv = [
            "sbatch",
            "--parsable",
            f"--job-name={spec.name or job_id}",
            f"--chdir={spec.cwd}",
            f"--cpus-per-task={res.cpus}",
            f"--output={spec.output or 'tenantry-%j.out'}",
        ]
        if res.time_s:
            argv.append(f"--time={max(1, -(-int(res.time_s) // 60))}")
        if res.mem_mb:
            argv.append(f"--mem={res.mem_mb}M")
        if res.partition:
            argv.append(f"--partition={res.partition}")
        self._count("sbatch")
        try:
            out = await _run(*argv, stdin=spec.script_text.encode(), env={**os.environ, **spec.env})
        except BackendError as exc:
            raise SubmissionRejected(str(exc)) from exc
        jid = out.strip().split(";")[0]
        self.submitted.append(jid)
        return Submitted(jid, spec.output, "")

    async def query(self, backend_ids: Sequence[str]) -> dict[str, JobUpdate]:
        if not backend_ids:
            return {}
        self._count("sacct")
        out = await _run(
            "sacct", "-n", "-X", "-P", "-o", "JobID,State,ExitCode", "-j", ",".join(backend_ids)
        )
        ups: dict[str, JobUpdate] = {}
        for line in out.splitlines():
            jid, state, code = ([*line.split("|"), "", "", ""])[:3]
            if jid in backend_ids:
                ups[jid] = JobUpdate(jid, _state(state), int(code.split(":")[0] or 0))
        return ups

    async def cancel(self, backend_id: str) -> None:
        self._count("scancel")
        await _run("scancel", backend_id)

    async def info(self) -> dict[str, Any]:
        return {"backend": self.name}
