"""One decision for one request: normalize, ask Cedar for each part, first denial wins.

``Judge`` is synchronous and pure apart from reading scripts and resolving
symlinks, so the daemon, ``tenantry policy test`` and the benchmark share it.

Decisions are cached on the *raw* request (principal, action, the params as
sent, the hour), consulted before any normalization. Every look at the world
the normalizer made (``observed.look``: symlinks, scripts, ``PATH``, placement,
job owners) is kept with the entry and checked again on a hit, so a request
whose files or placement changed is judged afresh. New facts or policies
(``set_facts``, a new ``Judge`` on reload) start an empty cache; new facts
also advance ``generation`` and call ``on_change`` (the facility service tells
executors, whose caches of its answers key on it: ``reuse``).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenantry.core.errors import TenantryError
from tenantry.core.models import Principal
from tenantry.safety.policy.engine import Engine, Outcome, Request
from tenantry.safety.policy.envmemo import EnvJson
from tenantry.safety.policy.facts import Facts
from tenantry.safety.policy.normalize import Env, OwnerLookup, WhereOf, build
from tenantry.safety.policy.observed import Look, recording, unchanged


@dataclass(slots=True)
class Decision:
    """The outcome of one authorization: allowed or not, the deciding rule, a message."""

    allowed: bool
    action: str
    rule: str
    message: str
    source: str = "tenantry"  # baseline | facility | user | tenantry
    warnings: list[str] = field(default_factory=list)
    checks: list[dict[str, Any]] = field(default_factory=list)
    duration_us: float = 0.0
    error: TenantryError | None = None  # bad input: the caller sees this error itself
    # what normalizing looked at besides the request (``observed``); not part of the answer
    looks: list[Look] = field(default_factory=list, repr=False, compare=False)

    @property
    def decision(self) -> str:
        return "allow" if self.allowed else "deny"

    def to_dict(self) -> dict[str, Any]:
        return {
            "decision": self.decision,
            "action": self.action,
            "rule": self.rule,
            "message": self.message,
            "source": self.source,
            "warnings": list(self.warnings),
            "checks": list(self.checks),
            "duration_us": round(self.duration_us, 1),
        }


CACHE_SIZE = 4096


class Judge:
    def __init__(
        self,
        engine: Engine,
        facts: Facts,
        *,
        protected: tuple[str, ...] = (),
        owner_of: OwnerLookup | None = None,
        read_files: bool = True,
        hour: int | None = None,
        where_of: WhereOf | None = None,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.generation = 0  # advances with every change of the facts
        self.on_change = on_change
        self.env = Env(facts, owner_of, protected, read_files, hour, where_of)
        self._principals: dict[str, tuple[dict[str, Any], list[dict[str, Any]], str]] = {}
        # raw request -> (decision, the looks it depended on); see the module docstring
        self._decided: dict[tuple[Any, ...], tuple[Decision, list[Look]]] = {}
        self._env_json = EnvJson(separators=(",", ":"))
        self.cache_hits = 0

    @property
    def facts(self) -> Facts:
        return self.env.facts

    def clear_cache(self) -> None:
        """Forget every cached decision (the next ones are normalized again)."""
        self._decided.clear()

    def set_facts(self, facts: Facts) -> None:
        changed = facts != self.env.facts
        self.env.facts = facts
        self._principals.clear()
        self._decided.clear()
        if changed:
            self.generation += 1
            if self.on_change is not None:
                self.on_change()

    def entities(self, p: Principal) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        uid, ents, _ = self._entities(p)
        return uid, ents

    def _entities(self, p: Principal) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
        key = f"{p.key}|{p.project}"
        cached = self._principals.get(key)
        if cached is not None:
            return cached
        u = self.env.facts.user(p.user)
        user_uid = {"type": "User", "id": p.user}
        ents: list[dict[str, Any]] = [
            {
                "uid": user_uid,
                "attrs": {
                    "name": p.user,
                    "groups": list(u.groups),
                    "accounts": list(u.accounts),
                    "admin": u.admin,
                },
                "parents": [],
            }
        ]
        if p.is_agent:
            uid = {"type": "Agent", "id": p.key}
            ents.append(
                {
                    "uid": uid,
                    "attrs": {
                        "user": {"__entity": user_uid},
                        "product": p.agent.value,
                        "session": p.session,
                        "project": p.project,
                        "tier": self.env.facts.tier_of(p.key, p.tier),
                    },
                    "parents": [user_uid],
                }
            )
        else:
            uid = user_uid
        if len(self._principals) > 4096:
            self._principals.clear()
        out = (uid, ents, json.dumps(ents)[1:-1])
        self._principals[key] = out
        return out

    def evaluate(self, principal: Principal, action: str, params: dict[str, Any]) -> Decision:
        """Decide; never raises for policy reasons (a failure is a denial).

        A cached decision for the same raw request is returned (a copy) when
        everything its normalization looked at is unchanged.
        """
        t0 = time.perf_counter()
        key = self._key(principal, action, params)
        hit = self._decided.get(key) if key is not None else None
        if hit is not None and unchanged(hit[1]):
            self.cache_hits += 1
            d = hit[0]
            return dataclasses.replace(
                d, warnings=list(d.warnings), checks=list(d.checks), duration_us=_us(t0)
            )
        looks, stop = recording()
        try:
            decision = self._evaluate(principal, action, params, t0)
        finally:
            stop()
        decision.looks = looks
        if key is not None and decision.error is None:
            if len(self._decided) >= CACHE_SIZE:
                self._decided.clear()
            self._decided[key] = (
                dataclasses.replace(
                    decision, warnings=list(decision.warnings), checks=list(decision.checks)
                ),
                looks,
            )
        return decision

    def _key(self, p: Principal, action: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        """The raw request as a cache key (None when it cannot be one)."""
        hour = self.env.hour if self.env.hour is not None else time.localtime().tm_hour
        env = params.get("env")
        try:
            if isinstance(env, dict):  # the environment's text once per environment
                rest = {k: v for k, v in params.items() if k != "env"}
                raw: Any = (json.dumps(rest, separators=(",", ":")), self._env_json(env))
            else:
                raw = json.dumps(params, separators=(",", ":"))
        except (TypeError, ValueError):
            return None
        return (p, action, hour, raw)

    def _evaluate(
        self, principal: Principal, action: str, params: dict[str, Any], t0: float
    ) -> Decision:
        try:
            built = build(principal, action, params, self.env)
        except TenantryError as err:
            return Decision(False, action, "invalid-request", err.message, "tenantry",
                            duration_us=_us(t0), error=err)  # fmt: skip
        except Exception as exc:  # fail closed on any normalizer bug
            return Decision(
                False,
                action,
                "normalizer-error",
                f"the request could not be analysed ({type(exc).__name__}: {exc}); denied",
                "tenantry",
                duration_us=_us(t0),
            )
        uid, _, ents_json = self._entities(principal)
        checks: list[dict[str, Any]] = []
        first_deny: tuple[Request, Outcome] | None = None
        first_allow: tuple[Request, Outcome] | None = None
        outcomes = self.engine.decide_all(uid, ents_json, built.requests)
        for req, out in zip(built.requests, outcomes, strict=True):
            checks.append(
                {
                    "action": req.action,
                    "resource": req.label,
                    "decision": "allow" if out.allowed else "deny",
                    "rule": out.rule,
                }
            )
            if not out.allowed and first_deny is None:
                first_deny = (req, out)
            elif out.allowed and first_allow is None:
                first_allow = (req, out)
        if first_deny is not None:
            req, out = first_deny
            msg = out.message
            if req.action != action or len(built.requests) > 1:
                msg = f"{msg} [{req.action}: {req.label[:120]}]"
            return Decision(False, action, out.rule, msg, out.source, list(built.warnings),
                            checks, _us(t0))  # fmt: skip
        if first_allow is None:
            return Decision(False, action, "empty-request", "nothing to decide; denied",
                            "tenantry", list(built.warnings), checks, _us(t0))  # fmt: skip
        _, out = first_allow
        return Decision(True, action, out.rule, out.message, out.source, list(built.warnings),
                        checks, _us(t0))  # fmt: skip


def _us(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e6
