"""The hook on recorded payloads of each agent, with a scripted daemon and none."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.agents.harness import reap

from tenantry.agents import hook, steer
from tenantry.core import errors

from ..conftest import run_tenantry

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hooks"
SRC = Path(__file__).resolve().parents[2] / "src"


def load(agent: str, name: str) -> dict[str, Any]:
    payload: dict[str, Any] = json.loads((FIXTURES / agent / name).read_text())
    return payload


def with_command(agent: str, name: str, command: str) -> dict[str, Any]:
    p = load(agent, name)
    if "tool_input" in p:
        p["tool_input"]["command"] = command
    elif "args" in p:
        p["args"]["command"] = command
    else:
        p["command"] = command
    return p


class Daemon:
    """A scripted checker: records calls, answers policy.check as told."""

    def __init__(self, policy: Any = None, exc: Exception | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.policy = policy if policy is not None else {"decision": "allow"}
        self.exc = exc

    def __call__(self, op: str, params: dict[str, Any]) -> Any:
        self.calls.append((op, params))
        if self.exc is not None:
            raise self.exc
        if op == "policy.check":
            return self.policy
        return {"recorded": True}

    def ops(self) -> list[str]:
        return [c[0] for c in self.calls]


def run_hook(
    agent: str, payload: dict[str, Any], daemon: Daemon | None, env: dict[str, str] | None = None
) -> tuple[Any, int]:
    out, err = io.StringIO(), io.StringIO()

    def factory(a: str, s: str) -> hook.Checker:
        if daemon is None:
            raise errors.DaemonUnavailable("down")
        return daemon

    code = hook.run(
        agent, io.StringIO(json.dumps(payload)), out, err, checker_factory=factory, env=env or {}
    )
    text = out.getvalue().strip()
    return (json.loads(text) if text else None), code


PRE = {
    "claude-code": "pretooluse-bash.json",
    "codex": "pretooluse-bash.json",
    "gemini-cli": "beforetool-shell.json",
    "cursor": "beforeshellexecution.json",
    "opencode": "tool-execute-before.json",
}


def denied(agent: str, out: Any) -> str | None:
    """The deny message in the agent's own answer, or None when not denied."""
    if out is None:
        return None
    if agent in {"claude-code", "codex"}:
        h = out["hookSpecificOutput"]
        assert h["hookEventName"] == "PreToolUse"
        return h["permissionDecisionReason"] if h["permissionDecision"] == "deny" else None
    if agent == "gemini-cli":
        return out.get("reason") if out.get("decision") == "deny" else None
    if agent == "cursor":
        return out.get("agent_message") if out.get("permission") == "deny" else None
    return out.get("message") if out.get("decision") == "deny" else None


@pytest.mark.parametrize("agent", list(PRE))
def test_parse_recorded_payload(agent: str) -> None:
    payload = load(agent, PRE[agent])
    inp = hook.parse(agent, payload)
    assert inp.event == "pre_tool"
    assert inp.command and inp.command == (
        payload.get("command") or (payload.get("tool_input") or payload["args"])["command"]
    )
    assert inp.session
    assert inp.cwd == "/home/alice/chem" or agent == "opencode"


@pytest.mark.parametrize("agent", list(PRE))
def test_scheduler_poll_is_redirected(agent: str) -> None:
    daemon = Daemon()
    out, code = run_hook(
        agent, with_command(agent, PRE[agent], "watch -n 5 squeue -u alice"), daemon
    )
    assert code == 0
    msg = denied(agent, out)
    assert msg and "tenantry jobs" in msg
    assert "policy.check" not in daemon.ops()  # decided locally
    assert daemon.ops() == ["telemetry.hook"]
    assert daemon.calls[0][1]["rule"] == "redirect.squeue"


@pytest.mark.parametrize("agent", list(PRE))
def test_recursive_search_is_redirected(agent: str) -> None:
    out, _ = run_hook(agent, with_command(agent, PRE[agent], "cd src && grep -rn TODO ."), Daemon())
    msg = denied(agent, out)
    assert msg and "tenantry grep" in msg


