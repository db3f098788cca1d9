"""Import and export records: a lesson as one JSON object, all of it. Pure functions.

``record`` writes everything a lesson is: content, provenance (writer,
project, agent, sources, evidence), trust, status, verification and creation
times, supersession links and the claim. ``lesson_from`` reads one back.

Who may import what is decided here too: staff import records as they are
(that is how a facility seeds and moves its memory); anyone else imports
into their own user or project scope, as the writer, with the trust an
imported file carries (untrusted) and status candidate — a record cannot
grant itself trust, scope or verification by saying so. The scanner and the
content classes are always recomputed from the text.
"""

from __future__ import annotations

from typing import Any

from tenantry.core.errors import UsageError
from tenantry.core.models import Principal
from tenantry.memory import content, scanner, signature
from tenantry.memory.models import (
    DEFAULT_TTL_DAYS,
    Kind,
    Lesson,
    Scope,
    Source,
    Status,
    Trust,
    check_subject,
    parse_enum,
)

VERSION = 1


def record(les: Lesson) -> dict[str, Any]:
    return {
        "tenantry_lesson": VERSION,
        "id": les.id,
        "kind": les.kind.value,
        "scope": les.scope.value,
        "title": les.title,
        "body": les.body,
        "subject": dict(les.subject),
        "error_signature": les.error_signature,
        "evidence": list(les.evidence),
        "claim": les.claim,
        "trust": les.trust.value,
        "status": les.status.value,
        "supersedes": les.supersedes,
        "superseded_by": les.superseded_by,
        "proposed_scope": les.proposed_scope,
        "ttl_days": les.ttl_days,
        "verified_at": les.verified_at,
        "created_at": les.created_at,
        "updated_at": les.updated_at,
        "owner": {
            "key": les.owner_key,
            "user": les.owner_user,
            "project": les.owner_project,
            "agent": les.owner_agent,
        },
        "sources": [s.value for s in les.sources],
    }


def _time(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{name} must be a number of seconds since the epoch")
    return float(value)


def lesson_from(
    rec: dict[str, Any],
    importer: Principal,
    *,
    staff: bool,
    subject_keys: frozenset[str],
) -> Lesson:
    """The lesson a record becomes when ``importer`` imports it."""
    if not isinstance(rec, dict) or rec.get("tenantry_lesson") != VERSION:
        raise UsageError("not a lesson record", hint="records come from `tenantry memory export`")
    title, body = str(rec.get("title") or "").strip(), str(rec.get("body") or "").strip()
    if not title or not body or not rec.get("id"):
        raise UsageError("a lesson record needs an id, a title and a body")
    kind = parse_enum(Kind, rec.get("kind", "fact"), "kind")
    subject = check_subject(rec.get("subject"), subject_keys)
    sig = signature.normalize(str(rec.get("error_signature") or ""))
    raw_owner = rec.get("owner")
    owner: dict[str, Any] = raw_owner if isinstance(raw_owner, dict) else {}
    now_created = _time(rec.get("created_at"), "created_at")
    les = Lesson(
        id=str(rec["id"])[:64],
        kind=kind,
        scope=parse_enum(Scope, rec.get("scope", "user"), "scope"),
        title=title[:300],
        body=body[:8000],
        owner_user=str(owner.get("user") or importer.user),
        owner_key=str(owner.get("key") or importer.key),
        owner_project=str(owner.get("project") or ""),
        owner_agent=str(owner.get("agent") or "human"),
        subject=subject,
        error_signature=sig,
        sig_hash=signature.signature_hash(sig),
        evidence=[str(e) for e in rec.get("evidence") or []],
        sources=[parse_enum(Source, s, "sources") for s in rec.get("sources") or ["import"]],
        claim=rec.get("claim") if isinstance(rec.get("claim"), dict) else None,
        trust=parse_enum(Trust, rec.get("trust", "untrusted"), "trust"),
        status=parse_enum(Status, rec.get("status", "active"), "status"),
        supersedes=str(rec.get("supersedes") or ""),
        superseded_by=str(rec.get("superseded_by") or ""),
        proposed_scope=str(rec.get("proposed_scope") or ""),
        ttl_days=float(rec.get("ttl_days") or DEFAULT_TTL_DAYS[kind]),
        verified_at=_time(rec.get("verified_at"), "verified_at"),
    )
    if now_created is not None:
        les.created_at = now_created
    if not staff:
        # a record vouches for nothing: it lands as the importer's own candidate
        les.owner_user, les.owner_key = importer.user, importer.key
        les.owner_project, les.owner_agent = importer.project, importer.agent.value
        les.scope = Scope.PROJECT if importer.project else Scope.USER
        les.trust, les.status = Trust.UNTRUSTED, Status.CANDIDATE
        les.sources = [Source.IMPORT]
        les.verified_at, les.superseded_by, les.supersedes = None, "", ""
        les.evidence.append(f"imported by {importer.key} from {rec['id']}")
    les.findings = scanner.scan(title, body, " ".join(subject.values()), *les.evidence)
    les.classes = content.classes(title, body, " ".join(subject.values()))
    staff_written = (
        staff and Trust.lowest(*(s.ceiling for s in les.sources)) is Trust.STAFF_APPROVED
    )
    if scanner.quarantining(les.findings, staff_written):
        les.quarantined, les.trust = True, Trust.UNTRUSTED
    return les
