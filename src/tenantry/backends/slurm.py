"""The Slurm backend: ``sbatch``, ``squeue``, ``sacct``, ``scancel``, ``sinfo``.

Every call is an argv list run through asyncio with a timeout of its own
(``slurm_timeout_s``; Slurm clients take ~9 s to give up on a dead
controller). Output is parsed by the pure functions in ``slurm_parse`` and
Slurm's errors become Tenantry errors there. ``calls`` counts the commands run,
by name, so the gateway can report how many queries reached Slurm.

Status for any number of jobs costs one ``squeue`` of those jobs in its own
columns (``squeue_fields``: 22.05's ``--json`` ignores every filter and prints
the whole cluster's queue) plus one ``sacct`` for the jobs that already left
the queue. Every job carries its principal in ``--comment``
(``tenantry.core.attribution``); never in AdminComment.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tenantry.backends import slurm_parse as sp
from tenantry.backends import squeue_fields
from tenantry.backends.base import JobUpdate, Submitted
from tenantry.backends.slurm_tools import run_slurm_tool
from tenantry.core import attribution, errors
from tenantry.core.models import JobSpec, Principal
from tenantry.core.settings import Settings

__all__ = ["CONTROLLER_COMMANDS", "SlurmBackend"]

# Commands that reach slurmctld (sacct talks to slurmdbd instead).
INFO_TTL_S = 30.0  # partitions and nodes: the pilots and policy of a busy daemon ask often
CONTROLLER_COMMANDS = frozenset({"sbatch", "squeue", "scancel", "sinfo", "scontrol"})
COMMANDS = (*sorted(CONTROLLER_COMMANDS), "sacct")

_JOB_ID = re.compile(r"^\d+(?:_\d+)?$")
# Options the backend sets itself: passing them through would break
# attribution (--comment) or the parsing of sbatch's answer.
_RESERVED = ("--comment", "--parsable", "--admin-comment", "--wrap", "--test-only")


class SlurmBackend:
    """Jobs on a Slurm cluster, through its command-line clients."""

    name = "slurm"

    def __init__(
        self,
        settings: Settings,
        *,
        binaries: Mapping[str, str] | None = None,
        user: str = "",
    ) -> None:
        self.settings = settings
        self.timeout_s = float(settings.slurm_timeout_s)
        self.calls: Counter[str] = Counter()
        self._bin: dict[str, str] = dict(binaries or {})
        self._user = user
        self._procs: set[asyncio.subprocess.Process] = set()
        self._info: tuple[float, dict[str, Any]] | None = None  # (when, what) of the last info

    # -- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        from tenantry.agents.shims.entry import find_real

        path = os.environ.get("PATH", os.defpath)
        for cmd in COMMANDS:
            if cmd not in self._bin:
                # never one of Tenantry's own PATH shims: that would loop back here
                self._bin[cmd] = find_real(cmd, path) or cmd
        if not self._user:
            self._user = getpass.getuser()

    async def aclose(self) -> None:
        for proc in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        for proc in list(self._procs):
            with contextlib.suppress(Exception):
                await proc.wait()

    @property
    def controller_calls(self) -> int:
        """Commands run so far that reached the controller (all but sacct)."""
        return sum(n for cmd, n in self.calls.items() if cmd in CONTROLLER_COMMANDS)

    # -- running a client ------------------------------------------------------------
    async def _run(
        self,
        argv: Sequence[str],
        *,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[int, str, str]:
        self.calls[argv[0]] += 1
        return await run_slurm_tool(
            argv,
            binaries=self._bin,
            timeout_s=self.timeout_s,
            missing="install the Slurm client tools (slurm-client), or use the local backend",
            stdin=stdin,
            env=env,
            live=self._procs,
        )

    # -- submit ------------------------------------------------------------------
    def sbatch_argv(
        self, spec: JobSpec, principal: Principal, job_id: str, intent: str = ""
    ) -> tuple[list[str], bool]:
        """The sbatch argv for ``spec`` and whether the script goes on stdin."""
        res = spec.resources
        name = spec.name or Path(spec.script).name or "tenantry"
        argv = [
            "sbatch",
            "--parsable",
            f"--comment={attribution.encode(principal, job_id, intent)}",
            f"--chdir={spec.cwd}",
            f"--job-name={name}",
            f"--output={spec.output or default_output(spec)}",
        ]
        if spec.error:
            argv.append(f"--error={spec.error}")
        if res.cpus and res.cpus > 0:
            argv.append(f"--cpus-per-task={int(res.cpus)}")
        if res.mem_mb:
            argv.append(f"--mem={int(res.mem_mb)}M")
        if res.gpus:
            argv.append(f"--gres=gpu:{int(res.gpus)}")
        if res.time_s:
            argv.append(f"--time={sp.slurm_minutes(res.time_s)}")
        partition = res.partition or self.settings.slurm_partition
        if partition:
            argv.append(f"--partition={partition}")
        account = res.account or self.settings.slurm_account
        if account:
            argv.append(f"--account={account}")
        if spec.array:
            argv.append(f"--array={spec.array}")
        for opt in spec.extra:
            if not opt.startswith("-"):
                raise errors.UsageError(
                    f"extra sbatch argument {opt!r} is not an option",
                    hint="pass options like --constraint=x; script arguments go in args",
                )
            if opt.split("=", 1)[0] in _RESERVED:
                raise errors.UsageError(
                    f"{opt.split('=', 1)[0]} is set by Tenantry and cannot be passed through",
                    hint="Tenantry tags every job's comment with its principal",
                )
            argv.append(opt)
        on_stdin = self._script_on_stdin(spec)
        if not on_stdin:
            argv.append(spec.script)
            argv.extend(spec.args)
        return argv, on_stdin

    @staticmethod
    def _script_on_stdin(spec: JobSpec) -> bool:
        """Send the text seen at submission unless the file on disk is the same.

        With arguments the script must be a file (sbatch passes them to it).
        """
        if spec.args or not spec.script_text:
            return False
        try:
            path = Path(spec.script)
            if not path.is_absolute():
                path = Path(spec.cwd) / path
            return path.read_text() != spec.script_text
        except (OSError, UnicodeDecodeError):
            return True

    async def submit(
        self, spec: JobSpec, principal: Principal, job_id: str, *, intent: str = ""
    ) -> Submitted:
        argv, on_stdin = self.sbatch_argv(spec, principal, job_id, intent)
        env = {**os.environ, **spec.env}
        rc, out, err = await self._run(
            argv, stdin=spec.script_text.encode() if on_stdin else None, env=env
        )
        if rc != 0:
            res = spec.resources
            raise sp.error_from(
                "sbatch",
                err or out,
                rc,
                partition=res.partition or self.settings.slurm_partition,
                time=sp.slurm_minutes(res.time_s) if res.time_s else "",
                account=res.account or self.settings.slurm_account,
                mem=f"{res.mem_mb}M" if res.mem_mb else "",
            )
        backend_id, _cluster = sp.parse_sbatch(out)
        return self._submitted(spec, backend_id)

    def _submitted(self, spec: JobSpec, backend_id: str) -> Submitted:
        name = spec.name or Path(spec.script).name or "tenantry"
        kw = {"job_id": backend_id, "name": name, "user": self._user, "cwd": spec.cwd}
        return Submitted(
            backend_id=backend_id,
            output=sp.expand_path(spec.output or default_output(spec), **kw),
            error=sp.expand_path(spec.error, **kw) if spec.error else "",
        )

    async def find(
        self, spec: JobSpec, principal: Principal, job_id: str, intent: str
    ) -> Submitted | None:
        """The job whose comment tag carries ``intent``: in squeue, else in sacct.

        Raises BackendUnavailable when Slurm cannot answer (the caller must not
        submit again on an unknown answer).
        """
        if not intent:
            return None
        # the user's own jobs only (22.05's --json would list everyone's, and another
        # user can copy a comment it sees into a job of theirs)
        rc, out, err = await self._run(squeue_fields.argv([]), env=squeue_fields.client_env())
        if rc != 0:
            raise sp.error_from("squeue", err or out, rc)
        jobs = squeue_fields.parse(out)
        if not any(_has_intent(j, intent) for j in jobs):
            start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 7 * 86400))
            recorded = await self._sacct(f"--starttime={start}")
            if recorded is not None:
                jobs = recorded
        for job in jobs:
            if _has_intent(job, intent):
                return self._submitted(spec, job.array_job_id or job.job_id)
        return None

    # -- query -------------------------------------------------------------------
    async def query(self, backend_ids: Sequence[str]) -> dict[str, JobUpdate]:
        wanted = [i for i in dict.fromkeys(str(b) for b in backend_ids) if i]
        if not wanted:
            return {}
        env = squeue_fields.client_env()
        rc, out, err = await self._run(squeue_fields.argv(wanted), env=env)
        if rc != 0 and squeue_fields.UNKNOWN_IDS in (err or out).lower():
            out = ""  # none of them is in the queue any more: all are sacct's
        elif rc != 0:
            raise sp.error_from("squeue", err or out, rc)
        found = _select(squeue_fields.parse(out), wanted, source="squeue")
        missing = [i for i in wanted if i not in found]
        if missing:
            found.update(await self._from_sacct(missing))
        return found

    async def _from_sacct(self, ids: Sequence[str]) -> dict[str, JobUpdate]:
        jobs = await self._sacct(f"--jobs={','.join(ids)}")
        if jobs is None:
            return {}  # no slurmdbd: jobs that left squeue are unknown
        return _select(jobs, ids, source="sacct")

    async def _sacct(self, selection: str) -> list[sp.SlurmJob] | None:
        """The accounting records of the jobs ``selection`` names (None: accounting is
        disabled, there is no slurmdbd)."""
        argv = ["sacct", "--parsable2", "--allocations", f"--format={','.join(sp.SACCT_FIELDS)}"]
        argv.append(selection)
        rc, out, err = await self._run(argv)
        if rc != 0:
            if "accounting storage is disabled" in (err + out).lower():
                return None
            raise sp.error_from("sacct", err or out, rc)
        return [sp.sacct_row_job(r) for r in sp.parse_sacct_parsable(out)]

    # -- cancel, info ------------------------------------------------------------
    async def cancel(self, backend_id: str) -> None:
        if not _JOB_ID.match(str(backend_id)):
            raise errors.UsageError(
                f"{backend_id!r} is not a Slurm job id", hint="use ids like 42 or 42_3"
            )
        rc, out, err = await self._run(["scancel", str(backend_id)])
        if rc != 0:
            raise sp.error_from("scancel", err or out, rc, job=str(backend_id))

    async def info(self) -> dict[str, Any]:
        """Nodes and partitions (two controller RPCs), at most ``INFO_TTL_S`` old."""
        now = time.monotonic()
        if self._info is not None and now - self._info[0] < INFO_TTL_S:
            return dict(self._info[1])
        out = await self._read_info()
        self._info = (time.monotonic(), out)
        return dict(out)

    async def _read_info(self) -> dict[str, Any]:
        rc, out, err = await self._run(["sinfo", "--json"])
        if rc != 0:
            raise sp.error_from("sinfo", err or out, rc)
        facts = sp.parse_sinfo_json(out)
        rc, pout, perr = await self._run(["scontrol", "show", "partition", "--oneliner"])
        if rc == 0:
            partitions = sp.parse_partitions(pout) or facts["partitions"]
        elif facts["partitions"]:
            partitions = facts["partitions"]
        else:
            raise sp.error_from("scontrol", perr or pout, rc)
        default = next((p["name"] for p in partitions if p.get("default")), "")
        partitions = [_json_safe_limits(p) for p in partitions]
        return {
            "backend": self.name,
            "slurm_version": facts["version"],
            "partitions": partitions,
            "nodes": facts["nodes"],
            "defaults": {
                "partition": self.settings.slurm_partition or default,
                "account": self.settings.slurm_account,
            },
            "limits_note": "time limits in seconds (max_time_s); null with max_time "
            "UNLIMITED means no limit",
        }


def default_output(spec: JobSpec) -> str:
    """One output file per job; per task for an array (``tenantry logs`` reads each)."""
    return "tenantry-%A_%a.out" if spec.array else "tenantry-%j.out"


def _has_intent(job: sp.SlurmJob, intent: str) -> bool:
    tag = attribution.parse(job.comment)
    return tag is not None and tag.get("req") == intent


def _json_safe_limits(part: dict[str, Any]) -> dict[str, Any]:
    """Seconds as JSON numbers (no Infinity) plus Slurm's own spelling of each limit."""
    out = dict(part)
    for key in ("max_time", "default_time"):
        secs = out.get(f"{key}_s")
        if secs is None:
            out[key] = "NONE" if key == "default_time" else "UNLIMITED"
        elif secs == math.inf:
            out[f"{key}_s"] = None
            out[key] = "UNLIMITED"
        else:
            out[key] = sp.format_duration(secs)
    return out


