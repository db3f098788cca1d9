"""Checking a lesson's claim with a probe.

A lesson may carry a *claim*: a small structured statement a probe can
check. Four shapes are understood:

- ``{"probe": "partition_limit", "partition": "gpu", "max_time_s": 86400,
  "max_nodes": 4}`` — the partition exists and has these limits (fields
  left out are not checked);
- ``{"probe": "sbatch_rejects", "resources": {...}}`` — Slurm still refuses
  this shape (``sbatch --test-only``); ``sbatch_accepts`` is the opposite;
- ``{"probe": "module_exists", "module": "gcc/12.2.0", "exists": true}``.

``check`` returns pass, fail or inconclusive (the probe could not run) with
what it saw; the service turns that into lifecycle transitions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.memory.models import Lesson
from tenantry.memory.probes import Prober, ProbeUnavailable

PROBES = ("partition_limit", "sbatch_rejects", "sbatch_accepts", "module_exists")


@dataclass(frozen=True, slots=True)
class Outcome:
    result: str  # pass | fail | inconclusive
    detail: str
    observed: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"result": self.result, "detail": self.detail, "observed": self.observed}


def check_claim(claim: Any) -> dict[str, Any] | None:
    """Validate a claim's shape at write time."""
    if claim is None:
        return None
    if not isinstance(claim, dict) or claim.get("probe") not in PROBES:
        raise UsageError(
            "claim must be an object with probe one of " + ", ".join(PROBES),
            hint='e.g. {"probe": "partition_limit", "partition": "gpu", "max_time_s": 86400}',
        )
    probe = claim["probe"]
    if probe == "partition_limit" and not claim.get("partition"):
        raise UsageError("a partition_limit claim needs 'partition'")
    if probe == "module_exists" and not claim.get("module"):
        raise UsageError("a module_exists claim needs 'module'")
    if probe.startswith("sbatch_") and not isinstance(claim.get("resources"), dict):
        raise UsageError(f"a {probe} claim needs 'resources' (an object)")
    return dict(claim)


_SUBMIT_TOOLS = frozenset({"sbatch", "slurm", "submit", "salloc", "srun"})


def unbound(claim: dict[str, Any], les: Lesson) -> str:
    """Why ``claim`` cannot vouch for ``les`` ('' when it can).

    A probe checks one small fact; it vouches for a lesson only when that fact
    is what the lesson is about: the claim's partition or module is the
    lesson's subject, a submission claim belongs to a lesson about submitting.
    A sensitive lesson (it downloads, touches credentials or privileges; see
    ``content``) tells the reader to do something no probe checks, so no
    probe verifies it: only staff approval does.
    """
    if les.sensitive:
        return (
            f"the lesson is {'/'.join(les.classes)} content: no probe checks its fix,"
            " only staff approval does"
        )
    probe = claim.get("probe")
    subject = {k: v.lower() for k, v in les.subject.items()}
    if probe == "partition_limit":
        name = str(claim.get("partition", "")).lower()
        if subject.get("partition") != name:
            return f"the claim is about partition {name}, the lesson's subject is not"
    elif probe == "module_exists":
        name = str(claim.get("module", "")).lower()
        if subject.get("module") != name:
            return f"the claim is about module {name}, the lesson's subject is not"
    elif probe in ("sbatch_rejects", "sbatch_accepts"):
        res = claim.get("resources") or {}
        part = str(res.get("partition") or "").lower() if isinstance(res, dict) else ""
        if not (
            (part and subject.get("partition") == part) or subject.get("tool") in _SUBMIT_TOOLS
        ):
            return "the claim is about a submission, the lesson is not"
    return ""


async def check(claim: dict[str, Any], prober: Prober) -> Outcome:
    probe = claim.get("probe")
    try:
        if probe == "partition_limit":
            return await _partition(claim, prober)
        if probe in ("sbatch_rejects", "sbatch_accepts"):
            res = await prober.test_submit(dict(claim["resources"]), str(claim.get("script", "")))
            want_accept = probe == "sbatch_accepts"
            seen = {"accepted": res.accepted, "message": res.message}
            if res.accepted == want_accept:
                return Outcome("pass", f"sbatch --test-only: {res.message}", seen)
            verb = "accepts" if res.accepted else "rejects"
            return Outcome("fail", f"Slurm now {verb} this submission: {res.message}", seen)
        if probe == "module_exists":
            exists = await prober.module_exists(str(claim["module"]))
            want = bool(claim.get("exists", True))
            seen = {"exists": exists}
            if exists == want:
                return Outcome("pass", f"module {claim['module']} exists={exists}", seen)
            return Outcome(
                "fail", f"module {claim['module']} exists={exists}, expected {want}", seen
            )
    except ProbeUnavailable as exc:
        return Outcome("inconclusive", str(exc))
    return Outcome("inconclusive", f"unknown probe {probe!r}")


async def _partition(claim: dict[str, Any], prober: Prober) -> Outcome:
    name = str(claim["partition"])
    info = await prober.partition(name)
    if info is None:
        return Outcome("fail", f"partition {name} does not exist any more", {"exists": False})
    seen = info.to_dict()
    diffs = []
    for key in ("max_time_s", "max_nodes", "default_time_s"):
        if key in claim and claim[key] != seen[key]:
            diffs.append(f"{key} is {seen[key]}, lesson says {claim[key]}")
    if diffs:
        return Outcome("fail", f"partition {name}: " + "; ".join(diffs), seen)
    return Outcome("pass", f"partition {name} matches", seen)
