"""``POST /v1/hook/<agent>``: the daemon answers an agent's tool hook itself.

The command hook (``tenantry hook --agent NAME``) starts a Python process per
shell command of the agent: an interpreter, the decision code and a round
trip to this daemon, about 50 ms of CPU each time. This endpoint takes the
agent's own hook payload (the JSON the command hook reads on stdin) and
answers with what the command hook would print: the same parsing, decision
and rendering (``tenantry.agents.hook``), run here, with each op it asks for
(``policy.check``, ``telemetry.hook``, ``memory.for_failure``) served
in-process through the daemon's one op path (``opserve``: identity, gates,
forwarding to the facility service in facility mode).

Two ways in:

- the daemon's Unix socket (the caller's uid from ``SO_PEERCRED``): the lean
  command hook (``agents.hook_fast``) forwards the raw payload here;
- with ``hook_http = "127.0.0.1:PORT"``, a loopback TCP listener for agents
  whose hooks can be HTTP requests (Claude Code's ``"type": "http"``): no
  process at all per tool call. The caller's uid is the kernel's record of
  the connecting socket (``gateway.tcpcred``); another user's connection is
  refused, as on the Unix socket. Only this endpoint is served there.

A plain ``sbatch SCRIPT`` is submitted here (``hook.decide`` with ``submit``:
Claude Code runs the http hook and the command hook of one tool call in
parallel, and both reach this daemon, so the submission's request id is the
tool call's, ``tool_use_id``, and the second is answered with the first's job).
Its wait is ``SUBMIT_WAIT_S``, inside the agent's hook timeout: an answer that
came too late would let the agent run the command and submit the job twice.

Only tool events are answered here (``PreToolUse`` and the post-tool
failure); session start and end stay with the command hook, which also starts
the daemon. A payload this endpoint cannot decide on gets an empty answer
("no opinion"), as the command hook gives.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import io
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.types import ASGIApp

from tenantry.agents import hook
from tenantry.core import errors
from tenantry.core.errors import NotFound, TenantryError, UsageError
from tenantry.gateway import opserve
from tenantry.gateway.envs import SessionEnvs
from tenantry.gateway.identity import own_peer
from tenantry.gateway.peercred import PEER_KEY, SOCKET_KEY
from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

PREFIX = "/v1/hook/"
OP_TIMEOUT_S = 10.0
SUBMIT_WAIT_S = 7.0  # Claude Code's http hook waits 10 s (agents.products.claude_code)
# the hooks' own threads: a hook never queues behind the store's or the index's work in
# the loop's default executor (each waits on its ops, which run on the loop)
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="hook")
_HOST = os.uname().nodename
_JSON = [(b"content-type", b"application/json")]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


async def call_op(
    rt: Runtime,
    envs: SessionEnvs,
    scope: Scope,
    op: str,
    params: dict[str, Any],
    claims: str,
    request_id: str = "",
) -> Any:
    """One op for the hook's caller, through ``opserve`` (as if sent on the socket)."""
    body = json.dumps(params).encode()
    headers = [
        (opserve.PRINCIPAL_HEADER, claims.encode("latin-1")),
        (b"content-length", str(len(body)).encode()),
    ]
    if request_id:
        headers.append((opserve.REQUEST_ID_HEADER, request_id.encode("latin-1")))
    inner: dict[str, Any] = {
        "type": "http",
        "method": "POST",
        "path": opserve.PREFIX + op,
        "headers": headers,
        PEER_KEY: scope.get(PEER_KEY),
        # the listener the hook came in on: a sandboxed session's socket names that session
        SOCKET_KEY: scope.get(SOCKET_KEY) or rt.settings.socket,
    }
    sent = False
    chunks: list[bytes] = []

    async def receive() -> MutableMapping[str, Any]:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))

    await opserve.serve_op(rt, envs, inner, receive, send)
    reply = json.loads(b"".join(chunks) or b"{}")
    if not isinstance(reply, dict) or not reply.get("ok"):
        raise errors.from_dict((reply or {}).get("error") or {})
    return reply.get("result")


def _event(payload: Any) -> str:
    if not isinstance(payload, dict):
        return ""
    return str(payload.get("hook_event_name") or payload.get("type") or "")


def _tool_call(payload: Any) -> str:
    """The request id of a submission for this tool call ("" when the payload names none)."""
    tool_use = payload.get("tool_use_id") if isinstance(payload, dict) else None
    if not isinstance(tool_use, str) or not tool_use:
        return ""
    return "hook:" + hashlib.sha256(tool_use.encode("utf-8", "replace")).hexdigest()[:40]


def result_of(future: concurrent.futures.Future[Any], op: str) -> Any:
    """The op's result, or ``Unavailable`` once the hook's wait for it is over (the op
    goes on: a submission may still reach Slurm, and the hook must say so)."""
    try:
        return future.result(SUBMIT_WAIT_S if op == "jobs.submit" else OP_TIMEOUT_S)
    except TimeoutError as exc:
        raise errors.Unavailable(f"{op} did not answer in time") from exc


def _claims(raw: bytes) -> dict[str, Any]:
    """What the lean command hook says about its process (its principal header), or {}."""
    try:
        data = json.loads(raw.decode("latin-1")) if raw else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


