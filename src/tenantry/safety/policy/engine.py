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
_Key = tuple[str, str, str, str, str]  # principal entities, action, resource type, attrs, context
BASES_SIZE = 4096  # parsed principal entities, like the judge's principals


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one request got; ``message`` is filled from the request when first read.

    A decision shows the message of one request only (its first denial, else
    its first allow), so the others are never filled.
    """

    allowed: bool
    rule: str
    template: str  # the rule's ``@message``, or the whole message when ``request`` is None
    source: str
    errors: tuple[str, ...] = ()
    request: Request | None = field(default=None, compare=False, repr=False)

    @property
    def message(self) -> str:
        return self.template if self.request is None else fill(self.template, self.request)


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
        self._cache: dict[_Key, _Raw] = {}
        full = self.policies.to_pst()
        # one policy set per action with only the policies whose scope can match it:
        # same decisions (a policy whose action scope excludes the request never
        # applies), a third of the evaluation work; policy ids are kept
        self.by_action = {action: _subset(full, action) for action in ACTIONS}
        self._bases: dict[str, Any] = {}  # principal entities JSON -> parsed handle
        # the resource attributes and context keys some policy that can apply to
        # the action names; the rest is not sent to Cedar (a policy reads only
        # what it names, so pruning cannot change a decision). A policy that uses
        # ``context`` as a whole gets all of it.
        self._everything = _sent(full)
        self.used_attrs = self._everything[0]
        self._sent = {action: _sent(self.by_action[action].to_pst()) for action in ACTIONS}
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

    def clear_cache(self) -> None:
        """Forget every cached Cedar outcome (the next requests are evaluated again)."""
        self._cache.clear()

    def decide(
        self, principal: dict[str, Any], entities: list[dict[str, Any]], req: Request
    ) -> Outcome:
        return self.decide_all(principal, json.dumps(entities)[1:-1], [req])[0]

    def decide_all(
        self, principal: dict[str, Any], entities_json: str, reqs: list[Request]
    ) -> list[Outcome]:
        """Decide several requests of one principal: one Cedar batch per action.

        ``entities_json`` is the principal's entities as JSON list *items*
        (no brackets), serialized once per principal by the caller and parsed
        once per principal (``_base``); the resource entities of all requests
        are parsed once per call and shared by the batches. Each batch runs
        against the policies of its action only. ``decide_reference`` is the
        same decision the plain way.
        """
        import cedarpy

        if not reqs:
            return []
        raw: list[_Raw | None] = []
        keys: list[_Key] = []
        # the requests Cedar must answer: (index, resource entity JSON, context JSON)
        misses: list[tuple[int, str, str]] = []
        asked: set[_Key] = set()  # keys in ``misses``: the same question is asked once
        dumps = json.dumps
        contexts: dict[tuple[int, int], str] = {}  # requests of one command share a context
        for i, r in enumerate(reqs):
            used, ctx_used = self._sent.get(r.action, self._everything)
            attrs = dumps({k: v for k, v in r.attrs.items() if k in used}, sort_keys=True)
            seen = (id(r.context), id(ctx_used))
            ctx = contexts.get(seen)
            if ctx is None:
                context = r.context if ctx_used is None else _pick(r.context, ctx_used)
                ctx = contexts[seen] = dumps(context, sort_keys=True)
            key = (entities_json, r.action, r.rtype, attrs, ctx)
            keys.append(key)
            hit = self._cache.get(key)
            raw.append(hit)
            if hit is None and key not in asked:
                asked.add(key)
                ent = (
                    f'{{"uid":{{"type":"{r.rtype}","id":"{r.rid}"}},"attrs":{attrs},"parents":[]}}'
                )
                misses.append((i, ent, ctx))
        if len(self._cache) > CACHE_SIZE:
            self._cache.clear()
        if misses:
            try:
                entities = self._base(entities_json).with_added_json_str(
                    f"[{','.join(ent for _, ent, _ in misses)}]"
                )
                groups: dict[str, list[tuple[int, str, str]]] = {}
                for miss in misses:
                    groups.setdefault(reqs[miss[0]].action, []).append(miss)
                results: list[tuple[int, Any]] = []
                for action, group in groups.items():
                    requests = [
                        {
                            "principal": principal,
                            "action": {"type": "Action", "id": action},
                            "resource": {"type": reqs[i].rtype, "id": reqs[i].rid},
                            "context": ctx,  # already JSON: Cedar parses it, no second dump
                        }
                        for i, _, ctx in group
                    ]
                    policies = self.by_action.get(action, self.policies)
                    got = cedarpy.is_authorized_batch(requests, policies, entities)
                    if len(got) != len(group):
                        raise RuntimeError("engine returned a short batch")
                    results.extend((m[0], res) for m, res in zip(group, got, strict=True))
            except Exception as exc:  # any engine failure denies
                fail = Outcome(
                    False, "evaluation-error", f"policy evaluation failed: {exc}", "tenantry"
                )
                return [fail for _ in reqs]
            answers: dict[_Key, _Raw] = {}
            for i, result in results:
                entry = answers[keys[i]] = _raw(result)
                if not entry.errors:
                    self._cache[keys[i]] = entry
            raw = [answers[keys[i]] if e is None else e for i, e in enumerate(raw)]
        return [self._outcome(e, req) for e, req in zip(raw, reqs, strict=True)]

    def decide_reference(
        self, principal: dict[str, Any], entities: list[dict[str, Any]], req: Request
    ) -> Outcome:
        """One request alone, the plain way: every policy, every attribute, no cache.

        The tests hold ``decide_all`` to this on the corpus and on generated
        requests, so the fast path cannot drift from what Cedar says.
        """
        import cedarpy

        resource = {"uid": {"type": req.rtype, "id": req.rid}, "attrs": req.attrs, "parents": []}
        request = {
            "principal": principal,
            "action": {"type": "Action", "id": req.action},
            "resource": {"type": req.rtype, "id": req.rid},
            "context": req.context,
        }
        try:
            result = cedarpy.is_authorized(request, self.policies, [*entities, resource])
        except Exception as exc:  # any engine failure denies
            return Outcome(
                False, "evaluation-error", f"policy evaluation failed: {exc}", "tenantry"
            )
        return self._outcome(_raw(result), req)

    def _base(self, entities_json: str) -> Any:
        """The principal's entities parsed once (a request adds its resources to a copy)."""
        import cedarpy

        got = self._bases.get(entities_json)
        if got is None:
            got = cedarpy.Entities.from_json_str(f"[{entities_json}]")
            if len(self._bases) >= BASES_SIZE:
                self._bases.clear()
            self._bases[entities_json] = got
        return got

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
            return Outcome(True, rule.id, rule.message, rule.source, request=req)
        if reasons:
            rule = self.rules[reasons[0]]
            return Outcome(False, rule.id, rule.message, rule.source, request=req)
        fallback = (
            "no policy rule permits {action} here"
            if req.action in ACTIONS
            else (DEFAULT_DENY["unknown"])
        )
        default = DEFAULT_DENY.get(req.action, fallback)
        return Outcome(False, "default-deny", default, "tenantry", request=req)


