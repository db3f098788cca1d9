"""Dashboard login: the token in ``<state>/http-token`` (0600), the cookie that holds
an HMAC of it, the per-form key of state-changing forms, and the security headers.

The token is pasted into the login form once; scripts and Prometheus send
``Authorization: Bearer <token>``.

In facility mode the service's token is the operator's (every page, every
user). Each user may also log in as themselves with a *user token*
(``u.<user>.<mac>``, an HMAC of the user's name under the service's token) that
the service hands only to that user, proven by their uid
(``tenantry facility dashboard``: ``dashboard.login``). Who a request is, and
whether they see the whole facility, is decided here from the token alone:
``Auth.who``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
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


USER_PREFIX = "u."


def user_token(token: str, user: str) -> str:
    """The dashboard token of ``user`` under the service's ``token`` (facility mode)."""
    mac = hmac.new(token.encode(), f"tenantry-dashboard-user-v1:{user}".encode(), hashlib.sha256)
    return f"{USER_PREFIX}{user}.{mac.hexdigest()}"


def _user_of(value: str) -> str:
    """The user a ``u.<user>.<mac>`` value names ('' when it has not that shape)."""
    if not value.startswith(USER_PREFIX) or "." not in value[len(USER_PREFIX) :]:
        return ""
    return value[len(USER_PREFIX) :].rsplit(".", 1)[0]


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who a dashboard request is, by its token: the principal pages act as, and whether
    they see every user (the token's owner; in facility mode also staff as themselves)."""

    principal: Principal
    everyone: bool
    token: str  # the token that proved it (its cookie is derived from it)

    @property
    def cookie(self) -> str:
        if self.token.startswith(USER_PREFIX):
            return f"{USER_PREFIX}{self.principal.user}.{cookie_value(self.token)}"
        return cookie_value(self.token)


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
        return self.who(request) is not None

    def full(self, request: Request) -> bool:
        """The request may see and act on every user's data (owner or staff)."""
        viewer = self.who(request)
        return viewer is not None and viewer.everyone

    def _user(self, user: str) -> Viewer | None:
        """A user's viewer: only a facility service issues user tokens, for real users."""
        import pwd

        rt, token = self.runtime(), self.token()
        if rt is None or token is None or rt.identify is None or not user:
            return None
        try:
            uid = pwd.getpwnam(user).pw_uid
        except KeyError:
            return None
        p = Principal(uid, user, AgentProduct.HUMAN, "dashboard")
        return Viewer(p, rt.identify.sees_everyone(p), user_token(token, user))

    def by_token(self, given: str) -> Viewer | None:
        """The viewer a pasted or Bearer token proves, or None."""
        token = self.token()
        if not token or not given:
            return None
        if hmac.compare_digest(given, token):
            return Viewer(owner(), True, token)
        viewer = self._user(_user_of(given))
        if viewer is not None and hmac.compare_digest(given, viewer.token):
            return viewer
        return None

    def who(self, request: Request) -> Viewer | None:
        """Who this request is, from its Bearer token or its login cookie (never a field)."""
        token = self.token()
        if not token:
            return None
        auth = request.headers.get("authorization", "")
        if auth.startswith("Bearer "):
            return self.by_token(auth[7:].strip())
        cookie = request.cookies.get(COOKIE, "")
        if not cookie:
            return None
        if hmac.compare_digest(cookie, cookie_value(token)):
            return Viewer(owner(), True, token)
        viewer = self._user(_user_of(cookie))
        if viewer is not None and hmac.compare_digest(cookie, viewer.cookie):
            return viewer
        return None


def secure(resp: Response, csp: str = CSP) -> Response:
    resp.headers["Content-Security-Policy"] = csp
    resp.headers["X-Content-Type-Options"] = "nosniff"
    resp.headers["Referrer-Policy"] = "no-referrer"
    resp.headers["Cache-Control"] = "no-store"
    return resp


def safe_next(value: str) -> str:
    return value if value.startswith("/") and not value.startswith("//") else "/"


def login_ok(viewer: Viewer, next_url: str) -> Response:
    resp = RedirectResponse(safe_next(next_url), status_code=303)
    resp.set_cookie(
        COOKIE,
        viewer.cookie,
        httponly=True,
        samesite="strict",
        path="/",
        max_age=7 * 86400,
    )
    return resp