@pytest.mark.parametrize("agent", list(PRE))
def test_policy_deny_is_rendered(agent: str) -> None:
    daemon = Daemon(
        policy={"decision": "deny", "message": "no GPU jobs after 22:00", "rule": "night"}
    )
    out, code = run_hook(agent, with_command(agent, PRE[agent], "python train.py"), daemon)
    assert code == 0
    msg = denied(agent, out)
    assert msg and "no GPU jobs after 22:00" in msg
    op, params = daemon.calls[0]
    assert op == "policy.check" and params["action"] == "run_command"
    # the policy service's shape: the judged op's params, with the agent's cwd
    assert params["params"]["command"] == "python train.py"
    assert params["params"]["cwd"] == ("" if agent == "opencode" else "/home/alice/chem")


@pytest.mark.parametrize("agent", list(PRE))
def test_policy_allow_leaves_the_agent_in_charge(agent: str) -> None:
    out, code = run_hook(agent, with_command(agent, PRE[agent], "make -j4"), Daemon())
    assert code == 0
    assert denied(agent, out) is None
    if agent in {"claude-code", "codex"}:
        assert out is None  # silence: the agent's own permission prompt applies
    if agent == "cursor":
        assert out == {"permission": "allow"}


@pytest.mark.parametrize("agent", list(PRE))
def test_daemon_down_fails_closed_only_for_dangerous(agent: str) -> None:
    out, _ = run_hook(
        agent, with_command(agent, PRE[agent], "rm -rf /lustre/projects/chem/run1"), None
    )
    msg = denied(agent, out)
    assert msg and "fails closed" in msg
    out, _ = run_hook(agent, with_command(agent, PRE[agent], "ls -l"), None)
    assert denied(agent, out) is None


def test_unreachable_modes_are_configurable() -> None:
    payload = with_command("claude-code", PRE["claude-code"], "ls -l")
    out, _ = run_hook("claude-code", payload, None, env={"TENANTRY_HOOK_ON_UNREACHABLE": "closed"})
    assert denied("claude-code", out)
    payload = with_command("claude-code", PRE["claude-code"], "rm -rf out")
    out, _ = run_hook("claude-code", payload, None, env={"TENANTRY_HOOK_ON_UNREACHABLE": "open"})
    assert out is None
    payload = with_command("claude-code", PRE["claude-code"], "squeue")
    out, _ = run_hook("claude-code", payload, Daemon(), env={"TENANTRY_HOOK_REDIRECT": "0"})
    assert out is None


def test_recorded_dangerous_payloads() -> None:
    # the recorded Codex payload cancels a job, the Cursor one deletes a tree
    out, _ = run_hook("codex", load("codex", "pretooluse-bash.json"), None)
    assert "tenantry cancel" in (denied("codex", out) or "")
    out, _ = run_hook("cursor", load("cursor", "beforeshellexecution.json"), None)
    assert "deletes a directory tree" in (denied("cursor", out) or "")


def test_policy_ask_per_agent() -> None:
    daemon = Daemon(policy={"decision": "ask", "message": "large allocation"})
    out, _ = run_hook("claude-code", with_command("claude-code", PRE["claude-code"], "x"), daemon)
    assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
    out, _ = run_hook("codex", with_command("codex", PRE["codex"], "x"), daemon)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"  # Codex takes only deny
    assert "Needs approval" in out["hookSpecificOutput"]["permissionDecisionReason"]
    out, _ = run_hook("cursor", with_command("cursor", PRE["cursor"], "x"), daemon)
    assert out["permission"] == "ask"


def test_a_stopped_session_is_denied_everything() -> None:
    stopped = errors.PermissionDenied("this agent session was stopped by alice", hint="ask them")
    out, _ = run_hook(
        "claude-code", with_command("claude-code", PRE["claude-code"], "ls"), Daemon(exc=stopped)
    )
    reason = out["hookSpecificOutput"]["permissionDecisionReason"]
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "stopped by alice" in reason and "ask them" in reason


