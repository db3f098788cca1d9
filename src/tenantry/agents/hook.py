"""``tenantry hook --agent NAME``: each agent's hook protocol, one decision core.

An agent runs the hook before every shell command and at session start/end,
with the event as JSON on stdin. The hook

1. parses the agent's payload into a ``HookInput`` (``parse``),
2. decides (``decide``): commands starting with ``tenantry`` pass; raw
   scheduler and recursive search commands are redirected to Tenantry; the
   rest go to the daemon's ``policy.check`` op; if the daemon cannot be
   reached, the built-in dangerous list fails closed (``hook_on_unreachable``),
3. answers in the agent's own dialect (``render``): JSON on stdout and an
   exit code. "No objection" is rendered as silence where the agent allows it,
   so the agent's own permission prompts still apply.

Session start/end events go to the daemon as ``telemetry.session`` and never
block; a session start also starts the daemon when none runs (like the CLI),
so the session's commands find policy up. Pre-tool events never start one.
Standard library only: this runs on every tool call.
"""

from __future__ import annotations

import json
import os
import sys

from tenantry.agents import steer

TYPE_CHECKING = False  # the hook's path avoids importing typing (and dataclasses)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any, TextIO

    # A checker calls one daemon op: (op name, params) -> result. It raises
    # tenantry.core.errors.TenantryError (DaemonUnavailable when nothing answers).
    Checker = Callable[[str, dict[str, Any]], Any]

AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "cursor")


class HookInput:
    """The agent-neutral view of one hook payload (plain class: no dataclasses import)."""

    __slots__ = (
        "agent",
        "command",
        "cwd",
        "detail",
        "event",
        "native_event",
        "raw",
        "session",
        "tool",
    )

    def __init__(
        self,
        agent: str,
        event: str,  # pre_tool | session_start | session_end | other
        command: str | None = None,  # the shell command, for pre_tool on a shell tool
        tool: str = "",
        native_event: str = "",
        session: str = "",
        cwd: str = "",
        detail: str = "",  # session source/reason
        raw: dict[str, Any] | None = None,
    ) -> None:
        self.agent, self.event, self.command, self.tool = agent, event, command, tool
        self.native_event, self.session, self.cwd, self.detail = native_event, session, cwd, detail
        self.raw = raw or {}


class Verdict:
    """allow | deny | ask | none (no opinion: the agent decides), why, and which rule."""

    __slots__ = ("decision", "message", "rule")

    def __init__(self, decision: str, message: str = "", rule: str = "") -> None:
        self.decision, self.message, self.rule = decision, message, rule

    def __repr__(self) -> str:
        return f"Verdict({self.decision!r}, {self.message!r}, {self.rule!r})"


# --- parsing ------------------------------------------------------------------

_SHELL_TOOLS = {
    "claude-code": {"Bash"},
    "codex": {"Bash", "shell", "exec_command", "local_shell"},
    "gemini-cli": {"run_shell_command"},
    "cursor": {"Shell", "Bash", "run_terminal_cmd"},
    "opencode": {"bash"},
}
_EVENTS = {
    "PreToolUse": "pre_tool",
    "BeforeTool": "pre_tool",
    "beforeShellExecution": "pre_tool",
    "preToolUse": "pre_tool",
    "tool.execute.before": "pre_tool",
    "SessionStart": "session_start",
    "sessionStart": "session_start",
    "session.created": "session_start",
    "SessionEnd": "session_end",
    "sessionEnd": "session_end",
    "session.deleted": "session_end",
}


