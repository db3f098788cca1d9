"""Dashboard login: the token in ``<state>/http-token`` (0600), the cookie that holds
an HMAC of it, the per-form key of state-changing forms, and the security headers.

The token is pasted into the login form once; scripts and Prometheus send
``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from pathlib import Path

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from tenantry.core.models import AgentProduct, Principal
from tenantry.service.runtime import Runtime

COOKIE = "tenantry_dashboard"
TOKEN_FILE = "http-token"  # noqa: S105 - a file name, not a secret
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; frame-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)

RuntimeSource = Runtime | Callable[[], Runtime | None]


def ensure_token(state_dir: str | Path) -> str:
    """The dashboard token, created (0600) on first use."""
    path = Path(state_dir) / TOKEN_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    token = secrets.token_urlsafe(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(token + "\n")
    return token


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"tenantry-dashboard-v1", hashlib.sha256).hexdigest()


def form_key(token: str) -> str:
    """The hidden field every state-changing form carries (on top of the SameSite cookie)."""
    return hmac.new(token.encode(), b"tenantry-dashboard-form-v1", hashlib.sha256).hexdigest()


def owner() -> Principal:
    """Who acts from the dashboard: the daemon's own user, a human (the token holder)."""
    import pwd

    uid = os.getuid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    return Principal(uid, user, AgentProduct.HUMAN, "dashboard")


class Auth:
    """Who may see the dashboard: the holder of the daemon's token."""

    def __init__(self, source: RuntimeSource) -> None:
        self.source = source
        self._token: str | None = None

    def runtime(self) -> Runtime | None:
        return self.source if isinstance(self.source, Runtime) else self.source()

    def token(self) -> str | None:
        if self._token is None:
            rt = self.runtime()
            if rt is None:
                return None
            self._token = ensure_token(rt.settings.state_dir)
        return self._token

    def ok(self, request: Request) -> bool:
        token = self.token()
        if not token:
            return False
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer ") and hmac.compare_digest(auth[7:].strip(), token):
            return True
        cookie = request.cookies.get(COOKIE, "")
        return bool(cookie) and hmac.compare_digest(cookie, cookie_value(token))


def secure(resp: Response, csp: str = CSP) -> Response:
    resp.headers["Content-Security-Policy"] = csp
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-store"
    return resp


def safe_next(value: str) -> str:
    return value if value.startswith("/") and not value.startswith("//") else "/"


def login_ok(auth: Auth, next_url: str) -> Response:
    resp = RedirectResponse(safe_next(next_url), status_code=303)
    resp.set_cookie(
        COOKIE,
        cookie_value(auth.token() or ""),
        httponly=True,
        samesite="strict",
        path="/",
        max_age=7 * 86400,
    )
    return resp