def _update(job: sp.SlurmJob, backend_id: str, source: str) -> JobUpdate:
    reason = job.reason if job.reason not in {"", "None"} else ""
    return JobUpdate(
        backend_id=backend_id,
        state=job.state,
        exit_code=job.exit_code if job.state.terminal else None,
        started_at=job.start_time,
        ended_at=job.end_time if job.state.terminal else None,
        reason=reason,
        extra={
            "slurm_state": job.raw_state,
            "signal": job.signal,
            "name": job.name,
            "partition": job.partition,
            "nodes": job.nodes,
            "comment": job.comment,
            "source": source,
        },
    )


def _select(
    jobs: Iterable[sp.SlurmJob], wanted: Sequence[str], *, source: str
) -> dict[str, JobUpdate]:
    """The updates for ``wanted`` ids; an array id aggregates its tasks."""
    by_id: dict[str, sp.SlurmJob] = {}
    tasks: dict[str, list[sp.SlurmJob]] = {}
    for job in jobs:
        by_id[job.job_id] = job
        if job.array_job_id:
            tasks.setdefault(job.array_job_id, []).append(job)
    out: dict[str, JobUpdate] = {}
    for want in wanted:
        if want in tasks:
            members = tasks[want]
            state = sp.aggregate_state(j.state for j in members)
            ends = [j.end_time for j in members if j.end_time]
            starts = [j.start_time for j in members if j.start_time]
            codes = [j.exit_code for j in members if j.exit_code is not None]
            base = _update(members[0], want, source)
            out[want] = JobUpdate(
                backend_id=want,
                state=state,
                exit_code=max(codes) if codes and state.terminal else None,
                started_at=min(starts) if starts else None,
                ended_at=max(ends) if ends and state.terminal else None,
                reason=next((u.reason for u in members if u.reason not in {"", "None"}), ""),
                extra={
                    **base.extra,
                    "slurm_state": state.value,
                    "tasks": {j.job_id: j.state.value for j in members},
                },
            )
        elif want in by_id:
            out[want] = _update(by_id[want], want, source)
    return out
