"""``PolicyService``: the daemon's policy component.

The gateway calls ``authorize(principal, action, params)`` for every op that
declares ``action=``; it returns the ``Decision`` (with ``warnings``) when
allowed and raises ``PolicyDenied`` with the deciding rule and an actionable
message otherwise. Policies are parsed once at ``start()``; a policy file that
does not load makes every decision a denial (fail closed) until it is fixed
and ``reload()`` is called.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenantry.core.errors import ApprovalRequired, PolicyDenied, TenantryError
from tenantry.core.events import Event, EventType, Subscription
from tenantry.core.models import CommandSpec, Principal
from tenantry.core.tasks import TaskGroup
from tenantry.safety.policy.approvals import Approvals
from tenantry.safety.policy.approvals import now as _now
from tenantry.safety.policy.engine import Engine
from tenantry.safety.policy.envmemo import EnvJson
from tenantry.safety.policy.facts import Facts, job_base, local_user, partitions_from_info
from tenantry.safety.policy.judge import Decision, Judge
from tenantry.service.placement import place

if TYPE_CHECKING:
    from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

USER_POLICY = "policy.cedar"  # in the state directory: forbid-only narrowing
FACTS_FILE = "policy-facts.json"  # in the state directory: optional fixed facts
APPROVALS_FILE = "approvals.json"  # in the state directory: held actions and grants
# jobs that ended longer ago than this are not loaded into the owner map at start
OWNERS_WINDOW_S = 7 * 86400.0
# what a session that just read flagged content may not do without the human
CONSEQUENTIAL = frozenset({"submit_job", "cancel_job", "modify_job", "write_path",
                           "acquire_lease", "memory.write", "remember"})  # fmt: skip


class PolicyService:
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.judge: Judge | None = None
        self.load_error: TenantryError | None = None
        self._owners: dict[str, str] = {}  # job id and backend id -> principal key
        self._subscription = Subscription()
        self.approvals = Approvals()
        self.flagged: dict[str, float] = {}  # principal key -> when it last got flagged content
        self._tasks = TaskGroup("policy")  # the facts refresh loop; failures shown in info
        self.facts_refreshed_at = 0.0
        # the policy's version: this process, its loads and its judge's facts (``version``)
        self._nonce = f"{os.getpid()}-{time.time_ns()}"
        self._loads = 0
        self._watchers: list[Callable[[], None]] = []

    # --- lifecycle -------------------------------------------------------------

    async def start(self) -> None:
        self.approvals = Approvals(self.state / APPROVALS_FILE)
        self.approvals.load()
        self.reload()
        self._subscription.open(self.runtime.bus, self._on_event)
        if self.runtime.journal is not None:  # None: a unit test's runtime
            await self._load_owners()
        if self.settings.backend == "slurm" and not (self.state / FACTS_FILE).exists():
            await self.refresh_facts()
            if self.settings.policy_facts_refresh_s > 0:
                # associations, QoS and partitions change while the daemon runs
                self._tasks.supervise("facts-refresh", self._refresh_loop)

    async def refresh_facts(self) -> None:
        """Partitions from the backend and associations from ``sacctmgr``, best effort."""
        try:
            await self.refresh_partitions()
        except Exception as exc:  # facts are best effort; decisions still work
            log.warning("policy: cannot read partitions from the backend: %s", exc)
        try:
            await self.refresh_accounting()
        except Exception as exc:  # no accounting (or no sacctmgr): decisions still work
            log.warning("policy: cannot read associations from sacctmgr: %s", exc)
        self.facts_refreshed_at = _now()

    async def _refresh_loop(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(self.settings.policy_facts_refresh_s)
            await self.refresh_facts()

    async def aclose(self) -> None:
        await self._tasks.aclose()
        self._subscription.close()

    @property
    def state(self) -> Path:
        return self.settings.state_path

    def reload(self) -> None:
        """(Re)load policies and facts; on error every decision denies."""
        try:
            engine = Engine.from_files(self.settings.policy_file, str(self.state / USER_POLICY))
            facts_path = self.state / FACTS_FILE
            facts = Facts.load(facts_path) if facts_path.exists() else Facts()
            self.judge = Judge(
                engine,
                facts,
                protected=self.protected_paths(),
                owner_of=self.owner_of,
                where_of=self.where_of,
                on_change=self._changed,
            )
            self.load_error = None
        except TenantryError as err:
            log.error("policy: %s", err)
            self.judge = None
            self.load_error = err
        self._loads += 1
        self._changed()

    @property
    def version(self) -> str:
        """Changes whenever a decision could: a load of the policies, new facts, a restart."""
        generation = self.judge.generation if self.judge is not None else -1
        return f"{self._nonce}.{self._loads}.{generation}"

    def watch(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` after every change of ``version``."""
        self._watchers.append(fn)

    def _changed(self) -> None:
        for fn in list(self._watchers):
            fn()

    def protected_paths(self) -> tuple[str, ...]:
        out = [str(self.state)]
        if self.settings.policy_file:
            out.append(self.settings.policy_file)
        return tuple(out)

    async def refresh_accounting(self) -> None:
        """The daemon user's associations and QoS limits from ``sacctmgr`` (Slurm only)."""
        import asyncio
        import getpass

        from tenantry.safety.policy import slurmfacts as sf

        async def run(argv: list[str]) -> str:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
            )
            try:
                async with asyncio.timeout(20):
                    out, _ = await proc.communicate()
            except TimeoutError:
                proc.kill()
                await proc.wait()
                raise
            if proc.returncode != 0:
                raise RuntimeError(f"{argv[0]} exited {proc.returncode}")
            return out.decode(errors="replace")

        user = getpass.getuser()
        assocs = sf.parse_associations(await run(sf.assoc_argv(user)))
        qos = sf.parse_qos(await run(sf.qos_argv()))
        if self.judge is None:
            return
        facts = self.judge.facts
        base = facts.users.get(user) or local_user(user)
        accounts = sf.user_accounts(assocs, user)
        me = dataclasses.replace(
            base, accounts=accounts or base.accounts, qos=sf.user_qos(assocs, user) or base.qos
        )
        walls = {n: q.max_wall_s for n, q in qos.items() if q.max_wall_s}
        self.judge.set_facts(
            dataclasses.replace(
                facts,
                users={**facts.users, user: me},
                qos_wall=walls,
                known_qos=frozenset(qos) | facts.known_qos,
            )
        )

    async def refresh_partitions(self) -> None:
        """Partition limits from the backend's facility facts (Slurm: sinfo/scontrol)."""
        info = await self.runtime.backend.info()
        parts = partitions_from_info(info)
        if parts and self.judge is not None:
            self.judge.set_facts(self.judge.facts.with_partitions(parts))

    # --- facts the caller provides ------------------------------------------------

    def owner_of(self, job_id: str) -> tuple[str, str] | None:
        """(user, principal key) of a job Tenantry submitted, by its id or backend id.

        Answered from memory (the judge is synchronous): the jobs of the journal
        loaded at start, and every submission since from the bus.
        """
        principal = self._owners.get(job_base(job_id))
        if principal is None:
            return None
        return principal.split("/")[0], principal

    def _own(self, job_id: str, backend_id: str, principal: str) -> None:
        for ref in (job_id, backend_id):
            if ref:
                self._owners[ref] = principal

    async def _load_owners(self) -> None:
        since = _now() - OWNERS_WINDOW_S
        for job_id, backend_id, principal in await self.runtime.journal.job_owners(since):
            self._own(job_id, backend_id, principal)

    async def _on_event(self, event: Event) -> None:
        if event.type is EventType.JOB_SUBMITTED and event.principal:
            backend_id = str((event.data or {}).get("backend_id", ""))
            self._own(event.subject, backend_id, event.principal)

    def where_of(self, principal: Principal, params: dict[str, Any]) -> str:
        """Where the daemon would run this command: ``login`` or ``lease`` (context.where)."""
        spec = CommandSpec.from_dict(params)
        rt = self.runtime
        placed = place(
            spec,
            agent=principal.is_agent,
            settings=self.settings,
            backend=rt.backend.name,
            leases=rt.leases is not None,
        )
        return placed.location

    # --- decisions ------------------------------------------------------------------

    def check(self, principal: Principal, action: str, params: dict[str, Any]) -> Decision:
        """Decide without raising (dry run)."""
        if self.judge is None:
            err = self.load_error
            return Decision(
                False,
                action,
                "policy-invalid",
                f"the policy does not load, so everything is denied: {err}",
                "tenantry",
            )
        if not self.judge.facts.users.get(principal.user):
            self._learn_user(principal.user)
        return self.judge.evaluate(principal, action, params)

    def _learn_user(self, name: str) -> None:
        assert self.judge is not None
        facts = self.judge.facts
        users = dict(facts.users)
        users[name] = local_user(name)
        self.judge.set_facts(dataclasses.replace(facts, users=users))

    async def authorize(
        self, principal: Principal, action: str, params: dict[str, Any]
    ) -> Decision:
        decision = self.check(principal, action, params)
        await self.runtime.emit(
            Event(
                EventType.POLICY_DECISION,
                principal=principal.key,
                subject=action,
                outcome=decision.decision,
                duration_s=decision.duration_us / 1e6,
                data={
                    "input_sha256": _digest(params),
                    "rule": decision.rule,
                    "source": decision.source,
                    "message": decision.message,
                    "checks": len(decision.checks),
                },
            )
        )
        if not decision.allowed and decision.error is not None:
            raise decision.error  # malformed params: denied, reported as the usage error
        if not decision.allowed and principal.is_agent and self._asks(decision):
            return await self._ask(principal, action, params, decision)
        if decision.allowed and self._tainted(principal, decision):
            held = Decision(
                False,
                action,
                "guard-hold-after-injection",
                "this session received instruction-like content (withheld by the guard) "
                f"within the last {int(self.settings.guard_hold_s)} s, so {action} is held "
                "for the human's approval",
                "tenantry",
            )
            return await self._ask(principal, action, params, held)
        if not decision.allowed:
            raise PolicyDenied(
                decision.message,
                hint="dry-run alternatives with `tenantry policy check`",
                rule=decision.rule,
                action=action,
                source=decision.source,
            )
        return decision

    def note_flagged(self, principal: Principal) -> None:
        """The guard withheld instruction-like content from this session just now."""
        if principal.is_agent:
            self.flagged[principal.key] = _now()

    def reuse_of(self, decision: Decision) -> dict[str, Any] | None:
        """Whether another process may keep ``decision``, and on what it rests
        (``reuse.describe``); the placement of a command is fixed for this service's life."""
        from tenantry.safety.policy import reuse

        where = self.judge.env.where_of if self.judge else None
        return reuse.describe(decision, self.version, static=[where] if where else [])

    def _tainted(self, principal: Principal, decision: Decision) -> bool:
        """Did this session get flagged content recently, and does the request do much?"""
        window = float(self.settings.guard_hold_s or 0)
        seen = self.flagged.get(principal.key)
        if not principal.is_agent or window <= 0 or seen is None or _now() - seen >= window:
            return False
        acts = {decision.action, *(c["action"] for c in decision.checks)}
        return bool(acts & CONSEQUENTIAL)

    def _asks(self, decision: Decision) -> bool:
        """Only when every denial of the request comes from an ``@ask`` rule."""
        if self.judge is None:
            return False
        asks = self.judge.engine.ask_rules
        denials = [c["rule"] for c in decision.checks if c["decision"] == "deny"]
        return bool(denials) and decision.rule in asks and all(r in asks for r in denials)

    async def _ask(
        self, principal: Principal, action: str, params: dict[str, Any], decision: Decision
    ) -> Decision:
        """An ``@ask`` rule decided: run under a live grant, else hold for the human."""
        digest = _digest({"action": action, "params": params})
        now = _now()
        grant = self.approvals.granted(
            principal.key, principal.project, action, decision.rule, digest, now
        )
        if grant is not None:
            await self._audit(principal, "approval.used", grant.id, grant.scope, decision.rule)
            decision.allowed = True
            decision.warnings.append(
                f"allowed by approval {grant.id} ({grant.scope}) from {grant.decided_by}"
            )
            return decision
        held = self.approvals.hold(
            principal.key, principal.project, action, decision.rule, digest, decision.message,
            now,
        )  # fmt: skip
        await self._audit(principal, "approval.held", held.id, "", decision.rule)
        raise ApprovalRequired(
            f"waiting for approval {held.id}: {decision.message}",
            hint=f"the human approves with `tenantry approve {held.id}` (or refuses with "
            f"--refuse); wait for it with `tenantry approvals wait {held.id}`, then retry",
            approval=held.id,
            rule=decision.rule,
            action=action,
        )

    async def _audit(
        self, principal: Principal, what: str, ref: str, scope: str, rule: str
    ) -> None:
        await self.runtime.emit(
            Event(
                EventType.POLICY_DECISION,
                principal=principal.key,
                subject=what,
                outcome=scope or what.split(".")[-1],
                data={"approval": ref, "rule": rule, "scope": scope},
            )
        )

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        """The gateway's hook: judge ops that declare an action; return warnings."""
        if action is None:
            return []
        decision = await self.authorize(principal, action, params)
        return list(decision.warnings)


_DUMPS: dict[str, Any] = {"sort_keys": True, "default": str, "ensure_ascii": False}
# a session's environment (the largest part of a command's params) serialized once
_ENV_TEXT = EnvJson(**_DUMPS)


def _digest(params: dict[str, Any]) -> str:
    """Digest of what was judged (the audit log keeps this, not the params): the
    SHA-256 of ``json.dumps(params, sort_keys=True, default=str, ensure_ascii=False)``,
    built with the environment's text kept per environment."""
    env = params.get("env")
    if isinstance(env, dict) and env and all(type(k) is str for k in params):
        raw = (
            "{"
            + ", ".join(
                json.dumps(k, ensure_ascii=False)
                + ": "
                + (_ENV_TEXT(env) if k == "env" else json.dumps(params[k], **_DUMPS))
                for k in sorted(params)
            )
            + "}"
        )
    else:
        raw = json.dumps(params, **_DUMPS)
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def create(runtime: Runtime) -> PolicyService:
    service = PolicyService(runtime)
    runtime.gates["policy"] = service
    runtime.flags = service
    return service
