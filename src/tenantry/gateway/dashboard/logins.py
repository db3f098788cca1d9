"""``facility.dashboard_login``: a user's own login to the facility's dashboard.

The facility service answers it for the proven caller (``SO_PEERCRED`` or
MUNGE): the token names that user and no other (``auth.user_token``), so a
user who opens the link sees their own rows; staff, as themselves, see the
whole facility. Agents get no login.
"""

from __future__ import annotations

from typing import Any

from tenantry.core.errors import PermissionDenied, UsageError
from tenantry.gateway.dashboard.auth import ensure_token, user_token
from tenantry.service.ops import OpContext, op


@op("facility.dashboard_login", "A login link to the facility's dashboard, as yourself")
async def dashboard_login(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    rt, p = ctx.runtime, ctx.principal
    if rt.identify is None:
        raise UsageError(
            "only the facility service issues dashboard logins; this daemon is not one",
            hint="your own daemon's dashboard: its token is <state>/http-token",
        )
    if p.is_agent:
        raise PermissionDenied(
            "an agent gets no dashboard login", hint="the human runs `tenantry facility dashboard`"
        )
    token = user_token(ensure_token(rt.settings.state_dir), p.user)
    http = str(rt.settings.http)
    return {
        "user": p.user,
        "staff": rt.identify.sees_everyone(p),
        "token": token,
        "url": f"http://{http}/login?token={token}" if http else "",
    }