def parse(agent: str, payload: Mapping[str, Any]) -> HookInput:
    """The agent-neutral view of one hook payload."""
    native = str(payload.get("hook_event_name") or payload.get("type") or "")
    event = _EVENTS.get(native, "other")
    session = str(
        payload.get("session_id")
        or payload.get("conversation_id")
        or payload.get("sessionID")
        or payload.get("thread_id")
        or ""
    )
    roots = payload.get("workspace_roots") or []
    cwd = str(payload.get("cwd") or (roots[0] if roots else "") or "")
    tool = str(payload.get("tool_name") or payload.get("tool") or "")
    command: str | None = None
    if event == "pre_tool":
        if native == "beforeShellExecution":
            command = str(payload.get("command") or "")
            tool = tool or "shell"
        elif tool in _SHELL_TOOLS.get(agent, set()):
            args = payload.get("tool_input") or payload.get("args") or {}
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    args = {"command": args}
            if isinstance(args, dict):
                cmd = args.get("command", args.get("cmd"))
                if isinstance(cmd, list):
                    cmd = " ".join(str(c) for c in cmd)
                command = str(cmd) if cmd is not None else None
    detail = str(payload.get("source") or payload.get("reason") or payload.get("trigger") or "")
    return HookInput(agent, event, command, tool, native, session, cwd, detail, dict(payload))


# --- deciding -----------------------------------------------------------------


def decide(
    inp: HookInput,
    checker: Checker | None,
    *,
    redirect: bool = True,
    on_unreachable: str = "closed-dangerous",
) -> Verdict:
    """The verdict for one pre-tool event (``none`` when Tenantry has no opinion)."""
    from tenantry.core import errors

    if inp.event != "pre_tool" or not inp.command:
        return Verdict("none")
    command = inp.command
    if steer.only_tenantry(command):  # the daemon applies policy to what it runs
        return Verdict("none", rule="tenantry")
    if redirect:
        found = steer.redirect(command)
        if found:
            return Verdict("deny", found.message, found.rule)
    danger = steer.dangerous(command)
    if checker is None:
        return _unreachable(danger, on_unreachable)
    query = {
        "action": "run_command",
        "command": command,
        "params": {"command": command, "cwd": inp.cwd},
    }
    try:
        result = checker("policy.check", query)
    except errors.PermissionDenied as err:  # policy, budget, a stopped session (kill switch)
        hint = f" ({err.hint})" if err.hint else ""
        return Verdict("deny", f"Tenantry: {err.message}{hint}", err.code)
    except errors.DaemonUnavailable:
        return _unreachable(danger, on_unreachable)
    except (errors.NotFound, errors.UsageError, errors.Unavailable):
        # the daemon runs but without a policy service: local rules only, a person decides
        if danger:
            return Verdict("ask", f"Tenantry: this command {danger.message}.", danger.rule)
        return Verdict("none")
    except errors.TenantryError as err:
        return _unreachable(danger, on_unreachable, str(err))
    return _from_policy(result)


def _unreachable(danger: steer.Finding | None, mode: str, why: str = "") -> Verdict:
    reason = why or "the Tenantry daemon cannot be reached"
    if mode == "open":
        return Verdict("none", rule="unreachable.open")
    if mode == "closed" or danger:
        what = f"this command {danger.message}" if danger else "every shell command is held"
        return Verdict(
            "deny",
            f"Tenantry: {reason}, and {what}; it fails closed. "
            "Start the daemon with `tenantry serve` (or run the command yourself).",
            danger.rule if danger else "unreachable.closed",
        )
    return Verdict("none", rule="unreachable.open")


def _from_policy(result: Any) -> Verdict:
    if not isinstance(result, dict):
        return Verdict("none")
    decision = result.get("decision")
    if decision is None and "allowed" in result:
        decision = "allow" if result["allowed"] else "deny"
    message = str(result.get("message") or result.get("reason") or "")
    rule = str(result.get("rule") or "policy")
    if decision == "deny":
        return Verdict("deny", f"Tenantry policy: {message or 'denied'}", rule)
    if decision == "ask":
        return Verdict("ask", f"Tenantry policy: {message or 'needs approval'}", rule)
    return Verdict("none", message, rule)


# --- rendering ----------------------------------------------------------------


