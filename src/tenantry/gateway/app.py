"""The daemon's ASGI app: lifespan wiring and one op endpoint.

``POST /v1/op/<name>`` runs a registered op for the caller. The caller's uid
comes from the socket (``SO_PEERCRED``); the client only *claims* its agent
product, session, host and project. Every error leaves as one JSON envelope
``{"ok": false, "error": {"code", "message", "retryable", "hint"?}}``.
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tenantry import __version__
from tenantry.backends.base import Backend
from tenantry.commands.runner import LocalRunner
from tenantry.commands.service import CommandService
from tenantry.core.errors import (
    BudgetExceeded,
    NotFound,
    PermissionDenied,
    PolicyDenied,
    TenantryError,
    UsageError,
)
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import Principal
from tenantry.core.settings import Settings
from tenantry.gateway import edge
from tenantry.gateway.identity import own_peer, resolve
from tenantry.jobs.service import JobService
from tenantry.safety.sandbox.registry import SandboxRegistry
from tenantry.service.ops import REGISTRY, Op, OpContext, check_fields
from tenantry.service.runtime import Component, Runtime
from tenantry.store.journal import Journal

log = logging.getLogger(__name__)

# Modules whose @op registrations the daemon serves.
OP_MODULES: tuple[str, ...] = (
    "tenantry.service.daemon_ops",
    "tenantry.jobs.ops",
    "tenantry.commands.ops",
    "tenantry.safety.policy.ops",
    "tenantry.agents.ops",
    "tenantry.safety.budgets.ops",
    "tenantry.safety.kill.ops",
    "tenantry.report.ops",
    "tenantry.memory.ops",
    "tenantry.index.ops",
    "tenantry.leases.ops",
    "tenantry.safety.sandbox.ops",
)

# Components started after the core ones, in order: (name, "module:factory").
# A factory takes the Runtime, fills the typed slots its component provides
# (rt.gates, rt.leases, ...: tenantry.service.seams) and returns the component.
COMPONENTS: tuple[tuple[str, str], ...] = (
    ("metrics", "tenantry.gateway.metrics:create"),
    ("sandbox", "tenantry.safety.sandbox.registry:create"),
    ("audit", "tenantry.safety.audit.component:create"),
    ("kill", "tenantry.safety.kill.component:create"),
    ("policy", "tenantry.safety.policy.component:create"),
    ("budgets", "tenantry.safety.budgets.service:create"),
    ("memory", "tenantry.memory.component:create"),
    ("index", "tenantry.index.component:create"),
    ("leases", "tenantry.leases.component:create"),
)

PRINCIPAL_HEADER = "x-tenantry-principal"
REQUEST_ID_HEADER = "x-tenantry-request-id"


def make_backend(settings: Settings) -> Backend:
    if settings.backend == "local":
        from tenantry.backends.local import LocalBackend

        return LocalBackend(settings.state_dir, settings.local_slots)
    if settings.backend == "slurm":
        from tenantry.backends.slurm import SlurmBackend

        backend: Backend = SlurmBackend(settings)
        return backend
    if settings.backend == "fake":
        from tenantry.backends.fake import FakeBackend

        return FakeBackend()
    raise UsageError(f"unknown backend {settings.backend!r}", hint="use local or slurm")


def redact_secrets(text: str) -> str:
    from tenantry.safety.guard.secrets import find_secrets, redact

    return redact(text, find_secrets(text)) if text else text


def _load(target: str) -> Callable[[Runtime], Component]:
    module, _, attr = target.partition(":")
    fn: Callable[[Runtime], Component] = getattr(importlib.import_module(module), attr)
    return fn


@asynccontextmanager
async def open_runtime(
    settings: Settings, backend: Backend | None = None
) -> AsyncIterator[Runtime]:
    """Open the store, backend and components; close them in reverse order."""
    for mod in OP_MODULES:
        importlib.import_module(mod)
    async with AsyncExitStack() as stack:
        journal = Journal(settings.db_path)
        journal.redact = redact_secrets
        await journal.start()
        stack.push_async_callback(journal.aclose)
        bus = Bus()
        bus.subscribe(journal.add_event)
        backend = backend or make_backend(settings)
        await backend.start()
        stack.push_async_callback(backend.aclose)
        rt = Runtime(settings, journal, bus, backend)
        runner = LocalRunner(settings.output_cap_bytes, settings.command_timeout_s)
        rt.runner = runner
        core: list[tuple[str, Component]] = [
            ("runner", runner),
            ("jobs", JobService(rt)),
            ("commands", CommandService(rt, runner)),
        ]
        extra = [(name, _load(target)(rt)) for name, target in COMPONENTS]
        for name, comp in core + extra:
            rt.components[name] = comp
            await comp.start()
            stack.push_async_callback(comp.aclose)
        await bus.publish(Event(EventType.DAEMON_STARTED, "", str(os.getpid()), "ok"))
        try:
            yield rt
        finally:
            await bus.publish(Event(EventType.DAEMON_STOPPED, "", str(os.getpid()), "ok"))


async def principal_of(request: Request) -> Principal:
    """The caller's principal: from the socket it came on (see ``gateway.identity``)."""
    rt: Runtime = request.app.state.runtime
    return await resolve(rt, request.scope, request.headers.get(PRINCIPAL_HEADER, "{}"))


