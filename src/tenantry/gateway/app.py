"""The daemon's ASGI app: lifespan wiring and one op endpoint.

``POST /v1/op/<name>`` runs a registered op for the caller. The caller's uid
comes from the socket (``SO_PEERCRED``); the client only *claims* its agent
product, session, host and project. Every error leaves as one JSON envelope
``{"ok": false, "error": {"code", "message", "retryable", "hint"?}}``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Protocol

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tenantry import __version__
from tenantry.backends.base import Backend
from tenantry.commands.runner import LocalRunner
from tenantry.commands.service import CommandService
from tenantry.core.errors import TenantryError, Unavailable, UsageError
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.settings import Settings
from tenantry.gateway import hookserve, opserve
from tenantry.gateway.envs import SessionEnvs
from tenantry.gateway.identity import own_peer
from tenantry.jobs.service import JobService
from tenantry.safety.sandbox.registry import SandboxRegistry
from tenantry.service.runtime import Component, Runtime
from tenantry.store.journal import Journal
from tenantry.store.url import open_store

log = logging.getLogger(__name__)

SLOW_CLOSE_S = 1.0  # a component that takes longer to close is named in the log

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
    "tenantry.report.live",
    "tenantry.gateway.dashboard.logins",
    "tenantry.memory.ops",
    "tenantry.index.ops",
    "tenantry.leases.ops",
    "tenantry.safety.sandbox.ops",
    "tenantry.facility.ops",
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
    # last: in facility mode it hands the decisions of the others to the facility service
    ("facility", "tenantry.facility.executor:create"),
)


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


# short texts seen to hold no secret (argv words, paths, states: they repeat with
# every command); texts with a finding are never kept
_CLEAN: dict[str, None] = {}
_CLEAN_MAX, _CLEAN_LEN = 4096, 512


def redact_secrets(text: str) -> str:
    from tenantry.safety.guard.secrets import find_secrets, redact

    if not text or text in _CLEAN:
        return text
    hits = find_secrets(text)
    if hits:
        return redact(text, hits)
    if len(text) <= _CLEAN_LEN:
        if len(_CLEAN) >= _CLEAN_MAX:
            _CLEAN.clear()
        _CLEAN[text] = None
    return text


def _load(target: str) -> Callable[[Runtime], Component]:
    module, _, attr = target.partition(":")
    fn: Callable[[Runtime], Component] = getattr(importlib.import_module(module), attr)
    return fn


@asynccontextmanager
async def open_runtime(
    settings: Settings,
    backend: Backend | None = None,
    components: tuple[tuple[str, str], ...] = COMPONENTS,
) -> AsyncIterator[Runtime]:
    """Open the store, backend and components; close them in reverse order."""
    for mod in OP_MODULES:
        importlib.import_module(mod)
    async with AsyncExitStack() as stack:
        store = open_store(settings.store_address)
        await store.start()
        stack.push_async_callback(_timed_close, "store", store)
        journal = Journal(store)
        journal.redact = redact_secrets
        await journal.start()
        stack.push_async_callback(_timed_close, "journal", journal)
        bus = Bus()
        bus.subscribe(journal.add_event)
        backend = backend or make_backend(settings)
        if settings.facility_address:  # an executor: its jobs' states from the facility
            from tenantry.facility.status import with_facility_status

            backend = with_facility_status(backend, settings)
        await backend.start()
        stack.push_async_callback(_timed_close, "backend", backend)
        rt = Runtime(settings, journal, bus, backend)
        runner = LocalRunner(settings.output_cap_bytes, settings.command_timeout_s)
        rt.runner = runner
        core: list[tuple[str, Component]] = [
            ("runner", runner),
            ("jobs", JobService(rt)),
            ("commands", CommandService(rt, runner)),
        ]
        extra = [(name, _load(target)(rt)) for name, target in components]
        for name, comp in core + extra:
            rt.components[name] = comp
            await comp.start()
            stack.push_async_callback(_timed_close, name, comp)
        await bus.publish(Event(EventType.DAEMON_STARTED, "", str(os.getpid()), "ok"))
        try:
            yield rt
        finally:
            await bus.publish(Event(EventType.DAEMON_STOPPED, "", str(os.getpid()), "ok"))


class _Closable(Protocol):
    async def aclose(self) -> None: ...


async def _timed_close(name: str, part: _Closable) -> None:
    """Close ``part``; one that is slow to close is named, so a slow stop says where:
    while it is still closing (every ``SLOW_CLOSE_S``, doubling), and when it is done."""
    start = time.monotonic()
    loop = asyncio.get_running_loop()
    late: list[asyncio.TimerHandle] = []

    def still(after: float) -> None:
        log.warning("closing %s: still under way after %.1f s", name, after)
        late[:] = [loop.call_later(after, still, 2 * after)]

    late.append(loop.call_later(SLOW_CLOSE_S, still, SLOW_CLOSE_S))
    try:
        await part.aclose()
    finally:
        late[0].cancel()
        took = time.monotonic() - start
        if took > SLOW_CLOSE_S:
            log.warning("closing %s took %.1f s", name, took)


class DaemonApp(Starlette):
    """The daemon's app: ``POST /v1/op/<name>`` straight to ``opserve``, the rest to Starlette.

    The op path is every agent command's path, so it skips the router and the
    middleware stack (``gateway.opserve``); health, lifespan and wrong methods
    keep Starlette's handling.
    """

    envs: SessionEnvs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].startswith(opserve.PREFIX)
        ):
            rt: Runtime | None = getattr(self.state, "runtime", None)
            if rt is not None:
                t0 = time.monotonic()
                scope["app"] = self
                status = await opserve.serve_op(rt, self.envs, scope, receive, send)
                opserve.observe(rt, scope["path"][len(opserve.PREFIX) :], status, t0)
                return
        if (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].startswith(hookserve.PREFIX)
        ):
            rt = getattr(self.state, "runtime", None)
            if rt is not None:
                await hookserve.serve_hook(rt, self.envs, scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def _not_ready(request: Request) -> Response:
    return envelope(Unavailable("the daemon is not ready yet", hint="retry in a moment"))


def envelope(err: TenantryError) -> JSONResponse:
    status, body = opserve.envelope_of(err)
    return JSONResponse(body, status_code=status)


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


def create_app(
    settings: Settings,
    backend: Backend | None = None,
    components: tuple[tuple[str, str], ...] = COMPONENTS,
    *,
    on_ready: Callable[[], None] | None = None,
) -> Starlette:
    """The daemon's app; ``on_ready`` is called once its runtime is open, before the
    socket takes requests (the daemon settles its heap there)."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with open_runtime(settings, backend, components) as rt:
            app.state.runtime = rt
            listener = getattr(app.state, "session_listener", None)
            sandbox = rt.components.get("sandbox")
            if listener is not None and isinstance(sandbox, SandboxRegistry):
                await sandbox.attach_listener(listener.listen)
            app.state.started = time.time()
            if on_ready is not None:
                on_ready()
            yield

    app = DaemonApp(
        routes=[
            Route("/v1/health", health, methods=["GET"]),
            Route("/v1/op/{name:path}", _not_ready, methods=["POST"]),
        ],
        lifespan=lifespan,
    )
    app.envs = SessionEnvs()
    return app