def _raw(result: Any) -> _Raw:
    diag = result.diagnostics
    reasons = diag.reasons
    if len(reasons) > 1:  # policy order: the first policy that decided names the rule
        reasons = sorted(reasons, key=lambda r: int(r[6:]) if r[6:].isdigit() else 0)
    return _Raw(result.allowed, tuple(reasons), tuple(diag.errors))


def _pick(context: dict[str, Any], keys: frozenset[str]) -> dict[str, Any]:
    return {k: v for k, v in context.items() if k in keys}


def _sent(policies: Any) -> tuple[frozenset[str], frozenset[str] | None]:
    """What to send for requests these policies judge: (attributes, context keys or None=all)."""
    names: set[str] = set()
    whole_context = _reads(policies, names)
    attrs = frozenset(names)
    return attrs, None if whole_context else attrs


def _reads(node: Any, out: set[str]) -> bool:
    """Add every attribute name a policy reads to ``out``; True if it uses ``context`` whole."""
    from dataclasses import fields, is_dataclass

    from cedarpy import pst

    if isinstance(node, pst.Var):
        return bool(node.name == "context")
    if isinstance(node, pst.GetAttr | pst.HasAttr):
        out.update((node.attr,) if isinstance(node, pst.GetAttr) else node.attrs)
        if isinstance(node.base, pst.Var):  # ``var.attr`` / ``var has attr``: that attribute
            return False
        return _reads(node.base, out)
    whole = False
    if is_dataclass(node):
        for f in fields(node):
            whole = _reads(getattr(node, f.name), out) or whole
    elif isinstance(node, dict):
        for v in node.values():
            whole = _reads(v, out) or whole
    elif isinstance(node, list | tuple):
        for v in node:
            whole = _reads(v, out) or whole
    return whole


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