def render(inp: HookInput, verdict: Verdict) -> tuple[str, int]:
    """(stdout, exit code) in the agent's own protocol."""
    agent = inp.agent
    d = verdict.decision
    if agent in {"claude-code", "codex"}:
        if inp.event != "pre_tool" or d in {"none", "allow"}:
            return "", 0  # silence: the agent's own permission flow applies
        if agent == "codex":  # Codex's PreToolUse accepts only "deny"
            reason = verdict.message if d == "deny" else f"Needs approval: {verdict.message}"
            d = "deny"
        else:
            reason = verdict.message
        out = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": d,
                "permissionDecisionReason": reason,
            }
        }
        return json.dumps(out), 0
    if agent == "gemini-cli":
        if inp.event == "pre_tool" and d in {"deny", "ask"}:
            # Gemini CLI hooks cannot ask; the reason goes to the model
            return json.dumps({"decision": "deny", "reason": verdict.message}), 0
        return "{}", 0
    if agent == "cursor":
        if inp.event != "pre_tool":
            return "{}", 0
        if d in {"deny", "ask"}:
            return json.dumps(
                {"permission": d, "user_message": verdict.message, "agent_message": verdict.message}
            ), 0
        return json.dumps({"permission": "allow"}), 0
    # opencode: the plugin Tenantry installs reads this and throws on deny/ask
    return json.dumps({"decision": d, "message": verdict.message}), 0


# --- the command ---------------------------------------------------------------


def daemon_checker(agent: str, session: str, timeout_s: float = 3.0) -> Checker:
    """A checker that calls the running daemon over its socket (never starts one).

    It speaks the daemon's HTTP/JSON protocol with a raw Unix socket instead of
    ``tenantry.client.sync``: ``http.client`` and the e-mail parser it imports cost
    the hook about 40 ms of CPU on every call.
    """
    from tenantry.client.principal import client_claims
    from tenantry.core.settings import load

    settings = load()
    claims = client_claims()
    claims["agent"] = agent
    if session:
        claims["session"] = session
    return lambda op, params: call_op(settings.socket, op, params, claims, timeout_s)


def call_op(
    path: str, op: str, params: dict[str, Any], claims: dict[str, str], timeout_s: float
) -> Any:
    """``POST /v1/op/<op>`` on the daemon socket; the result, or the op's error raised."""
    import socket

    from tenantry.core import errors

    body = json.dumps(params).encode()
    head = (
        f"POST /v1/op/{op} HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
        f"X-Tenantry-Principal: {json.dumps(claims)}\r\n"  # ASCII JSON: no CR/LF inside
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout_s)
    try:
        sock.connect(path)
        sock.sendall(head + body)
        chunks = []
        while True:
            data = sock.recv(65536)
            if not data:
                break
            chunks.append(data)
    except OSError as exc:  # missing socket, refused, timeout, reset
        raise errors.DaemonUnavailable(f"no daemon answers on {path}: {exc}") from exc
    finally:
        sock.close()
    raw = b"".join(chunks)
    header, _, payload = raw.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in header.lower():
        payload = _dechunk(payload)
    try:
        reply = json.loads(payload)
    except ValueError as exc:
        raise errors.DaemonUnavailable("the daemon sent a response that is not JSON") from exc
    if not isinstance(reply, dict):
        raise errors.DaemonUnavailable("the daemon sent an unexpected response")
    if not reply.get("ok"):
        raise errors.from_dict(reply.get("error") or {})
    return reply.get("result")


def _dechunk(data: bytes) -> bytes:
    out = bytearray()
    while data:
        size_line, _, rest = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out += rest[:size]
        data = rest[size + 2 :]
    return bytes(out)