async def read_body(request: Request, cap: int) -> bytes:
    """The request body, refused as soon as it passes ``cap`` bytes (never buffered whole)."""
    too_big = UsageError(
        f"request body over {cap} bytes", hint="send large data as a file path, not inline"
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise too_big
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise too_big
        parts.append(chunk)
    return b"".join(parts)


def envelope(err: TenantryError) -> JSONResponse:
    return JSONResponse({"ok": False, "error": err.to_dict()}, status_code=err.http_status)


def _internal(exc: Exception) -> TenantryError:
    import errno

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


async def _gate(rt: Runtime, op: Op, p: Principal, params: dict[str, Any]) -> list[str]:
    """Checks every op passes before it runs (kill switch, policy, budgets)."""
    warnings: list[str] = []
    for gate in rt.ordered_gates():
        warnings.extend(await gate.gate(p, op.name, op.action, params))
    return warnings


async def op_endpoint(request: Request) -> Response:
    rt: Runtime = request.app.state.runtime
    name = request.path_params["name"]
    p: Principal | None = None
    try:
        p = await principal_of(request)
        op = REGISTRY.get(name)
        if op is None:
            raise NotFound(f"unknown operation {name!r}", hint="see facility.info for the list")
        body = await read_body(request, int(rt.settings.max_body_bytes))
        try:
            params = json.loads(body or b"{}")
        except ValueError as exc:
            raise UsageError(f"request body is not valid JSON: {exc}") from exc
        if not isinstance(params, dict):
            raise UsageError("request body must be a JSON object of parameters")
        edge.check_params(params)
        if op.fields is not None:
            check_fields(params, op.name, op.fields)
        rid = edge.request_id(request.headers.get(REQUEST_ID_HEADER))
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
        warnings = await _gate(rt, op, p, params)
        ctx = OpContext(p, rt, rid)
        if op.streaming:
            return await _stream(op, ctx, params, warnings)
        result = await op.fn(ctx, params)
        out: dict[str, Any] = {"ok": True, "result": result}
        if warnings:
            out["warnings"] = warnings
        return JSONResponse(out)
    except TenantryError as err:
        await _record_denial(rt, p, name, err)
        return envelope(err)
    except Exception as exc:
        return envelope(_internal(exc))


async def _record_denial(rt: Runtime, p: Principal | None, name: str, err: TenantryError) -> None:
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


async def _stream(op: Op, ctx: OpContext, params: dict[str, Any], warnings: list[str]) -> Response:
    gen: AsyncGenerator[dict[str, Any], None] = op.fn(ctx, params)
    try:
        first = await gen.__anext__()
    except StopAsyncIteration:
        return JSONResponse({"ok": True, "result": None})
    # errors before the first chunk are ordinary envelopes (raised to the caller)

    async def body() -> AsyncIterator[bytes]:
        if warnings:
            yield json.dumps({"warnings": warnings}).encode() + b"\n"
        yield json.dumps(first).encode() + b"\n"
        try:
            async for chunk in gen:
                yield json.dumps(chunk).encode() + b"\n"
        except TenantryError as err:
            yield json.dumps({"error": err.to_dict()}).encode() + b"\n"
        except Exception as exc:
            yield json.dumps({"error": _internal(exc).to_dict()}).encode() + b"\n"
        finally:
            await gen.aclose()

    return StreamingResponse(body(), media_type="application/x-ndjson")


async def health(request: Request) -> Response:
    try:
        own_peer(request.scope)  # only the daemon's own callers learn its pid and parts
    except TenantryError as err:
        return envelope(err)
    rt: Runtime = request.app.state.runtime
    return JSONResponse(
        {
            "ok": True,
            "version": __version__,
            "pid": os.getpid(),
            "backend": rt.backend.name,
            "uptime_s": round(time.time() - request.app.state.started, 3),
            "components": sorted(rt.components),
        }
    )


def create_app(settings: Settings, backend: Backend | None = None) -> Starlette:
    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_runtime(settings, backend) as rt:
            app.state.runtime = rt
            listener = getattr(app.state, "session_listener", None)
            sandbox = rt.components.get("sandbox")
            if listener is not None and isinstance(sandbox, SandboxRegistry):
                await sandbox.attach_listener(listener.listen)
            app.state.started = time.time()
            yield

    from starlette.middleware import Middleware

    from tenantry.gateway.metrics import OpMetricsMiddleware

    return Starlette(
        routes=[
            Route("/v1/health", health, methods=["GET"]),
            Route("/v1/op/{name:path}", op_endpoint, methods=["POST"]),
        ],
        middleware=[Middleware(OpMetricsMiddleware)],
        lifespan=lifespan,
    )