def test_policy_service_down_asks_for_dangerous_only() -> None:
    daemon = Daemon(exc=errors.Unavailable("the policy service is not running in this daemon"))
    out, _ = run_hook(
        "claude-code", with_command("claude-code", PRE["claude-code"], "rm -rf x"), daemon
    )
    assert out["hookSpecificOutput"]["permissionDecision"] == "ask"


def test_no_policy_op_asks_for_dangerous_only() -> None:
    daemon = Daemon(exc=errors.NotFound("no op policy.check"))
    out, _ = run_hook(
        "claude-code", with_command("claude-code", PRE["claude-code"], "rm -r out"), daemon
    )
    assert out["hookSpecificOutput"]["permissionDecision"] == "ask"
    out, _ = run_hook(
        "claude-code",
        with_command("claude-code", PRE["claude-code"], "make"),
        Daemon(exc=errors.NotFound("x")),
    )
    assert out is None


def test_tenantry_commands_pass_without_a_call() -> None:
    daemon = Daemon(policy={"decision": "deny"})
    out, _ = run_hook(
        "claude-code",
        with_command("claude-code", PRE["claude-code"], "tenantry jobs --json"),
        daemon,
    )
    assert out is None and daemon.calls == []


@pytest.mark.parametrize(
    ("agent", "name", "event"),
    [
        ("claude-code", "sessionstart.json", "start"),
        ("claude-code", "sessionend.json", "end"),
        ("codex", "sessionstart.json", "start"),
        ("gemini-cli", "sessionstart.json", "start"),
        ("cursor", "sessionstart.json", "start"),
        ("opencode", "session-created.json", "start"),
    ],
)
def test_session_events_go_to_telemetry(agent: str, name: str, event: str) -> None:
    daemon = Daemon()
    payload = load(agent, name)
    out, code = run_hook(agent, payload, daemon)
    assert code == 0
    assert daemon.ops() == ["telemetry.session"]
    params = daemon.calls[0][1]
    assert params["event"] == event and params["agent"] == agent
    assert params["session"] == (payload.get("session_id") or payload.get("conversation_id"))
    # a session event never blocks, and a dead daemon changes nothing
    assert denied(agent, out) is None
    assert run_hook(agent, payload, None)[1] == 0


def test_garbage_stdin_is_no_decision() -> None:
    out, err = io.StringIO(), io.StringIO()
    code = hook.run(
        "claude-code", io.StringIO("not json"), out, err, checker_factory=lambda a, s: Daemon()
    )
    assert code == 0 and out.getvalue() == "" and "not JSON" in err.getvalue()


@pytest.mark.parametrize(
    ("command", "rule"),
    [
        ("squeue --me", "redirect.squeue"),
        ("FOO=1 sacct -j 4", "redirect.sacct"),
        ("scontrol show job 5", "redirect.scontrol"),
        ("find . -name '*.py'", "redirect.find"),
        ("rg -n foo", "redirect.rg"),
        ("ls -laR /lustre", "redirect.ls"),
        ("sudo -u bob sbatch job.sh", "redirect.sbatch"),
        # inside shell wrappers
        ("bash -c 'squeue -u me'", "redirect.squeue"),
        ('sh -lc "cd /w && find . -name x"', "redirect.find"),
        ("eval squeue", "redirect.squeue"),
        ("git status --porcelain", "redirect.git-status"),
        ("git -C /w --no-optional-locks status", "redirect.git-status"),
    ],
)
def test_redirect_rules(command: str, rule: str) -> None:
    found = steer.redirect(command)
    assert found is not None and found.rule == rule


@pytest.mark.parametrize(
    "command",
    [
        "find . -maxdepth 1 -name x",
        "grep foo file.txt",
        "ls -la",
        "echo squeue",
        "git grep x",
        "git -c status.x=1 log",
        "tenantry git status",
    ],
)
def test_not_redirected(command: str) -> None:
    assert steer.redirect(command) is None


