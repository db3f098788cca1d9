"""Verification probes: ask the facility whether a lesson is still true.

A ``Prober`` answers three questions: a partition's limits (``sinfo --json``,
falling back to ``scontrol show partition``), whether Slurm would accept a
submission (``sbatch --test-only``), and whether a module exists (Lmod
``spider``). ``SlurmProber`` runs the real tools (argv lists, a timeout,
never a shell); ``FakeProber`` answers from dicts for fast tests. A probe
that cannot run raises ``ProbeUnavailable``: the lesson is left as it was.
The parsers are pure functions.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from typing import Any, Protocol

from tenantry.core import proc
from tenantry.core.models import FieldsDict
from tenantry.jobs.request import api_argv


class ProbeUnavailable(Exception):
    """The probe's tool is missing, timed out, or answered nonsense."""


@dataclass(frozen=True, slots=True)
class PartitionInfo(FieldsDict):
    name: str
    max_time_s: int | None = None  # None: unlimited
    default_time_s: int | None = None
    max_nodes: int | None = None
    state: str = ""


@dataclass(frozen=True, slots=True)
class SubmitCheck:
    accepted: bool
    message: str


class Prober(Protocol):
    async def partition(self, name: str) -> PartitionInfo | None:
        """The partition's limits, or None when it does not exist."""
        ...

    async def test_submit(self, resources: dict[str, Any], script_text: str) -> SubmitCheck: ...

    async def module_exists(self, name: str) -> bool: ...


# -- pure parsers -----------------------------------------------------------------

_INFINITE = 0xFFFFFFFF


def _minutes(value: Any) -> int | None:
    """A Slurm time in minutes (plain int or the ``{set, infinite, number}`` form), in seconds."""
    n = _number(value)
    return None if n is None else n * 60


def _number(value: Any) -> int | None:
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return None
    n = int(value)
    return None if n >= _INFINITE - 1 or n < 0 else n


def parse_sinfo_json(data: dict[str, Any]) -> dict[str, PartitionInfo]:
    """Partitions from ``sinfo --json`` (both the 22.05 and the 23.x+ layouts)."""
    out: dict[str, PartitionInfo] = {}
    for part in data.get("partitions") or []:  # 21.08-23.02: flat partition records
        name = str(part.get("name", ""))
        if name:
            out[name] = PartitionInfo(
                name=name,
                max_time_s=_minutes(part.get("max_time_limit", part.get("maximum_time"))),
                default_time_s=_minutes(part.get("default_time_limit")),
                max_nodes=_number(part.get("maximum_nodes_per_job", part.get("max_nodes"))),
                state=str(part.get("state", "")),
            )
    for entry in data.get("sinfo") or []:  # 23.11+: one entry per node group
        part = entry.get("partition") or {}
        name = str(part.get("name", ""))
        if not name or name in out:
            continue
        maxi = part.get("maximums") or {}
        defaults = part.get("defaults") or {}
        state = (part.get("partition") or {}).get("state", "")
        out[name] = PartitionInfo(
            name=name,
            max_time_s=_minutes(maxi.get("time")),
            default_time_s=_minutes(defaults.get("time")),
            max_nodes=_number(maxi.get("nodes")),
            state=",".join(state) if isinstance(state, list) else str(state),
        )
    return out


def _slurm_duration(text: str) -> int | None:
    """``[D-]HH:MM:SS`` / ``MM:SS`` / minutes / UNLIMITED -> seconds."""
    text = text.strip()
    if text.upper() in {"UNLIMITED", "INFINITE", "NONE", ""}:
        return None
    days = 0
    if "-" in text:
        d, text = text.split("-", 1)
        days = int(d)
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 1:
        secs = parts[0] * 60
    elif len(parts) == 2:
        secs = parts[0] * 60 + parts[1]
    else:
        secs = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return days * 86400 + secs


def parse_scontrol_partition(text: str) -> PartitionInfo | None:
    """One partition from ``scontrol show partition NAME --oneliner``."""
    fields = dict(re.findall(r"(\w+)=(\S*)", text))
    name = fields.get("PartitionName")
    if not name:
        return None
    nodes = fields.get("MaxNodes", "UNLIMITED")
    return PartitionInfo(
        name=name,
        max_time_s=_slurm_duration(fields.get("MaxTime", "UNLIMITED")),
        default_time_s=_slurm_duration(fields.get("DefaultTime", "NONE")),
        max_nodes=None if not nodes.isdigit() else int(nodes),
        state=fields.get("State", ""),
    )


