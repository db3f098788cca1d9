"""The Cedar engine: policies parsed once, one decision per normalized request.

The effective policy is the shipped baseline, then the facility file, then
the user's file. The facility may replace the baseline by starting its file
with the line ``// tenantry: no-baseline``. The user's file may only narrow:
it is refused unless every policy in it is a ``forbid``. Every file is
validated against :mod:`tenantry.safety.policy.schema` when loaded, so a typo is an
error at start, not a silent non-match at 3 a.m.

A decision names the rule that decided (its ``@id``) and carries the rule's
``@message`` with ``{placeholders}`` filled from the request. Anything that
goes wrong while deciding (a policy that errors, a bad request) denies.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tenantry.core.errors import PolicyInvalid
from tenantry.safety.policy.schema import ACTIONS

NO_BASELINE = "// tenantry: no-baseline"

DEFAULT_DENY: dict[str, str] = {
    "cancel_job": "{what} was not submitted by this agent session ({owner_text}); agents may "
    "cancel only their own session's jobs unless the facility policy allows more",
    "modify_job": "{what} was not submitted by this agent session ({owner_text}); "
    "agents may change only their own session's jobs",
    "read_job_output": "{what} is not this user's ({owner_text})",
    "admin": "{name} is an administrative operation; agents may not run it",
    "unknown": "no policy rule permits agents to use {action}; the facility policy must "
    "name this action to allow it",
}


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    message: str
    source: str  # baseline | facility | user
    effect: str


@dataclass(frozen=True, slots=True)
class Request:
    """One question for Cedar: may ``principal`` do ``action`` on this resource?"""

    action: str
    rtype: str
    rid: str
    attrs: dict[str, Any]
    context: dict[str, Any]
    extras: dict[str, Any] = field(default_factory=dict)  # message placeholders only
    label: str = ""


@dataclass(frozen=True, slots=True)
class _Raw:
    """What Cedar said about one request, before messages are filled in."""

    allowed: bool
    reasons: tuple[str, ...]
    errors: tuple[str, ...]


CACHE_SIZE = 8192  # decisions are pure in (principal, action, resource, context)


@dataclass(frozen=True, slots=True)
class Outcome:
    allowed: bool
    rule: str
    message: str
    source: str
    errors: tuple[str, ...] = ()


def baseline_text() -> str:
    return (resources.files("tenantry.safety.policy") / "baseline.cedar").read_text()


def _check(text: str, where: str, schema: str) -> Any:
    import cedarpy

    try:
        pst = cedarpy.policies_to_pst(text)
    except ValueError as exc:
        raise PolicyInvalid(
            f"cannot parse policy {where}: {exc}", hint="fix the Cedar syntax"
        ) from exc
    result = cedarpy.validate_policies(text, schema)
    if not result.validation_passed:
        first = "; ".join(str(e) for e in result.errors[:3])
        raise PolicyInvalid(
            f"policy {where} does not match Tenantry's schema: {first}",
            hint="see docs/policy.md for entity types, attributes and actions",
        )
    return pst


class Engine:
    """Parsed policies plus the rule table; ``decide`` is the hot path."""

    def __init__(
        self,
        baseline: str | None = None,
        facility: tuple[str, str] | None = None,
        user: tuple[str, str] | None = None,
    ) -> None:
        import cedarpy

        from tenantry.safety.policy.schema import schema_text

        schema = schema_text()
        parts: list[tuple[str, str]] = []
        base = baseline if baseline is not None else baseline_text()
        if not (facility and facility[1].lstrip().startswith(NO_BASELINE)):
            parts.append(("baseline", base))
        if facility and facility[1].strip():
            parts.append(("facility", facility[1]))
        if user and user[1].strip():
            pst = _check(user[1], user[0], schema)
            permits = [
                p.annotations.get("id", pid)
                for pid, p in pst.static_policies.items()
                if p.effect != "forbid"
            ]
            if permits or pst.templates:
                raise PolicyInvalid(
                    f"user policy {user[0]} may only add forbid rules; found {permits}",
                    hint="a user policy narrows the facility's; permits belong to the facility",
                )
            parts.append(("user", user[1]))
        self.rules: dict[str, Rule] = {}
        self.ask_rules: set[str] = set()  # forbids marked @ask: held for a human's approval
        self.sources: list[str] = []
        text = ""
        offset = 0
        for source, body in parts:
            where = {"baseline": "baseline.cedar", "facility": facility[0] if facility else ""}
            pst = _check(body, where.get(source, user[0] if user else source), schema)
            ids = list(pst.static_policies)
            for i, pid in enumerate(ids):
                pol = pst.static_policies[pid]
                rid = pol.annotations.get("id") or f"{source}:{pid}"
                if pol.effect == "forbid" and pol.annotations.get("ask") == "true":
                    self.ask_rules.add(rid)
                self.rules[f"policy{offset + i}"] = Rule(
                    rid, pol.annotations.get("message", ""), source, pol.effect
                )
            offset += len(ids)
            text += body + "\n"
            self.sources.append(source)
        self.policies = cedarpy.PolicySet.from_str(text)
        self._cache: dict[str, _Raw] = {}
        # resource attributes some policy reads; the rest is not sent to Cedar
        # (a policy can only read what it names, so pruning cannot change a decision)
        full = self.policies.to_pst()
        self.used_attrs = frozenset(re.findall(r"attr='(\w+)'", repr(full)))
        # one policy set per action with only the policies whose scope can match it:
        # same decisions (a policy whose action scope excludes the request never
        # applies), a third of the evaluation work; policy ids are kept
        self.by_action = {action: _subset(full, action) for action in ACTIONS}
        if len(self.rules) != offset or len(self.policies) != offset:
            raise PolicyInvalid("policy ids did not line up after parsing; refusing to run")

    @classmethod
    def from_files(cls, facility_path: str | None, user_path: str | None) -> Engine:
        def read(p: str | None) -> tuple[str, str] | None:
            if not p:
                return None
            path = Path(p)
            if not path.exists():
                return None
            try:
                return (str(path), path.read_text())
            except OSError as exc:
                raise PolicyInvalid(f"cannot read policy {path}: {exc}") from exc

        return cls(facility=read(facility_path), user=read(user_path))

    def decide(
        self, principal: dict[str, Any], entities: list[dict[str, Any]], req: Request
    ) -> Outcome:
        return self.decide_all(principal, json.dumps(entities)[1:-1], [req])[0]

    def decide_all(
        self, principal: dict[str, Any], entities_json: str, reqs: list[Request]
    ) -> list[Outcome]:
        """Decide several requests of one principal in one Cedar call.

        ``entities_json`` is the principal's entities as JSON list *items*
        (no brackets), serialized once per principal by the caller.
        """
        import cedarpy

        if not reqs:
            return []
        raw: list[_Raw | None] = []
        keys: list[str] = []
        # action -> [(index, resource entity JSON)] of the requests Cedar must answer
        misses: dict[str, list[tuple[int, str]]] = {}
        used = self.used_attrs
        for i, r in enumerate(reqs):
            attrs = json.dumps({k: v for k, v in r.attrs.items() if k in used}, sort_keys=True)
            ctx = json.dumps(r.context, sort_keys=True)
            key = f"{entities_json}\x00{r.action}\x00{r.rtype}\x00{attrs}\x00{ctx}"
            keys.append(key)
            hit = self._cache.get(key)
            raw.append(hit)
            if hit is None:
                ent = (
                    f'{{"uid":{{"type":"{r.rtype}","id":"{r.rid}"}},"attrs":{attrs},"parents":[]}}'
                )
                misses.setdefault(r.action, []).append((i, ent))
        if len(self._cache) > CACHE_SIZE:
            self._cache.clear()
        for action, group in misses.items():
            requests = [
                {
                    "principal": principal,
                    "action": {"type": "Action", "id": action},
                    "resource": {"type": reqs[i].rtype, "id": reqs[i].rid},
                    "context": reqs[i].context,
                }
                for i, _ in group
            ]
            entities = f"[{entities_json},{','.join(ent for _, ent in group)}]"
            try:
                policies = self.by_action.get(action, self.policies)
                results = cedarpy.is_authorized_batch(requests, policies, entities)
                if len(results) != len(group):
                    raise RuntimeError("engine returned a short batch")
            except Exception as exc:  # any engine failure denies
                fail = Outcome(
                    False, "evaluation-error", f"policy evaluation failed: {exc}", "tenantry"
                )
                return [fail for _ in reqs]
            for (i, _), result in zip(group, results, strict=True):
                diag = result.diagnostics
                reasons = sorted(diag.reasons, key=lambda r: int(r[6:]) if r[6:].isdigit() else 0)
                entry = _Raw(result.allowed, tuple(reasons), tuple(diag.errors))
                raw[i] = entry
                if not entry.errors:
                    self._cache[keys[i]] = entry
        return [self._outcome(e, req) for e, req in zip(raw, reqs, strict=True)]

    def _outcome(self, raw: _Raw | None, req: Request) -> Outcome:
        if raw is None:
            return Outcome(False, "evaluation-error", "no engine result", "tenantry")
        if raw.errors:
            return Outcome(
                False,
                "evaluation-error",
                "policy evaluation failed, so the action is denied (fail closed): "
                + "; ".join(raw.errors[:2]),
                "tenantry",
                raw.errors,
            )
        reasons = raw.reasons
        if raw.allowed:
            rule = self.rules.get(reasons[0]) if reasons else None
            if rule is None:
                return Outcome(False, "evaluation-error", "allow without a rule", "tenantry")
            return Outcome(True, rule.id, fill(rule.message, req), rule.source)
        if reasons:
            rule = self.rules[reasons[0]]
            return Outcome(False, rule.id, fill(rule.message, req), rule.source)
        fallback = (
            "no policy rule permits {action} here"
            if req.action in ACTIONS
            else (DEFAULT_DENY["unknown"])
        )
        default = DEFAULT_DENY.get(req.action, fallback)
        return Outcome(False, "default-deny", fill(default, req), "tenantry")


def _subset(full: Any, action: str) -> Any:
    import cedarpy
    from cedarpy import pst

    def applies(t: Any) -> bool:
        a = t.action
        if isinstance(a, pst.ActionEq):
            return bool(a.entity.id == action)
        if isinstance(a, pst.ActionIn):
            return any(e.id == action for e in a.entities)
        return True  # any action, or a scope form this code does not know

    keep = {pid: t for pid, t in full.static_policies.items() if applies(t)}
    return cedarpy.PolicySet.from_pst(
        pst.PolicySet(templates={}, static_policies=keep, template_links=())
    )


_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def fill(template: str, req: Request) -> str:
    values: dict[str, Any] = {"action": req.action}
    values.update(req.attrs)
    values.update(req.context)
    values.update(req.extras)

    def one(m: re.Match[str]) -> str:
        v = values.get(m.group(1))
        if v is None:
            return m.group(0)
        if isinstance(v, list | set | tuple):
            return ", ".join(str(x) for x in v) or "(none)"
        return str(v)

    return _PLACEHOLDER.sub(one, template)
