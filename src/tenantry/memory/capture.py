"""Capture: lesson candidates proposed from what the daemon observed.

Two patterns are recognized in the event stream:

- *fail then fix*: a command fails and, in the same session and within a
  window, a variant of it (same program, overlapping arguments, not the
  identical argv) succeeds -> a ``failure-fix`` candidate keyed on the
  failure's error signature, describing what changed;
- *rejected submission*: the scheduler refused a job -> a ``limit``
  candidate keyed on the rejection message (a ``warning`` when the message
  is not about a limit), with an ``sbatch_rejects`` claim when the backend
  is Slurm, so a probe can confirm it still holds.

``Capture.observe`` is synchronous and does no I/O: it returns proposals;
the service stores them (deduplicated) as candidates in the user's scope.
"""

from __future__ import annotations

import re
import shlex
from collections import deque
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from tenantry.core.events import Event, EventType
from tenantry.memory import signature
from tenantry.memory.models import Kind

# Programs that only wrap the real one: compare what follows them.
_WRAPPERS = frozenset(
    {
        "env",
        "bash",
        "sh",
        "srun",
        "mpirun",
        "mpiexec",
        "time",
        "nice",
        "python",
        "python3",
        "uv",
        "conda",
        "mamba",
        "apptainer",
        "singularity",
        "module",
        "ml",
        "tenantry",
    }
)


_VERBS = frozenset({"run", "exec", "--"})

# Rejections that are about a limit (as opposed to a malformed submission).
_LIMITISH = re.compile(
    r"limit|exceed|too many|too large|not available|invalid (?:qos|account|partition|time|gres)"
    r"|qos|account|partition|slots|at most|maximum|quota|allocation",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Proposal:
    kind: Kind
    title: str
    body: str
    error_signature: str
    subject: dict[str, str]
    principal: str  # Principal.key
    evidence: list[str] = field(default_factory=list)
    claim: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class _Failure:
    argv: tuple[str, ...]
    cwd: str
    exit_code: Any
    signature: str
    ts: float
    command_id: str


def program(argv: tuple[str, ...]) -> str:
    """The program an argv really runs (skipping wrappers, their verbs and flags)."""
    prev_short_flag = False
    for tok in argv:
        after_flag, prev_short_flag = prev_short_flag, False
        if tok.startswith("-"):
            prev_short_flag = len(tok) == 2 and tok[1].isalpha()
            continue
        if "=" in tok or tok.isdigit() or after_flag or tok in _VERBS:
            continue
        base = PurePath(tok).name
        if base not in _WRAPPERS:
            return base
    return PurePath(argv[0]).name if argv else ""


def is_variant(failed: tuple[str, ...], ok: tuple[str, ...]) -> bool:
    """Same program, different argv, sharing at least a third of their tokens."""
    if not failed or not ok or failed == ok or program(failed) != program(ok):
        return False
    a, b = set(failed), set(ok)
    return len(a & b) / len(a | b) >= 1 / 3


def _argv(data: dict[str, Any]) -> tuple[str, ...]:
    raw = data.get("argv") or ()
    return tuple(str(x) for x in raw) if isinstance(raw, list | tuple) else ()


class Capture:
    """Per-session memory of recent failures; turns event pairs into proposals."""

    def __init__(
        self, window_s: float = 1800.0, per_session: int = 8, *, slurm: bool = False
    ) -> None:
        self.window_s = window_s
        self.per_session = per_session
        self.slurm = slurm  # rejections come from Slurm: sbatch --test-only can replay them
        self._failures: dict[str, deque[_Failure]] = {}

    def observe(self, event: Event) -> list[Proposal]:
        if event.type is EventType.COMMAND_FINISHED:
            return self._command(event)
        if event.type is EventType.JOB_REJECTED:
            return self._rejected(event)
        return []

    def _command(self, event: Event) -> list[Proposal]:
        argv = _argv(event.data)
        if not argv or not event.principal:
            return []
        recent = self._failures.setdefault(event.principal, deque(maxlen=self.per_session))
        while recent and event.ts - recent[0].ts > self.window_s:
            recent.popleft()
        if event.outcome == "failed":
            tail = (
                str(event.data.get("stderr_tail") or "")
                + "\n"
                + str(event.data.get("stdout_tail") or "")
            )
            sig = signature.primary_signature(tail)
            if sig:
                recent.append(
                    _Failure(
                        argv,
                        str(event.data.get("cwd", "")),
                        event.data.get("exit_code"),
                        sig,
                        event.ts,
                        event.subject,
                    )
                )
            return []
        if event.outcome != "completed":
            return []
        for fail in reversed(recent):
            if is_variant(fail.argv, argv):
                recent.remove(fail)
                return [self._fix(event, fail, argv)]
        return []

    def _fix(self, event: Event, fail: _Failure, ok: tuple[str, ...]) -> Proposal:
        prog = program(ok)
        added = [t for t in ok if t not in fail.argv]
        removed = [t for t in fail.argv if t not in ok]
        change = []
        if added:
            change.append("added " + shlex.join(added))
        if removed:
            change.append("removed " + shlex.join(removed))
        body = (
            f"`{shlex.join(fail.argv)}` failed (exit {fail.exit_code}) with an error matching:\n"
            f"    {fail.signature}\n"
            f"The same session then succeeded with:\n"
            f"    `{shlex.join(ok)}`\n"
            f"Difference: {'; '.join(change) or 'argument order'}."
        )
        return Proposal(
            kind=Kind.FAILURE_FIX,
            title=f"{prog}: fix for '{fail.signature[:90]}'",
            body=body,
            error_signature=fail.signature,
            subject={"tool": prog},
            principal=event.principal,
            evidence=[f"command {fail.command_id} failed", f"command {event.subject} succeeded"],
        )

    def _rejected(self, event: Event) -> list[Proposal]:
        error = str(event.data.get("error") or "")
        if not error or not event.principal:
            return []
        resources = event.data.get("resources") or {}
        if not isinstance(resources, dict):
            resources = {}
        sig = signature.primary_signature(error)
        part = str(resources.get("partition") or "")
        shape = ", ".join(
            f"{k}={v}" for k, v in sorted(resources.items()) if v not in (None, "", 0)
        )
        limit = bool(_LIMITISH.search(error))
        subject = {"tool": "sbatch" if self.slurm else "submit"}
        if part:
            subject["partition"] = part
        where = f"partition {part}" if part else "the default partition"
        advice = (
            "Ask for less (time, nodes, memory, GPUs, CPUs) or pick a partition whose limits fit;"
            " `sinfo -p <partition> -o '%P %l %D'` shows the limits."
            if limit
            else "Fix the submission as the message says before resubmitting."
        )
        body = (
            f"The scheduler refused a submission to {where} asking for"
            f" {shape or 'default resources'}.\n"
            f"Scheduler message: {error.strip()[:400]}\n{advice}"
        )
        claim = {"probe": "sbatch_rejects", "resources": resources} if self.slurm else None
        return [
            Proposal(
                kind=Kind.LIMIT if limit else Kind.WARNING,
                title=f"Submission rejected on {where}: {sig[:90]}",
                body=body,
                error_signature=sig,
                subject=subject,
                principal=event.principal,
                evidence=[f"job.rejected at {event.ts:.0f}"],
                claim=claim,
            )
        ]
