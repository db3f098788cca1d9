"""The command hook's lean path: hand the payload to the daemon, print its answer.

``tenantry hook --agent NAME`` runs before every shell command an agent
issues. Deciding in the hook process means importing the decision code
(``steer``: ``re``, ``shlex``; the settings; the principal) on every call.
For a tool event this path instead sends the agent's raw payload to the
daemon's ``POST /v1/hook/<agent>`` (``gateway.hookserve``), which parses,
decides and renders with that same code, and prints the answer: the process
imports only the socket codec and the settings. Nothing here decides: the
verdict is the daemon's, and when the daemon cannot answer (no socket,
refused, an error) the full hook runs on the same payload
(``agents.hook.main``), with its fail-closed list.

Session events (start and end) go to the full hook always: a session start
starts the daemon.
"""

from __future__ import annotations

import sys

from tenantry.client import fastjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "cursor")  # the hook protocols
TOOL_EVENTS = frozenset(
    {
        "PreToolUse",
        "BeforeTool",
        "beforeShellExecution",
        "preToolUse",
        "tool.execute.before",
        "PostToolUse",
        "PostToolUseFailure",
        "AfterTool",
    }
)
TIMEOUT_S = 8.0


def _event(raw: str) -> str:
    try:
        payload = fastjson.loads(raw)
    except ValueError:
        return ""
    if not isinstance(payload, dict):
        return ""
    return str(payload.get("hook_event_name") or payload.get("type") or "")


def ask_daemon(
    socket_path: str, agent: str, raw: str, claims: Mapping[str, str]
) -> tuple[str, int] | None:
    """The daemon's (answer text, exit code) for this payload, or None when it gives none."""
    from tenantry.client import wire

    data = wire.encode_request(
        "POST",
        f"{wire.API}/hook/{agent}",
        raw.encode("utf-8"),
        {wire.PRINCIPAL_HEADER: fastjson.dumps(dict(claims))},
    )
    conn = wire.Connection(socket_path, TIMEOUT_S)
    head: wire.Head | None = None
    body: list[bytes] = []
    try:
        for event in conn.request(data):
            if isinstance(event, wire.Head):
                head = event
            elif isinstance(event, bytes):
                body.append(event)
    except (OSError, wire.WireError):
        return None
    finally:
        conn.close()
    if head is None or head.status != 200:
        return None
    try:
        code = int(head.headers.get("x-tenantry-hook-exit", "0"))
    except ValueError:
        code = 0
    return b"".join(body).decode("utf-8", "replace").strip(), code


def main(agent: str) -> int:
    """The command: the daemon's answer for a tool event, else the full hook."""
    raw = sys.stdin.read()
    if _event(raw) in TOOL_EVENTS:
        try:
            from tenantry.client.principal import client_claims
            from tenantry.core.settings import load

            socket_path = load().socket
            claims = client_claims()
        except Exception:  # a broken config: the full hook says what is wrong
            answer = None
        else:
            claims["agent"] = agent
            answer = ask_daemon(socket_path, agent, raw, claims)
        if answer is not None:
            text, code = answer
            if text:
                sys.stdout.write(text + "\n")
            return code
    import io

    from tenantry.agents import hook

    sys.stdin = io.StringIO(raw)
    return hook.main(agent)