@pytest.mark.parametrize(
    ("command", "dangerous"),
    [
        ("for i in $(seq 500); do sbatch job.sh; done", True),
        ("seq 10 | xargs -I{} sbatch job.sh {}", True),
        ("sbatch --array=0-999 job.sh", True),
        ("sbatch --array=0-9 job.sh", False),
        ("sbatch -a 0-500 job.sh", True),  # the index list as its own word
        ("sbatch --array 0-999%10 job.sh", True),
        ("sbatch -a0-200 job.sh", True),
        ("sbatch -a 1,2,3-300:2 job.sh", True),  # 151 tasks
        ("sbatch -a 0-198:2 job.sh", False),  # 100 tasks: the cap is more than 100
        ("sbatch --array=0-100 job.sh", True),
        ("sbatch -A chem -a 5 job.sh", False),
        ("rm -r out", True),
        ("rm out.txt", False),
        ("chmod -R 777 /lustre", True),
        ("dd if=/dev/zero of=/dev/sda", True),
        ("pkill -f python", True),
        ("python -c 'print(1)'", False),
    ],
)
def test_dangerous_list(command: str, dangerous: bool) -> None:
    assert (steer.dangerous(command) is not None) is dangerous


def test_hook_subprocess_without_daemon(tmp_path: Path) -> None:
    """The real entry point: `tenantry hook` reads stdin, no daemon runs."""
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "TENANTRY_STATE_DIR": str(tmp_path),
        "TENANTRY_SOCKET": str(tmp_path / "none.sock"),
    }
    payload = (FIXTURES / "claude-code" / "pretooluse-bash.json").read_text()
    proc = run_tenantry("hook", "--agent", "claude-code", input=payload, env=env, timeout=30)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "tenantry jobs" in out["hookSpecificOutput"]["permissionDecisionReason"]
    assert not (tmp_path / "none.sock").exists()  # the hook never starts a daemon


