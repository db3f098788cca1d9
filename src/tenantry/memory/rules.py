"""Who may do what with a lesson, and how a write becomes a lesson. Pure functions.

- ``is_staff``: a *human* principal whose user is listed in ``memory_staff``;
- ``can_see``: what ``show``/``list`` reveal (recall applies the same rule in
  SQL, see ``retrieval.visibility``); writers see their own, staff see all;
- ``may_change``: the writer's user or staff; only staff touch facility lessons;
- ``build``: scope, trust and scan of a new lesson (a non-staff request for
  facility scope becomes a candidate proposed for it).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Required, TypedDict

from tenantry.core.errors import UsageError
from tenantry.core.models import AgentProduct, Principal
from tenantry.memory import content, scanner, signature, terms
from tenantry.memory.models import DEFAULT_TTL_DAYS, Kind, Lesson, Scope, Source, Status, Trust
from tenantry.memory.store import new_id


def is_staff(principal: Principal, staff: Collection[str]) -> bool:
    """The one place memory decides who is staff (every check goes through it)."""
    return principal.agent is AgentProduct.HUMAN and principal.user in staff


FIX_AGREEMENT = 0.5


def fix_terms(les: Lesson) -> set[str]:
    """The terms of a lesson's fix: its body without the words of its error line."""
    sig = set(terms.terms(les.error_signature))
    return {t for t in terms.terms(les.body) if t not in sig}


def same_fix(a: Lesson, b: Lesson) -> bool:
    """Two lessons on one error agree on what fixes it (not only on the error line)."""
    if a.kind is not b.kind or a.sig_hash != b.sig_hash:
        return False
    fa, fb = fix_terms(a), fix_terms(b)
    if not fa or not fb:
        return False
    return len(fa & fb) / len(fa | fb) >= FIX_AGREEMENT


def may_change(principal: Principal, les: Lesson, *, staff: bool) -> bool:
    if staff:
        return True
    return les.scope is not Scope.FACILITY and les.owner_user == principal.user


def can_see(principal: Principal, les: Lesson, *, staff: bool) -> bool:
    if staff or les.owner_key == principal.key:
        return True
    if not les.shareable or les.trust is Trust.UNTRUSTED:
        return False
    if les.scope is Scope.FACILITY:
        return True
    if les.scope is Scope.PROJECT:
        return bool(principal.project) and les.owner_project == principal.project
    if les.scope is Scope.USER:
        return les.owner_user == principal.user
    return les.owner_key == principal.key


class LessonFields(TypedDict, total=False):
    """What a writer says of a new lesson: ``build``'s keywords, forwarded as they are."""

    title: Required[str]
    body: Required[str]
    kind: Kind
    scope: Scope
    subject: dict[str, str] | None
    error_signature: str
    evidence: list[str] | None
    derived_from: list[Source] | None
    claim: dict[str, Any] | None
    ttl_days: float | None
    status: Status


def build(
    principal: Principal,
    *,
    staff: bool,
    title: str,
    body: str,
    kind: Kind = Kind.FACT,
    scope: Scope = Scope.USER,
    subject: dict[str, str] | None = None,
    error_signature: str = "",
    evidence: list[str] | None = None,
    derived_from: list[Source] | None = None,
    claim: dict[str, Any] | None = None,
    ttl_days: float | None = None,
    status: Status = Status.ACTIVE,
) -> Lesson:
    """A new lesson as this principal may write it (scope, trust, scan decided here)."""
    if not title.strip() or not body.strip():
        raise UsageError("a lesson needs a title and a body")
    proposed = ""
    if scope is Scope.FACILITY and not staff:
        proposed = Scope.FACILITY.value
        scope = Scope.PROJECT if principal.project else Scope.USER
        status = Status.CANDIDATE
    if scope is Scope.PROJECT and not principal.project:
        raise UsageError(
            "project scope needs a project",
            hint="set TENANTRY_PROJECT or SLURM_ACCOUNT, or use user scope",
        )
    own = Source.STAFF if staff else (Source.AGENT if principal.is_agent else Source.HUMAN)
    sources = [own, *(derived_from or [])]
    trust = Trust.lowest(*(s.ceiling for s in sources))
    sig = signature.normalize(error_signature) if error_signature else ""
    findings = scanner.scan(title, body, " ".join((subject or {}).values()), *(evidence or []))
    blocking = scanner.quarantining(findings, staff_written=trust is Trust.STAFF_APPROVED)
    if blocking:
        trust = Trust.UNTRUSTED
    classes = content.classes(title, body, " ".join((subject or {}).values()))
    return Lesson(
        id=new_id(),
        kind=kind,
        scope=scope,
        title=title.strip()[:300],
        body=body.strip()[:8000],
        owner_user=principal.user,
        owner_key=principal.key,
        owner_project=principal.project,
        owner_agent=principal.agent.value,
        subject=dict(subject or {}),
        error_signature=sig,
        sig_hash=signature.signature_hash(sig),
        evidence=list(evidence or []),
        sources=sources,
        claim=claim,
        trust=trust,
        status=status,
        quarantined=bool(blocking),
        findings=findings,
        classes=classes,
        proposed_scope=proposed,
        ttl_days=ttl_days if ttl_days is not None else DEFAULT_TTL_DAYS[kind],
    )