def run(
    agent: str,
    stdin: TextIO,
    stdout: TextIO,
    stderr: TextIO,
    *,
    checker_factory: Callable[[str, str], Checker] | None = None,
    env: Mapping[str, str] | None = None,
) -> int:
    """Read one payload, decide, answer. Returns the exit code."""
    from tenantry.core import errors

    env = os.environ if env is None else env
    raw = stdin.read()
    try:
        payload = json.loads(raw) if raw.strip() else {}
    except ValueError:
        stderr.write("tenantry hook: the payload on stdin is not JSON; no decision\n")
        return 0
    if not isinstance(payload, dict):
        return 0
    inp = parse(agent, payload)
    if inp.event == "session_start" and checker_factory is None:
        _start_daemon()  # a session is starting: have the daemon ready for its commands
    factory = checker_factory or daemon_checker
    checker: Checker | None
    try:
        checker = factory(agent, inp.session)
    except errors.TenantryError:
        checker = None
    if inp.event in {"session_start", "session_end"}:
        _report_session(inp, checker)
        verdict = Verdict("none")
    else:
        redirect_on, mode = _config(env)
        verdict = decide(inp, checker, redirect=redirect_on, on_unreachable=mode)
        if verdict.decision in {"deny", "ask"} and checker is not None:
            _report_decision(inp, verdict, checker)
    text, code = render(inp, verdict)
    if text:
        stdout.write(text + "\n")
    return code


def _start_daemon() -> None:
    from tenantry.client.sync import ensure_daemon
    from tenantry.core import errors
    from tenantry.core.settings import load

    try:  # noqa: SIM105
        ensure_daemon(load(), wait_s=8.0)
    except (errors.TenantryError, OSError):
        pass


def _config(env: Mapping[str, str]) -> tuple[bool, str]:
    from tenantry.core import errors
    from tenantry.core.settings import load

    try:
        settings = load(env)
        redirect_on, mode = settings.hook_redirect, settings.hook_on_unreachable
    except errors.TenantryError:
        redirect_on, mode = True, "closed-dangerous"
    if mode not in {"closed-dangerous", "closed", "open"}:
        mode = "closed-dangerous"
    return redirect_on, mode


def _remember_session(inp: HookInput) -> None:
    """Tell this agent's MCP server (which may not know it) the session id."""
    from tenantry.agents import agent_session
    from tenantry.core import errors
    from tenantry.core.settings import load

    try:
        directory = str(load().state_path / "agent-sessions")
    except errors.TenantryError:
        return
    if inp.event == "session_start":
        agent_session.record(directory, inp.agent, inp.session)
    else:
        agent_session.forget(directory)


def _report_session(inp: HookInput, checker: Checker | None) -> None:
    if inp.session:
        _remember_session(inp)
    if checker is None:
        return
    from tenantry.core import errors

    params = {
        "event": "start" if inp.event == "session_start" else "end",
        "agent": inp.agent,
        "session": inp.session,
        "cwd": inp.cwd,
        "source": inp.detail,
    }
    try:  # noqa: SIM105 - contextlib costs the hook an import
        checker("telemetry.session", params)
    except errors.TenantryError:
        pass  # telemetry never blocks a session


def _report_decision(inp: HookInput, verdict: Verdict, checker: Checker) -> None:
    from tenantry.core import errors

    params = {
        "agent": inp.agent,
        "session": inp.session,
        "decision": verdict.decision,
        "rule": verdict.rule,
        "command": (inp.command or "")[:500],
        "tool": inp.tool,
    }
    try:  # noqa: SIM105
        checker("telemetry.hook", params)
    except errors.TenantryError:
        pass


def main(agent: str) -> int:
    """The command. A bug here never bricks the agent, nor opens the dangerous list."""
    import io

    raw = sys.stdin.read()
    try:
        return run(agent, io.StringIO(raw), sys.stdout, sys.stderr)
    except Exception as exc:  # last resort: decide from the payload alone
        sys.stderr.write(f"tenantry hook: internal error: {type(exc).__name__}: {exc}\n")
        return crash_exit(agent, raw)


def crash_exit(agent: str, raw: str) -> int:
    """Exit code after an internal error: 2 (block, every agent's convention) if dangerous."""
    try:
        inp = parse(agent, json.loads(raw))
    except Exception:
        return 0
    if inp.event == "pre_tool" and inp.command and steer.dangerous(inp.command):
        sys.stderr.write("Tenantry: the hook failed and this command is on the dangerous list.\n")
        return 2
    return 0