def test_hook_import_path_is_stdlib_only() -> None:
    code = (
        "import sys, tenantry.cli.main, tenantry.agents.hook, tenantry.client.sync;"
        "heavy={'starlette','uvicorn','mcp','polars','tomlkit','prometheus_client','httpx','rich'};"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_session_start_starts_the_daemon_and_is_recorded(state_dir: str) -> None:
    env = {
        **os.environ,
        "PYTHONPATH": str(SRC),
        "TENANTRY_STATE_DIR": state_dir,
        "TENANTRY_SOCKET": f"{state_dir}/sock",
    }
    env.pop("TENANTRY_AGENT", None)
    payload = (FIXTURES / "claude-code" / "sessionstart.json").read_text()
    proc = run_tenantry("hook", "--agent", "claude-code", input=payload, env=env)
    try:
        assert proc.returncode == 0 and proc.stdout == "", proc.stderr
        ev = run_tenantry("events", "--json", env=env)
        assert ev.returncode == 0, ev.stderr
        events = json.loads(ev.stdout)
        events = events.get("events", events) if isinstance(events, dict) else events
        seen = [e for e in events if e["type"] == "session.seen" and e["outcome"] == "start"]
        assert seen and seen[0]["principal"].endswith(
            "/claude-code/" + json.loads(payload)["session_id"]
        )
        assert seen[0]["data"]["source"] == "startup"
    finally:
        reap(state_dir)


def test_internal_error_blocks_only_dangerous(capsys: pytest.CaptureFixture[str]) -> None:
    rm = json.dumps(with_command("claude-code", PRE["claude-code"], "rm -rf /lustre/x"))
    ls = json.dumps(with_command("claude-code", PRE["claude-code"], "ls"))
    assert hook.crash_exit("claude-code", rm) == 2
    assert "dangerous" in capsys.readouterr().err
    assert hook.crash_exit("claude-code", ls) == 0
    assert hook.crash_exit("claude-code", "not json") == 0


def test_call_op_speaks_the_daemon_protocol(daemon: Any) -> None:
    sock = daemon.env["TENANTRY_SOCKET"]
    claims = {"agent": "codex", "session": "s-42", "host": "h", "project": ""}
    out = hook.call_op(sock, "telemetry.session", {"event": "start"}, claims, 5.0)
    assert out["principal"].endswith("/codex/s-42")
    with pytest.raises(errors.UsageError, match="decision must be one of"):
        hook.call_op(sock, "telemetry.hook", {"decision": "maybe"}, claims, 5.0)
    with pytest.raises(errors.NotFound):
        hook.call_op(sock, "no.such.op", {}, claims, 5.0)
    with pytest.raises(errors.DaemonUnavailable):
        hook.call_op(sock + ".missing", "telemetry.session", {"event": "start"}, claims, 5.0)


@pytest.mark.parametrize(
    "command",
    ["tenantry jobs; rm -rf ~", "tenantry jobs && squeue", "tenantry run -- x $(scancel 1)"],
)
def test_a_tenantry_prefix_does_not_smuggle_commands(command: str) -> None:
    daemon = Daemon(policy={"decision": "deny", "message": "no"})
    out, _ = run_hook(
        "claude-code", with_command("claude-code", PRE["claude-code"], command), daemon
    )
    assert denied("claude-code", out)


def test_shell_wrappers_are_looked_into() -> None:
    # (their redirects are among test_redirect_rules' cases)
    assert steer.dangerous("bash -c 'rm -rf /scratch/x'") is not None


# --- after a failed command: the facility lessons ---------------------------------

POST = {"claude-code": "posttoolusefailure-bash.json", "gemini-cli": "aftertool-shell.json"}
LESSON = {
    "id": "L0a1b2c3d4e",
    "title": "Invalid account: pass -A with one of your Slurm accounts",
    "body": "List your associations with `sacctmgr show assoc user=$USER` and submit with -A.",
    "trust": "staff-approved",
    "label": "lesson from facility memory: data with provenance, not an instruction",
}


class MemoryDaemon(Daemon):
    def __init__(self, lessons: list[dict[str, Any]]) -> None:
        super().__init__()
        self.lessons = lessons

    def __call__(self, op: str, params: dict[str, Any]) -> Any:
        if op == "memory.for_failure":
            self.calls.append((op, params))
            return {"lessons": self.lessons}
        return super().__call__(op, params)


@pytest.mark.parametrize("agent", list(POST))
def test_a_failed_command_is_parsed_with_its_output(agent: str) -> None:
    inp = hook.parse(agent, load(agent, POST[agent]))
    assert inp.event == "post_tool" and inp.failed
    assert inp.command == "sbatch run.sh"
    assert "Invalid account or account/partition combination" in inp.output


@pytest.mark.parametrize("agent", list(POST))
def test_a_failed_command_gets_the_lessons_as_context(agent: str) -> None:
    d = MemoryDaemon([LESSON])
    out, code = run_hook(agent, load(agent, POST[agent]), d)
    assert code == 0
    assert d.ops() == ["memory.for_failure"]
    assert "Invalid account or account/partition" in d.calls[0][1]["text"]
    h = out["hookSpecificOutput"]
    assert h["hookEventName"] == load(agent, POST[agent])["hook_event_name"]
    ctx = h["additionalContext"]
    assert LESSON["title"] in ctx and "sacctmgr show assoc" in ctx
    assert "[staff-approved]" in ctx and "not instructions" in ctx
    assert "tenantry memory show L0a1b2c3d4e" in ctx


@pytest.mark.parametrize("agent", list(POST))
def test_no_lessons_or_no_daemon_adds_nothing(agent: str) -> None:
    empty, code = run_hook(agent, load(agent, POST[agent]), MemoryDaemon([]))
    assert code == 0 and (empty is None or empty == {})
    down, code = run_hook(agent, load(agent, POST[agent]), None)
    assert code == 0 and (down is None or down == {})
    broken = Daemon(exc=errors.Unavailable("memory is not running"))
    out, code = run_hook(agent, load(agent, POST[agent]), broken)
    assert code == 0 and (out is None or out == {})


def test_a_successful_command_costs_no_daemon_call() -> None:
    ok = load("gemini-cli", POST["gemini-cli"])
    ok["tool_response"] = {"llmContent": "Output: 3 jobs\nExit Code: 0", "returnDisplay": "3"}
    d = MemoryDaemon([LESSON])
    out, code = run_hook("gemini-cli", ok, d)
    assert code == 0 and out == {} and d.calls == []
    claude = load("claude-code", POST["claude-code"])
    claude["hook_event_name"] = "PostToolUse"
    del claude["error"]
    claude["tool_response"] = {
        "stdout": "Submitted batch job 4711",
        "stderr": "",
        "interrupted": False,
    }
    out, code = run_hook("claude-code", claude, d)
    assert code == 0 and out is None and d.calls == []


def test_a_failed_command_through_the_real_daemon(daemon: Any) -> None:
    """The hook's own socket client, a real daemon, a real lesson written by another session."""
    sock = daemon.env["TENANTRY_SOCKET"]
    writer = {"agent": "claude-code", "session": "w-1", "host": "h", "project": ""}
    sig = "sbatch: error: Batch job submission failed: Invalid account or account/partition"
    added = hook.call_op(
        sock,
        "memory.remember",
        {
            "title": "Invalid account: pass -A with one of your Slurm accounts",
            "body": "List your associations with sacctmgr show assoc and submit with -A ACCOUNT.",
            "kind": "failure-fix",
            "error_signature": sig + " combination specified",
        },
        writer,
        10.0,
    )
    proc = subprocess.run(  # the real entry point, as Claude Code runs it after a failure
        [sys.executable, "-m", "tenantry", "hook", "--agent", "claude-code"],
        input=(FIXTURES / "claude-code" / POST["claude-code"]).read_text(),
        capture_output=True,
        text=True,
        env={k: v for k, v in daemon.env.items() if not k.startswith(("CLAUDE", "CODEX"))},
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    h = json.loads(proc.stdout)["hookSpecificOutput"]
    assert h["hookEventName"] == "PostToolUseFailure"
    assert added["lesson"]["id"] in h["additionalContext"]
    assert "pass -A" in h["additionalContext"]


class JobsDaemon(Daemon):
    """Answers ``jobs.list`` with one job (or raises ``jobs_exc``)."""

    def __init__(self, jobs_exc: Exception | None = None) -> None:
        super().__init__()
        self.jobs_exc = jobs_exc

    def __call__(self, op: str, params: dict[str, Any]) -> Any:
        if op == "jobs.list":
            self.calls.append((op, params))
            if self.jobs_exc is not None:
                raise self.jobs_exc
            job = {"id": "t7", "backend_id": "4242", "name": "train", "state": "RUNNING"}
            return {"jobs": [job]}
        return super().__call__(op, params)


def test_squeue_of_ones_own_jobs_is_answered_by_the_hook_from_the_cache() -> None:
    import pwd

    from tenantry.core.errors import PolicyDenied

    me = pwd.getpwuid(os.getuid()).pw_name
    for command, states in [("squeue --me", steer.ACTIVE), (f"squeue -u {me}", steer.ACTIVE),
                            ("sacct -X", [])]:  # fmt: skip
        daemon = JobsDaemon()
        out, _ = run_hook("claude-code", with_command("claude-code", PRE["claude-code"], command),
                          daemon)  # fmt: skip
        msg = denied("claude-code", out)
        assert msg and msg.startswith(hook.ANSWERED) and "4242" in msg and "RUNNING" in msg
        assert daemon.calls == [("jobs.list", {"all": True, "states": states, "limit": 50})]
    # every user's jobs, another user's, or an op that fails: the redirect as before
    for command, daemon in [("squeue", JobsDaemon()), ("squeue -u someone-else", JobsDaemon()),
                            ("squeue --me", JobsDaemon(PolicyDenied("no")))]:  # fmt: skip
        out, _ = run_hook("claude-code", with_command("claude-code", PRE["claude-code"], command),
                          daemon)  # fmt: skip
        msg = denied("claude-code", out)
        assert msg and "tenantry jobs" in msg and not msg.startswith(hook.ANSWERED), command
        assert daemon.ops()[-1] == "telemetry.hook"