def sbatch_test_argv(resources: dict[str, Any]) -> list[str]:
    """``sbatch --test-only`` argv for a resource shape (script comes on stdin).

    The options are the ones a submission of that shape sends (the job request
    model's translation), so a probe tests exactly what Tenantry would submit.
    """
    shape = {k: v for k, v in resources.items() if k != "nodes" and (k != "time_s" or v)}
    argv = ["sbatch", "--test-only", *api_argv({"resources": shape})]
    if resources.get("nodes"):
        argv.append(f"--nodes={int(resources['nodes'])}")
    return argv


# -- the real thing ---------------------------------------------------------------


class SlurmProber:
    """Probes that run the facility's own tools."""

    def __init__(self, timeout_s: float = 15.0, env: dict[str, str] | None = None) -> None:
        self.timeout_s = timeout_s
        self.env = dict(os.environ if env is None else env)

    async def _run(self, argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
        exe = shutil.which(argv[0], path=self.env.get("PATH"))
        if exe is None:
            raise ProbeUnavailable(f"{argv[0]} is not installed here")
        try:
            rc, out, err = await proc.run(
                exe, argv[1:], timeout_s=self.timeout_s, stdin=stdin, env=self.env
            )
        except TimeoutError as exc:  # an OSError too: first
            raise ProbeUnavailable(f"{argv[0]} timed out after {self.timeout_s:g} s") from exc
        except OSError as exc:
            raise ProbeUnavailable(f"cannot run {argv[0]}: {exc}") from exc
        return rc, out.decode(errors="replace"), err.decode(errors="replace")

    async def partition(self, name: str) -> PartitionInfo | None:
        rc, out, err = await self._run(["sinfo", "--json"])
        if rc == 0:
            try:
                parts = parse_sinfo_json(json.loads(out))
            except (ValueError, TypeError, AttributeError):
                parts = {}
            if parts:
                return parts.get(name)
        rc, out, err = await self._run(["scontrol", "show", "partition", name, "--oneliner"])
        if rc != 0:
            if "not found" in (err + out).lower() or "invalid partition" in (err + out).lower():
                return None
            raise ProbeUnavailable(f"scontrol failed: {err.strip()[:200]}")
        return parse_scontrol_partition(out)

    async def test_submit(self, resources: dict[str, Any], script_text: str) -> SubmitCheck:
        script = script_text or "#!/bin/sh\ntrue\n"
        rc, out, err = await self._run(sbatch_test_argv(resources), stdin=script.encode())
        text = (err.strip() or out.strip())[:500]
        if rc != 0 and "unable to contact" in text.lower():
            raise ProbeUnavailable(f"Slurm is not answering: {text}")
        return SubmitCheck(accepted=rc == 0, message=text)

    async def module_exists(self, name: str) -> bool:
        lmod = self.env.get("LMOD_CMD") or shutil.which("lmod", path=self.env.get("PATH"))
        if not lmod:
            raise ProbeUnavailable("Lmod is not available here")
        rc, out, err = await self._run([lmod, "bash", "--terse", "spider", name])
        text = out + err
        if "unable to find" in text.lower():
            return False
        base = name.split("/", 1)[0]
        return rc == 0 and any(line.strip().startswith(base) for line in text.splitlines())


@dataclass
class FakeProber:
    """Answers from dicts; anything unknown is 'unavailable'. For tests."""

    partitions: dict[str, PartitionInfo] = field(default_factory=dict)
    modules: set[str] | None = None
    accept: Any = None  # callable(resources) -> SubmitCheck, or None
    calls: list[str] = field(default_factory=list)

    async def partition(self, name: str) -> PartitionInfo | None:
        self.calls.append(f"partition {name}")
        return self.partitions.get(name)

    async def test_submit(self, resources: dict[str, Any], script_text: str) -> SubmitCheck:
        self.calls.append("test_submit")
        if self.accept is None:
            raise ProbeUnavailable("no scheduler in this fake")
        result: SubmitCheck = self.accept(resources)
        return result

    async def module_exists(self, name: str) -> bool:
        self.calls.append(f"module {name}")
        if self.modules is None:
            raise ProbeUnavailable("no Lmod in this fake")
        return name in self.modules
