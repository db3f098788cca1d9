"""``tenantry policy check`` and ``tenantry policy test``.

Module top level is standard library only (the CLI must start fast); the
engine loads inside the handlers.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

CHECK_EPILOG = """\
examples:
  tenantry policy check --action run_command --command "scancel -u bob"
  tenantry policy check --action run_command --argv bash -c 'sudo id'
  tenantry policy check --action submit_job --script job.sh --json
  tenantry policy check --action read_path --path ~/.ssh/id_ed25519
  tenantry policy check --local --facts facts.json --action run_command \\
      --command "sbatch -G 16 x.sh"
"""

TEST_EPILOG = """\
Runs in-process (no daemon): each line of CASES.jsonl is one case with id,
principal, action, args, expected (allow|deny), why, and optionally rule.
Failures print first (false allows before false denies), then a line
"N passed, N failed". Exit status 1 when any case fails.

examples:
  tenantry policy test tests/policy/cases.jsonl --facts tests/policy/facts.json
  tenantry policy test cases.jsonl --policy /etc/tenantry/policy.cedar --json
"""


_APPROVE_EPILOG = """\
A rule marked @ask holds an agent's action instead of refusing it; the agent
is told the approval id. Approve it from your own shell (not the agent's):

  tenantry approvals                        # what is waiting
  tenantry approve ap-1a2b3c4d              # this exact request, once
  tenantry approve ap-1a2b3c4d --scope session --for 2h
  tenantry approve ap-1a2b3c4d --refuse
  tenantry approvals wait ap-1a2b3c4d       # block until decided (agents use this)

Scopes: once (this request), session (this agent session, this rule),
project (your sessions in this project), always (all your sessions). Every
decision is in the audit log.
"""


def _seconds(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    t = text.strip().lower()
    try:
        if t and t[-1] in units:
            return float(t[:-1]) * units[t[-1]]
        return float(t)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30m, 2h, 7d)") from exc


def _register_approvals(sub: Any) -> None:
    from tenantry.cli.common import command

    with command(
        sub,
        "approve",
        _approve,
        "approve (or refuse) an agent's held action",
        description="Approve or refuse an action a policy rule held for your approval.",
        epilog=_APPROVE_EPILOG,
    ) as a:
        a.add_argument("id", help="the approval id the agent was given (ap-...)")
        a.add_argument("--scope", choices=("once", "session", "project", "always"), default="once")
        a.add_argument("--for", dest="for_s", type=_seconds, default=8 * 3600.0,
                       help="how long the grant lasts (default 8h)")  # fmt: skip
        a.add_argument("--refuse", action="store_true", help="refuse instead of approving")
    with command(
        sub,
        "approvals",
        _approvals,
        "list held actions, or wait for one to be decided",
        epilog=_APPROVE_EPILOG,
    ) as ls:
        ls.add_argument("wait", nargs="?", choices=("wait",), help="wait for ID to be decided")
        ls.add_argument("id", nargs="?", help="approval id (with wait)")
        ls.add_argument("--timeout", type=_seconds, default=300.0, help="with wait (default 5m)")


def _approval_line(a: dict[str, Any]) -> str:
    scope = f" {a['scope']}" if a.get("scope") else ""
    return f"{a['id']}  {a['status']}{scope}  {a['principal']}  {a['rule']}  {a['label'][:80]}"


def _approve(args: argparse.Namespace) -> int:
    from tenantry.cli.common import client_from, emit

    body = {"id": args.id, "scope": args.scope, "for_s": args.for_s, "refuse": args.refuse}
    res = client_from(args).call("approvals.decide", body)
    emit(args, res, lambda d: _approval_line(d["approval"]))
    return 0


def _approvals(args: argparse.Namespace) -> int:
    from tenantry.cli.common import client_from, emit

    client = client_from(args)
    if args.wait:
        if not args.id:
            raise SystemExit("tenantry approvals wait: give the approval id")
        res = client.call("approvals.wait", {"id": args.id, "timeout_s": args.timeout})
        emit(args, res, lambda d: _approval_line(d["approval"]))
        return 0 if res["approval"]["status"] == "approved" else 1
    res = client.call("approvals.list", {})
    emit(args, res, lambda d: "\n".join(_approval_line(x) for x in d["approvals"]) or "none")
    return 0


POLICY_HELP = "dry-run policy decisions and test a policy against a corpus"
POLICY_ABOUT = "Dry-run policy decisions and test policies against a case corpus."


def register(sub: Any) -> None:
    from tenantry.cli.common import command, group

    _register_approvals(sub)
    _, psub = group(sub, "policy", POLICY_HELP, metavar="SUBCOMMAND", description=POLICY_ABOUT)
    with command(
        psub,
        "check",
        _check,
        "judge one request (dry run) and name the deciding rule",
        epilog=CHECK_EPILOG,
    ) as c:
        c.add_argument("--action", required=True, help="policy action, e.g. run_command")
        what = c.add_mutually_exclusive_group()
        what.add_argument("--command", help="a shell command string")
        what.add_argument(
            "--argv", nargs=argparse.REMAINDER, help="an argv list (rest of the line)"
        )
        what.add_argument("--script", help="a batch script to submit (submit_job)")
        what.add_argument("--path", help="a path (read_path/write_path)")
        what.add_argument("--job", help="a job id (cancel_job/read_job_output/modify_job)")
        what.add_argument("--params", help="the op params as a JSON object")
        c.add_argument("--cwd", help="working directory the request is judged in")
        c.add_argument(
            "--agent", default="", help="judge as this agent product (default: detected)"
        )
        c.add_argument("--session", default="", help="judge as this agent session id")
        c.add_argument("--local", action="store_true", help="judge in-process, without the daemon")
        c.add_argument("--facts", help="facts JSON for --local (users, partitions, qos, jobs)")
        c.add_argument("--policy", help="facility policy file for --local")
    with command(
        psub,
        "test",
        _test,
        "judge a JSONL corpus of cases locally; exit 1 on failures",
        epilog=TEST_EPILOG,
    ) as t:
        t.add_argument("cases", help="JSONL file, one case per line")
        t.add_argument("--facts", help="facts JSON (users, partitions, qos, jobs, limits)")
        t.add_argument("--policy", help="facility policy file (default: baseline only)")
        t.add_argument("--user-policy", help="user policy file (forbid rules only)")


def _params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {}
    if args.params:
        loaded = json.loads(args.params)
        if not isinstance(loaded, dict):
            from tenantry.core.errors import UsageError

            raise UsageError("--params must be a JSON object")
        params.update(loaded)
    if args.command is not None:
        params["command"] = args.command
    if args.argv:
        params["argv"] = args.argv
    if args.script:
        text = Path(args.script).read_text()
        params["argv"] = ["sbatch", str(Path(args.script).resolve())]
        params["script_text"] = text
    if args.path:
        params["path"] = args.path
    if args.job:
        params["id"] = args.job
    params["cwd"] = args.cwd or str(Path.cwd())
    return params


def _human(d: dict[str, Any]) -> str:
    lines = [f"{d['decision'].upper()}  {d['action']}  rule {d['rule']} ({d['source']})"]
    lines.append(f"  {d['message']}")
    for w in d.get("warnings") or ():
        lines.append(f"  warning: {w}")
    for chk in d.get("checks") or ():
        lines.append(
            f"  - {chk['decision']:5} {chk['action']:16} {chk['rule']:32} {chk['resource']}"
        )
    return "\n".join(lines)


def _check(args: argparse.Namespace) -> int:
    from tenantry.cli.common import emit

    params = _params(args)
    if args.local:
        from tenantry.client.principal import client_claims
        from tenantry.safety.policy.judge import Judge

        judge = _judge(args.facts, args.policy, None)
        claims = client_claims()
        import getpass
        import os

        from tenantry.core.models import AgentProduct, Principal

        agent = args.agent or claims["agent"]
        if agent == "human" and not args.agent:
            agent = "agent"
        principal = Principal(
            uid=os.getuid(),
            user=getpass.getuser(),
            agent=AgentProduct(agent),
            session=args.session or claims["session"] or "dry-run",
            project=claims["project"],
        )
        assert isinstance(judge, Judge)
        result = judge.evaluate(principal, args.action, params).to_dict()
    else:
        from tenantry.cli.common import client_from

        claims_agent = args.agent
        if not claims_agent:
            from tenantry.client.principal import client_claims

            detected = client_claims()["agent"]
            claims_agent = "agent" if detected == "human" else detected
        body = {"action": args.action, "params": params, "agent": claims_agent}
        if args.session:
            body["session"] = args.session
        result = client_from(args).call("policy.check", body)
    emit(args, result, _human)
    return 0 if result["decision"] == "allow" else 77


def _judge(facts_path: str | None, policy: str | None, user_policy: str | None) -> Any:
    from tenantry.safety.policy.engine import Engine
    from tenantry.safety.policy.facts import Facts
    from tenantry.safety.policy.judge import Judge

    facts = Facts.load(facts_path) if facts_path else Facts()
    engine = Engine.from_files(policy, user_policy)
    return Judge(engine, facts, read_files=False, hour=12)


def _test(args: argparse.Namespace) -> int:
    from tenantry.safety.policy.cases import load_cases, report, run_cases

    judge = _judge(args.facts, args.policy, args.user_policy)
    results = run_cases(judge, load_cases(args.cases))
    text, failed = report(results)
    if args.json:
        json.dump(
            {
                "passed": len(results) - failed,
                "failed": failed,
                "failures": [
                    {
                        "id": r.case["id"],
                        "expected": r.case["expected"],
                        "got": r.decision.decision,
                        "rule": r.decision.rule,
                        "message": r.decision.message,
                        "false_allow": r.false_allow,
                    }
                    for r in results
                    if not r.passed
                ],
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text + "\n")
    return 1 if failed else 0
