"""Approvals: an agent's action that a rule marks ``@ask`` is held until a human decides.

A rule with the annotation ``@ask("true")`` does not simply deny an agent:
the action is held as a *pending approval* (an id the agent is told, and can
wait on) and runs once the human approves it with ``tenantry approve ID``
from outside the agent. An approval has a scope -- ``once`` (this exact
request), ``session`` (this agent session, this rule), ``project`` (every
session of the user in this project, this rule) or ``always`` (every session
of the user, this rule) -- and an expiry. Sessions never approve (the op is
refused for agent principals). Every grant and refusal is an audit event.

The store is one JSON file in the state directory, owned by the daemon (one
process); :class:`Approvals` is pure apart from ``load``/``save``.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from tenantry.core.errors import NotFound, UsageError

SCOPES = ("once", "session", "project", "always")
PENDING_TTL_S = 24 * 3600.0


@dataclass(slots=True)
class Approval:
    id: str
    principal: str  # user/agent/session
    user: str
    project: str
    action: str
    rule: str
    digest: str  # what exactly was asked (sha256 of the request)
    label: str
    created: float
    status: str = "pending"  # pending | approved | refused | used | expired
    scope: str = ""
    expires: float = 0.0
    decided_by: str = ""


class Approvals:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self.items: dict[str, Approval] = {}

    # --- persistence ------------------------------------------------------------

    def load(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            rows = json.loads(self.path.read_text())
            self.items = {r["id"]: Approval(**r) for r in rows}
        except (OSError, ValueError, TypeError, KeyError):
            self.items = {}  # an unreadable store grants nothing (fail closed)

    def save(self) -> None:
        if self.path is None:
            return
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps([asdict(a) for a in self.items.values()]))
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)

    # --- the gate's side ----------------------------------------------------------

    def granted(
        self, principal: str, project: str, action: str, rule: str, digest: str, now: float
    ) -> Approval | None:
        """A live grant covering this request (a ``once`` grant is used up here)."""
        user = principal.split("/", 1)[0]
        for a in self.items.values():
            if a.status != "approved" or a.rule != rule or a.action != action:
                continue
            if a.expires and a.expires < now:
                a.status = "expired"
                continue
            hit = (
                (a.scope == "once" and a.principal == principal and a.digest == digest)
                or (a.scope == "session" and a.principal == principal)
                or (a.scope == "project" and a.user == user and a.project == project)
                or (a.scope == "always" and a.user == user)
            )
            if hit:
                if a.scope == "once":
                    a.status = "used"
                self.save()
                return a
        return None

    def hold(
        self, principal: str, project: str, action: str, rule: str, digest: str, label: str,
        now: float,
    ) -> Approval:  # fmt: skip
        """The pending approval for this request (the same one if asked again)."""
        for a in self.items.values():
            if a.status == "pending" and a.principal == principal and a.digest == digest:
                return a
        a = Approval(
            id="ap-" + secrets.token_hex(4),
            principal=principal,
            user=principal.split("/", 1)[0],
            project=project,
            action=action,
            rule=rule,
            digest=digest,
            label=label[:200],
            created=now,
        )
        self.items[a.id] = a
        self._prune(now)
        self.save()
        return a

    # --- the human's side -----------------------------------------------------------

    def decide(
        self, ref: str, *, user: str, approve: bool, scope: str, for_s: float, now: float
    ) -> Approval:
        a = self.items.get(ref)
        if a is None or a.user != user:
            raise NotFound(f"no approval {ref!r}", hint="list them with `tenantry approvals`")
        if a.status != "pending":
            raise UsageError(f"approval {ref} is already {a.status}")
        if scope not in SCOPES:
            raise UsageError(f"unknown scope {scope!r}", hint=f"one of {', '.join(SCOPES)}")
        if for_s <= 0:
            raise UsageError("--for must be a positive duration")
        a.status = "approved" if approve else "refused"
        a.scope = scope if approve else ""
        a.expires = now + for_s
        a.decided_by = user
        self.save()
        return a

    def listing(self, user: str, now: float) -> list[Approval]:
        self._prune(now)
        return sorted((a for a in self.items.values() if a.user == user), key=lambda a: a.created)

    def _prune(self, now: float) -> None:
        for a in self.items.values():
            if a.status == "pending" and now - a.created > PENDING_TTL_S:
                a.status = "expired"


def now() -> float:
    return time.time()
