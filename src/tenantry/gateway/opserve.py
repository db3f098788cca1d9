"""``POST /v1/op/<name>``: the daemon's one request path, as a plain ASGI handler.

Every agent command crosses it, so it runs without framework layers: no
request object, router, exception middleware or response task group. The
steps are those of ``docs/architecture.md`` ("The request path"): the
principal from the socket, the body (capped), edge checks, the session seen,
the gates, the op; a result as one JSON envelope, a streaming op as
newline-delimited JSON chunks. A client going away ends a streaming op (its
command is killed), as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, MutableMapping
from typing import Any

from tenantry.core.errors import (
    BudgetExceeded,
    NotFound,
    PermissionDenied,
    PolicyDenied,
    TenantryError,
    UsageError,
)
from tenantry.core.events import Event, EventType
from tenantry.core.jsontext import json_object
from tenantry.core.models import Principal
from tenantry.gateway import edge
from tenantry.gateway.envs import ENV_DIGEST, SessionEnvs
from tenantry.gateway.identity import resolve
from tenantry.gateway.metrics import Metrics
from tenantry.service.ops import REGISTRY, Op, OpContext, ReplyBarrier, check_fields, open_barrier
from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

PREFIX = "/v1/op/"
PRINCIPAL_HEADER = b"x-tenantry-principal"
REQUEST_ID_HEADER = b"x-tenantry-request-id"
_JSON = [(b"content-type", b"application/json")]
_NDJSON = [(b"content-type", b"application/x-ndjson")]


class _Disconnected(Exception):
    """The client went away while the request body was read."""


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()


async def _reply(send: Send, status: int, body: dict[str, Any]) -> None:
    data = _dumps(body)
    headers = [*_JSON, (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})


def envelope_of(err: TenantryError) -> tuple[int, dict[str, Any]]:
    return err.http_status, {"ok": False, "error": err.to_dict()}


def internal(exc: Exception) -> TenantryError:
    if isinstance(exc, OSError) and exc.errno == errno.E2BIG:  # the caller's input, not a bug
        return UsageError(
            "the command line and environment are too large to start the program (E2BIG)",
            hint="pass big data in a file (or stdin) instead of arguments or variables",
        )
    log.exception("internal error")
    return TenantryError(
        f"internal error: {type(exc).__name__}: {exc}",
        hint="this is a Tenantry bug; the daemon is still up. See the daemon log.",
    )


async def read_body(receive: Receive, declared: str, cap: int) -> bytes:
    """The request body, refused as soon as it passes ``cap`` bytes (never buffered whole)."""
    too_big = UsageError(
        f"request body over {cap} bytes", hint="send large data as a file path, not inline"
    )
    if declared.isdigit() and int(declared) > cap:
        raise too_big
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            raise too_big
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


async def gate(rt: Runtime, op: Op, p: Principal, params: dict[str, Any]) -> list[str]:
    """Checks every op passes before it runs (kill switch, policy, budgets, audit)."""
    warnings: list[str] = []
    for g in rt.ordered_gates():
        warnings.extend(await g.gate(p, op.name, op.action, params))
    return warnings


async def record_denial(rt: Runtime, p: Principal | None, name: str, err: TenantryError) -> None:
    """Policy and identity denials become ``request.denied`` events (audited).

    Policy, budget and kill-switch denials publish their own, richer events
    (``policy.decision``, ``budget.exceeded``, ``request.denied``), so they are
    not recorded twice.
    """
    if not isinstance(err, PermissionDenied) or isinstance(err, BudgetExceeded | PolicyDenied):
        return
    if err.code == "session_stopped":
        return
    log.info("denied %s: %s", name, err.message)
    await rt.emit(
        Event(
            EventType.REQUEST_DENIED,
            p.key if p else "",
            name,
            "denied",
            None,
            {"code": err.code, "message": err.message, "rule": err.details.get("rule", "")},
        )
    )


async def serve_op(
    rt: Runtime, envs: SessionEnvs, scope: Scope, receive: Receive, send: Send
) -> int:
    """Answer one ``POST /v1/op/<name>``; returns the HTTP status sent."""
    name = scope["path"][len(PREFIX) :]
    # the op may start before its audit record is durable; no answer leaves before
    barrier = open_barrier()
    headers: dict[bytes, bytes] = {}
    for key, value in scope.get("headers") or ():
        headers[key.lower()] = value
    p: Principal | None = None
    try:
        raw_claims = headers.get(PRINCIPAL_HEADER, b"{}").decode("latin-1")
        if rt.identify is not None:  # the facility service: any uid, proven by the connection
            p = await rt.identify.principal(scope, raw_claims)
        else:
            p = await resolve(rt, scope, raw_claims)
        op = REGISTRY.get(name)
        if op is None:
            raise NotFound(f"unknown operation {name!r}", hint="see facility.info for the list")
        declared = headers.get(b"content-length", b"").decode("latin-1")
        body = await read_body(receive, declared, int(rt.settings.max_body_bytes))
        params = json_object(body, "request body", hint="send a JSON object of parameters")
        edge.check_params(params)
        if ENV_DIGEST in params:  # an environment this session sent before, by its digest
            params = envs.expand(p, params)
        elif isinstance(params.get("env"), dict):
            envs.remember(p, params["env"])
        if op.fields is not None:
            check_fields(params, op.name, op.fields)
        rid = edge.request_id(headers.get(REQUEST_ID_HEADER, b"").decode("latin-1") or None)
        if await rt.journal.touch_session(p):
            await rt.emit(
                Event(
                    EventType.SESSION_SEEN,
                    p.key,
                    p.session,
                    "new",
                    None,
                    {"agent": p.agent.value, "host": p.host, "project": p.project},
                )
            )
        if rt.forwarder is not None and rt.forwarder.forwards(op.name):
            # facility mode: the facility service owns this state, gates and answers it
            result, fwd_warnings = await rt.forwarder.forward(p, op.name, params, rid)
            forwarded: dict[str, Any] = {"ok": True, "result": result}
            if fwd_warnings:
                forwarded["warnings"] = fwd_warnings
            await _reply(send, 200, forwarded)
            return 200
        warnings = await gate(rt, op, p, params)
        ctx = OpContext(p, rt, rid)
        if op.streaming:
            return await _stream(op, ctx, params, warnings, receive, send, barrier)
        result = await op.fn(ctx, params)
        await barrier.wait()
        out: dict[str, Any] = {"ok": True, "result": result}
        if warnings:
            out["warnings"] = warnings
        await _reply(send, 200, out)
        return 200
    except _Disconnected:
        return 499
    except TenantryError as err:
        await record_denial(rt, p, name, err)
        status, body_out = envelope_of(await _settled(barrier, err))
        await _reply(send, status, body_out)
        return status
    except Exception as exc:
        status, body_out = envelope_of(await _settled(barrier, internal(exc)))
        await _reply(send, status, body_out)
        return status


async def _settled(barrier: ReplyBarrier, err: TenantryError) -> TenantryError:
    """The error to answer with, once what the barrier holds is done (or its own error)."""
    try:
        await barrier.wait()
    except TenantryError as audit_err:
        return audit_err
    return err


async def _stream(
    op: Op,
    ctx: OpContext,
    params: dict[str, Any],
    warnings: list[str],
    receive: Receive,
    send: Send,
    barrier: ReplyBarrier,
) -> int:
    gen: AsyncGenerator[dict[str, Any], None] = op.fn(ctx, params)
    try:
        first = await gen.__anext__()
    except StopAsyncIteration:
        await barrier.wait()
        await _reply(send, 200, {"ok": True, "result": None})
        return 200
    try:
        await barrier.wait()
    except BaseException:
        await gen.aclose()
        raise
    # errors before the first chunk are ordinary envelopes (raised to the caller)
    await send({"type": "http.response.start", "status": 200, "headers": _NDJSON})
    if "result" in first:  # the op is done (a short command): no writer or watcher task
        try:
            if warnings:
                await _chunk(send, {"warnings": warnings})
            await _chunk(send, first)
        finally:
            await gen.aclose()
        await send({"type": "http.response.body", "body": b""})
        return 200

    async def body() -> None:
        if warnings:
            await _chunk(send, {"warnings": warnings})
        await _chunk(send, first)
        try:
            async for chunk in gen:
                await _chunk(send, chunk)
        except TenantryError as err:
            await _chunk(send, {"error": err.to_dict()})
        except Exception as exc:
            await _chunk(send, {"error": internal(exc).to_dict()})
        finally:
            await gen.aclose()
        await send({"type": "http.response.body", "body": b""})

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    loop = asyncio.get_running_loop()
    writer = loop.create_task(body())
    watcher = loop.create_task(gone())
    try:
        await asyncio.wait((writer, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (watcher, writer):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
    if writer.done() and not writer.cancelled() and writer.exception() is not None:
        log.error("streaming %s failed", op.name, exc_info=writer.exception())
    return 200


async def _chunk(send: Send, obj: dict[str, Any]) -> None:
    await send({"type": "http.response.body", "body": _dumps(obj) + b"\n", "more_body": True})


def observe(rt: Runtime | None, name: str, status: int, t0: float) -> None:
    """The request's outcome and duration into the ``metrics`` component, when it runs."""
    comp = rt.components.get("metrics") if rt is not None else None
    if isinstance(comp, Metrics):
        outcome = "ok" if status < 400 else ("denied" if status in (403, 429) else "error")
        comp.observe_request(name, outcome, time.monotonic() - t0)
