"""The dashboard's routes: login, pages, approvals, the stylesheet, the raw report and
``/metrics``.

``dashboard_routes(runtime)`` returns Starlette routes (the lead or ``http_app``
mounts them on the TCP listener of ``tenantry serve --http``); ``metrics_route(runtime)``
serves Prometheus text. ``runtime`` may be the Runtime or a zero-argument callable
returning it (the HTTP listener starts before the daemon's lifespan has built the
runtime). Pages are plain HTML with inline SVG charts and one vendored stylesheet: no
JavaScript, no CDN.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from urllib.parse import parse_qs, quote

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from tenantry.gateway.dashboard.auth import (
    COOKIE,
    TOKEN_FILE,
    Auth,
    RuntimeSource,
    ensure_token,
    form_key,
    login_ok,
    owner,
    safe_next,
    secure,
)
from tenantry.gateway.dashboard.facility_page import OWN_PAGES, nav_of, own_only, page_facility
from tenantry.gateway.dashboard.pages import (
    SCOPE_CHOICES,
    page_activity,
    page_leases,
    page_memory,
    page_overview,
    page_policy,
    page_report,
    page_scheduler,
    page_session,
    page_sessions,
    render_report,
)
from tenantry.gateway.dashboard.queries import latest_report, window_of
from tenantry.gateway.dashboard.render import PAGES, e, frame, template
from tenantry.service.runtime import Runtime
from tenantry.store import telemetry as data

# the names other modules import from here
__all__ = [
    "COOKIE",
    "TOKEN_FILE",
    "dashboard_routes",
    "ensure_token",
    "http_app",
    "metrics_route",
    "render_report",
]

Page = Callable[[Request, Runtime, data.Window], Awaitable[str]]


def dashboard_routes(runtime: RuntimeSource) -> list[BaseRoute]:
    auth = Auth(runtime)

    def page(title: str, fn: Page) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            rt = auth.runtime()
            if rt is None:
                return PlainTextResponse("the daemon is starting\n", status_code=503)
            viewer = auth.who(request)
            if viewer is None:
                return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)
            if not viewer.everyone and request.url.path not in OWN_PAGES:
                if request.url.path == "/":
                    return RedirectResponse(OWN_PAGES[0], status_code=303)
                return secure(HTMLResponse(own_only(viewer), status_code=403))
            request.state.viewer = viewer
            w, hours = window_of(request)
            await rt.journal.flush()  # the journal batches telemetry: read everything emitted
            body = await fn(request, rt, w)
            html = frame(request, rt, title, body, hours, nav_of(viewer, rt), viewer.everyone)
            return secure(HTMLResponse(html))

        return endpoint

    async def login_form(request: Request, error: str = "", status: int = 200) -> Response:
        rt = auth.runtime()
        token = request.query_params.get("token")
        viewer = auth.by_token(token) if token and rt is not None else None
        if viewer is not None:
            return login_ok(viewer, request.query_params.get("next", "/"))
        path = Path(rt.settings.state_dir) / TOKEN_FILE if rt else Path("<state>") / TOKEN_FILE
        html = template("login.html").substitute(
            token_path=e(path),
            next=e(safe_next(request.query_params.get("next", "/"))),
            error=f'<p class="error">{e(error)}</p>' if error else "",
        )
        return secure(HTMLResponse(html, status_code=status))

    async def login(request: Request) -> Response:
        body = (await request.body())[:4096].decode(errors="replace")
        form = parse_qs(body)
        token = (form.get("token") or [""])[0].strip()
        viewer = auth.by_token(token)
        if viewer is not None:
            return login_ok(viewer, (form.get("next") or ["/"])[0])
        return await login_form(request, "That token is not right.", 401)

    async def logout(request: Request) -> Response:
        resp = RedirectResponse("/login", status_code=303)
        resp.delete_cookie(COOKIE, path="/")
        return resp

    async def decide(request: Request) -> Response:
        from tenantry.core.errors import TenantryError
        from tenantry.service.ops import REGISTRY, OpContext

        rt = auth.runtime()
        token = auth.token()
        if rt is None or token is None or not auth.full(request):
            return PlainTextResponse("log in first\n", status_code=401)
        form = parse_qs((await request.body())[:4096].decode(errors="replace"))

        def field(name: str) -> str:
            return (form.get(name) or [""])[0]

        if not hmac.compare_digest(field("key"), form_key(token)):
            return PlainTextResponse("this form is stale: reload the page\n", status_code=403)
        scope = field("scope") if field("scope") in SCOPE_CHOICES else "once"
        op = REGISTRY.get("approvals.decide")
        if op is None:
            return PlainTextResponse("the policy service is not running\n", status_code=503)
        params = {"id": field("id"), "scope": scope, "refuse": field("decision") == "refuse"}
        try:
            await op.fn(OpContext(owner(), rt), params)
        except TenantryError as err:
            return PlainTextResponse(f"{err.message}\n", status_code=err.http_status)
        return RedirectResponse("/policy", status_code=303)

    async def css(request: Request) -> Response:
        text = (
            resources.files("tenantry.gateway")
            .joinpath("dashboard/static/dashboard.css")
            .read_text()
        )
        resp = Response(text, media_type="text/css")
        resp.headers["Cache-Control"] = "max-age=300"
        return resp

    async def report_raw(request: Request) -> Response:
        rt = auth.runtime()
        if rt is None or not auth.full(request):
            return PlainTextResponse("log in first\n", status_code=401)
        path = latest_report(rt.settings.state_dir)
        if path is None or path.suffix != ".html":
            return PlainTextResponse("no HTML report\n", status_code=404)
        resp = HTMLResponse(path.read_text(errors="replace"))
        return secure(resp, "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:")

    routes: list[BaseRoute] = [
        Route(href, page(name, fn), methods=["GET"])
        for (href, name), fn in zip(
            PAGES,
            (
                page_overview,
                page_sessions,
                page_activity,
                page_scheduler,
                page_leases,
                page_policy,
                page_memory,
                page_report,
            ),
            strict=True,
        )
    ]
    routes += [
        Route("/session", page("Session", page_session), methods=["GET"]),
        Route("/facility", page("Facility", page_facility), methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["GET"]),
        Route("/approvals", decide, methods=["POST"]),
        Route("/static/dashboard.css", css, methods=["GET"]),
        Route("/report/raw", report_raw, methods=["GET"]),
    ]
    return routes


def metrics_route(runtime: RuntimeSource) -> Route:
    """``/metrics`` in the Prometheus text format (Bearer token or dashboard cookie)."""
    from tenantry.gateway.metrics import Metrics, metrics_endpoint

    auth = Auth(runtime)

    def current() -> Metrics | None:
        rt = auth.runtime()
        comp = rt.components.get("metrics") if rt is not None else None
        return comp if isinstance(comp, Metrics) else None

    inner = metrics_endpoint(current)

    async def endpoint(request: Request) -> Response:
        if not auth.full(request):
            return PlainTextResponse(
                "send Authorization: Bearer <token from <state>/http-token>\n", status_code=401
            )
        resp: Response = await inner(request)
        return resp

    return Route("/metrics", endpoint, methods=["GET"])


def http_app(runtime: RuntimeSource) -> Starlette:
    """The TCP app of ``tenantry serve --http``: dashboard and ``/metrics``."""
    return Starlette(routes=[*dashboard_routes(runtime), metrics_route(runtime)])