async def answer(
    rt: Runtime, envs: SessionEnvs, scope: Scope, agent: str, body: bytes, claimed: bytes = b""
) -> tuple[str, int]:
    """The hook's (stdout text, exit code) for one payload, decided in this daemon.

    ``claimed`` is the caller's principal header (the lean command hook sends
    the one the command hook would send; an HTTP hook sends none): the agent
    and the payload's session override what it says, as in the command hook.
    """
    if agent not in hook.AGENTS:
        raise NotFound(f"no hook protocol for agent {agent!r}", hint=f"one of {hook.AGENTS}")
    text = body.decode("utf-8", "replace")
    try:
        payload = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise UsageError("the hook payload is not JSON") from exc
    if hook._EVENTS.get(_event(payload)) not in {"pre_tool", "post_tool"}:
        return "", 0  # session events stay with the command hook (it starts the daemon)
    loop = asyncio.get_running_loop()
    settings = rt.settings
    tool_call = _tool_call(payload)
    config = (bool(settings.hook_redirect), str(settings.hook_on_unreachable))

    def factory(agent_name: str, session: str) -> hook.Checker:
        base = {"host": _HOST, **_claims(claimed), "agent": agent_name}
        if session:
            base["session"] = session
        claims = json.dumps(base)

        def checker(op: str, params: dict[str, Any]) -> Any:
            rid = tool_call if op == "jobs.submit" else ""
            future = asyncio.run_coroutine_threadsafe(
                call_op(rt, envs, scope, op, params, claims, rid), loop
            )
            return result_of(future, op)

        return checker

    def run() -> tuple[str, int]:
        out, err = io.StringIO(), io.StringIO()
        try:
            code = hook.run(
                agent,
                io.StringIO(text),
                out,
                err,
                checker_factory=factory,
                config=config,
                submit=bool(tool_call),
            )
        except Exception as exc:  # the command hook's last resort, here too
            log.exception("hook answer failed")
            code = 2 if hook.crash_exit(agent, text) == 2 else 0
            if code == 2:
                verdict = hook.Verdict(
                    "deny", f"Tenantry: the hook failed ({type(exc).__name__}) and this command"
                    " is on the dangerous list.", "hook.crash")  # fmt: skip
                return hook.render(hook.parse(agent, payload), verdict)[0], 0
        return out.getvalue().strip(), code

    return await loop.run_in_executor(_POOL, run)


async def serve_hook(
    rt: Runtime, envs: SessionEnvs, scope: Scope, receive: Receive, send: Send
) -> int:
    """Answer one ``POST /v1/hook/<agent>``; returns the HTTP status sent."""
    status, data = 200, b""
    try:
        own_peer(scope)  # the daemon's own uid only, on either listener
        body = await opserve.read_body(receive, "", int(rt.settings.max_body_bytes))
        claimed = b""
        for key, value in scope.get("headers") or ():
            if key.lower() == opserve.PRINCIPAL_HEADER:
                claimed = value
        agent = scope["path"][len(PREFIX) :]
        text, code = await answer(rt, envs, scope, agent, body, claimed)
        data = text.encode()
        headers = [*_JSON, (b"x-tenantry-hook-exit", str(code).encode())]
    except TenantryError as err:
        status, envelope = opserve.envelope_of(err)
        data = json.dumps(envelope).encode()
        headers = list(_JSON)
    except Exception as exc:  # answered as the op path answers a bug
        status, envelope = opserve.envelope_of(opserve.internal(exc))
        data = json.dumps(envelope).encode()
        headers = list(_JSON)
    headers.append((b"content-length", str(len(data)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
    return status


def loopback_app(main: Any) -> ASGIApp:
    """The hook listener's app: ``POST /v1/hook/<agent>`` and nothing else."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is the main server's
        rt: Runtime | None = getattr(main.state, "runtime", None)
        if scope["method"] == "POST" and scope["path"].startswith(PREFIX) and rt is not None:
            await serve_hook(rt, main.envs, scope, receive, send)
            return
        err: TenantryError = NotFound("only POST /v1/hook/<agent> is served here")
        if rt is None:
            err = errors.Unavailable("the daemon is not ready yet", hint="retry in a moment")
        status, envelope = opserve.envelope_of(err)
        data = json.dumps(envelope).encode()
        headers = [*_JSON, (b"content-length", str(len(data)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})

    return app


def parse_address(value: str) -> tuple[str, int]:
    """``127.0.0.1:PORT``, ``[::1]:PORT`` or ``PORT``: loopback only."""
    from tenantry.gateway.server import parse_http  # (server imports this module)

    host, number = parse_http(value)
    if host not in {"127.0.0.1", "::1", "localhost"}:
        raise UsageError(
            f"hook_http must be a loopback address, got {host!r}",
            hint="hooks come from agents on this machine: use 127.0.0.1:PORT",
        )
    return ("127.0.0.1" if host == "localhost" else host), number


def bind(value: str) -> socket.socket:
    """The hook listener's socket (bound, not yet listening), or a clear error."""
    host, port = parse_address(value)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family, reuse_port=False)
    except OSError as exc:
        raise UsageError(
            f"cannot listen for agent hooks on {host}:{port}: {exc.strerror}",
            hint="pick another port in hook_http (each user's daemon needs its own)",
        ) from exc
