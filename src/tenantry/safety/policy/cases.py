"""``tenantry policy test``: judge a JSONL corpus of cases in-process, no daemon.

One JSON object per line::

    {"id": "scancel-quote-built", "group": "shell",
     "principal": {"user": "alice", "agent": "claude-code", "session": "s1", "project": "chem"},
     "action": "run_command", "args": "sc''ancel 1002",
     "context": {"hour": 3}, "expected": "deny", "rule": "default-deny",
     "why": "quote-built name still runs scancel on the human's job"}

``args`` is what the agent sent: a command string or argv list for
``run_command``; ``{"argv": [...], "script_text": "..."}`` (or an argv list)
for ``submit_job``; a path for ``read_path``/``write_path``; a job id for
``cancel_job``/``modify_job``/``read_job_output``; a dict is passed through
as the op's params. ``rule`` is optional; when given, the deciding rule must
match too. Blank lines and lines starting with ``//`` are skipped.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.core.models import AgentProduct, Principal
from tenantry.safety.policy.judge import Decision, Judge


@dataclass(slots=True)
class Result:
    case: dict[str, Any]
    decision: Decision
    passed: bool

    @property
    def false_allow(self) -> bool:
        return not self.passed and self.decision.allowed


def load_cases(path: str | Path) -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise UsageError(f"cannot read cases file {path}: {exc}") from exc
    for n, line in enumerate(lines, 1):
        s = line.strip()
        if not s or s.startswith("//"):
            continue
        try:
            case = json.loads(s)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{path}:{n}: not JSON: {exc}") from exc
        for key in ("id", "action", "expected"):
            if key not in case:
                raise UsageError(f"{path}:{n}: case lacks {key!r}")
        if case["expected"] not in ("allow", "deny"):
            raise UsageError(f"{path}:{n}: expected must be allow or deny")
        case.setdefault("principal", {})
        cases.append(case)
    return cases


def case_principal(case: dict[str, Any]) -> Principal:
    p = case.get("principal") or {}
    try:
        agent = AgentProduct(p.get("agent", "claude-code"))
    except ValueError:
        agent = AgentProduct.OTHER_AGENT
    return Principal(
        uid=int(p.get("uid", 1000)),
        user=str(p.get("user", "alice")),
        agent=agent,
        session=str(p.get("session", "s1")),
        host=str(p.get("host", "")),
        project=str(p.get("project", "")),
    )


def case_params(action: str, args: Any, context: dict[str, Any] | None = None) -> dict[str, Any]:
    """The op params an agent's ``args`` amount to."""
    ctx = context or {}
    params: dict[str, Any]
    if isinstance(args, dict):
        params = dict(args)
    elif action == "run_command":
        params = {"argv": list(args)} if isinstance(args, list) else {"command": str(args)}
    elif action == "submit_job":
        argv = list(args) if isinstance(args, list) else shlex.split(str(args))
        params = {"argv": argv}
    elif action in ("read_path", "write_path"):
        params = {"paths": list(args)} if isinstance(args, list) else {"path": str(args)}
    elif action in ("cancel_job", "modify_job", "read_job_output"):
        params = {"ids": [str(a) for a in args]} if isinstance(args, list) else {"id": str(args)}
    else:
        params = {"name": str(args)}
    if "cwd" in ctx and "cwd" not in params:
        params["cwd"] = ctx["cwd"]
    return params


def run_cases(judge: Judge, cases: list[dict[str, Any]]) -> list[Result]:
    results: list[Result] = []
    for case in cases:
        action = str(case["action"])
        params = case_params(action, case.get("args", ""), case.get("context"))
        decision = judge.evaluate(case_principal(case), action, params)
        passed = decision.decision == case["expected"]
        if passed and case.get("rule") and decision.rule != case["rule"]:
            passed = False
        results.append(Result(case, decision, passed))
    return results


def report(results: list[Result]) -> tuple[str, int]:
    """Failures (false allows first), then ``N passed, N failed``; and the failure count."""
    failed = [r for r in results if not r.passed]
    failed.sort(key=lambda r: (not r.false_allow, str(r.case.get("id"))))
    lines: list[str] = []
    for r in failed:
        c = r.case
        kind = "FALSE ALLOW" if r.false_allow else (
            "FALSE DENY" if c["expected"] == "allow" else "WRONG RULE"
        )  # fmt: skip
        want = c["expected"] + (f" ({c['rule']})" if c.get("rule") else "")
        lines.append(
            f"{kind} {c['id']}: {c['action']} {json.dumps(c.get('args'))[:160]}\n"
            f"  expected {want}, got {r.decision.decision} ({r.decision.rule}): "
            f"{r.decision.message[:200]}\n"
            f"  why: {c.get('why', '')}"
        )
    passed = len(results) - len(failed)
    lines.append(f"{passed} passed, {len(failed)} failed")
    return "\n".join(lines), len(failed)
